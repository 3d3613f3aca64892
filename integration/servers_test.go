//go:build integration && linux

package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// serverCase is one server of the example and how the suite checks it.
type serverCase struct {
	name  string   // the server's name; its fleet file is <name>.yaml
	files []string // the example files it needs
	port  string   // its port in the example
	// asUser runs procfleet as this user (root only; as anyone else
	// procfleet runs as the test's user).
	asUser string
	// needsRoot: the case is about procfleet running as root.
	needsRoot bool
	postgres  bool // copy a ready cluster into run/postgres
	// setup are edits of <name>.yaml made before up starts (example
	// ports), each an old and a new text.
	setup [][2]string
	// editOld and editNew are an args edit of <name>.yaml (example ports).
	editOld, editNew string
	// serving checks the server answers its own protocol.
	serving func(f *fleet) error
	// edited checks the running server has the edit; leader is its main
	// process.
	edited func(f *fleet, leader proc) error
}

func (c serverCase) options() fleetOptions {
	o := fleetOptions{files: c.files, postgres: c.postgres}
	if os.Geteuid() == 0 {
		o.asUser = c.asUser
	}
	return o
}

var nginxCase = serverCase{
	name:    "nginx",
	files:   []string{"nginx.yaml", "nginx.conf"},
	port:    "22080",
	editOld: `"daemon off;"]`,
	editNew: `"daemon off; worker_rlimit_nofile 4096;"]`,
	serving: func(f *fleet) error {
		code, body, err := httpGet(fmt.Sprintf("http://127.0.0.1:%d/health", f.port("22080")))
		if err != nil || code != 200 || body != "ok\n" {
			return fmt.Errorf("GET /health: %d %q %v", code, body, err)
		}
		return nil
	},
	edited: func(f *fleet, leader proc) error {
		// The master's title holds its command line.
		if !strings.Contains(strings.Join(leader.cmdline, " "), "worker_rlimit_nofile 4096;") {
			return fmt.Errorf("master's command line %s lacks the edit", leader.title())
		}
		return nil
	},
}

var redisCase = serverCase{
	name:    "redis",
	files:   []string{"redis.yaml"},
	port:    "22379",
	editOld: `--appendonly, "no"]`,
	editNew: `--appendonly, "no", --maxmemory, 64mb]`,
	serving: func(f *fleet) error {
		if got, err := exchange(f.port("22379"), "PING\r\n", "\r\n"); err != nil || got != "+PONG\r\n" {
			return fmt.Errorf("PING: %q %v", got, err)
		}
		return nil
	},
	edited: func(f *fleet, _ proc) error {
		got, err := client("redis-cli", "-h", "127.0.0.1", "-p", strconv.Itoa(f.port("22379")), "config", "get", "maxmemory")
		if err != nil || !strings.Contains(got, "67108864") {
			return fmt.Errorf("CONFIG GET maxmemory: %q %v", got, err)
		}
		return nil
	},
}

// postgresRoot is postgres with procfleet as root: postgres.sh drops to
// the user postgres with setpriv.
var postgresRoot = serverCase{
	name:      "postgres",
	files:     []string{"postgres.yaml", "postgres.sh"},
	port:      "22432",
	needsRoot: true,
	postgres:  true,
	editOld:   `args: [-p, "22432"]`,
	editNew:   `args: [-p, "22432", -c, work_mem=8MB]`,
	serving: func(f *fleet) error {
		if got, err := psql(f, "select 1"); err != nil || got != "1" {
			return fmt.Errorf("select 1: %q %v", got, err)
		}
		return nil
	},
	edited: func(f *fleet, _ proc) error {
		if got, err := psql(f, "show work_mem"); err != nil || got != "8MB" {
			return fmt.Errorf("show work_mem: %q %v", got, err)
		}
		return nil
	},
}

// postgresAsUser is postgres with procfleet itself running as the user
// postgres (as root: procfleet is started as that user; as anyone else:
// as the test's user).
var postgresAsUser = func() serverCase {
	c := postgresRoot
	c.needsRoot = false
	c.asUser = postgresOSUser
	return c
}()

var memcachedCase = serverCase{
	name:    "memcached",
	files:   []string{"memcached.yaml"},
	port:    "22211",
	editOld: `-m, "16"`,
	editNew: `-m, "32"`,
	serving: func(f *fleet) error {
		if got, err := exchange(f.port("22211"), "version\r\n", "\r\n"); err != nil || !strings.HasPrefix(got, "VERSION ") {
			return fmt.Errorf("version: %q %v", got, err)
		}
		return nil
	},
	edited: func(f *fleet, _ proc) error {
		got, err := exchange(f.port("22211"), "stats settings\r\n", "END\r\n")
		if err != nil || !strings.Contains(got, "STAT maxbytes 33554432\r\n") {
			return fmt.Errorf("stats settings: %q %v", got, err)
		}
		return nil
	},
}

func psql(f *fleet, query string) (string, error) {
	return client("psql", "-h", "127.0.0.1", "-p", strconv.Itoa(f.port("22432")), "-U", "postgres", "-d", "postgres", "-XAtc", query)
}

// redisUntitled is the control case: redis told not to set its title
// keeps the command line procfleet recorded, so a procfleet that checks
// command lines can stop and replace it (issue 21 found it worked where
// redis's default failed). It shows the scenarios can pass, and separates
// what the title costs from everything else.
var redisUntitled = func() serverCase {
	c := redisCase
	c.setup = [][2]string{{`--appendonly, "no"]`, `--appendonly, "no", --set-proc-title, "no"]`}}
	c.editOld = `--set-proc-title, "no"]`
	c.editNew = `--set-proc-title, "no", --maxmemory, 64mb]`
	return c
}()

func TestNginx(t *testing.T)          { runScenarios(t, nginxCase) }
func TestRedis(t *testing.T)          { runScenarios(t, redisCase) }
func TestRedisUntitled(t *testing.T)  { runScenarios(t, redisUntitled) }
func TestPostgres(t *testing.T)       { runScenarios(t, postgresRoot) }
func TestPostgresAsUser(t *testing.T) { runScenarios(t, postgresAsUser) }
func TestMemcached(t *testing.T)      { runScenarios(t, memcachedCase) }

// scenarios run in this order, each on a fresh fleet.
var scenarios = []struct {
	name string
	run  func(f *fleet, c serverCase)
}{
	{"ready", scenarioReady},
	{"kill", scenarioKill},
	{"edit", scenarioEdit},
	{"adopt", scenarioAdopt},
	{"down", scenarioDown},
	{"agree", scenarioAgree},
}

func runScenarios(t *testing.T, c serverCase) {
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			if c.needsRoot && os.Geteuid() != 0 {
				t.Skipf("procfleet as root: the suite runs as uid %d", os.Geteuid())
			}
			f := newFleet(t, c.options())
			for _, e := range c.setup {
				f.edit(c.name+".yaml", e[0], e[1])
			}
			sc.run(f, c)
		})
	}
}

// start runs up and waits for the server to be Ready; it returns its
// status and the fleet's live processes then.
func start(f *fleet, c serverCase) (serverStatus, []proc) {
	f.t.Helper()
	f.startUp()
	st := f.waitReady(c.name, 0)
	return st, live(f.snapshot(fmt.Sprintf("with %s Ready (pid %d)", c.name, st.PID)))
}

// leaderOf returns the process pid of procs.
func leaderOf(f *fleet, procs []proc, pid int) proc {
	f.t.Helper()
	for _, p := range procs {
		if p.pid == pid {
			return p
		}
	}
	f.t.Fatalf("pid %d, which status names, is not among the fleet's processes:\n%s", pid, table(procs, f.scanSpec()))
	return proc{}
}

// checkInstance fails the test unless every live process of the fleet
// belongs to the instance led by leader (it and its descendants), and the
// server's port is held by that instance alone.
func checkInstance(f *fleet, c serverCase, procs []proc, leader int) {
	f.t.Helper()
	in := descendants(procs, leader)
	var stray []proc
	holders := 0
	for _, p := range procs {
		if !in[p.pid] {
			stray = append(stray, p)
		}
		if in[p.pid] && slices.Contains(p.listens, f.port(c.port)) {
			holders++
		}
	}
	if len(stray) > 0 {
		f.t.Errorf("processes of the fleet outside the instance of pid %d (left over):\n%s", leader, table(stray, f.scanSpec()))
	}
	if holders == 0 {
		f.t.Errorf("port %d is not held by the instance of pid %d", f.port(c.port), leader)
	}
}

// checkGone fails the test for every process of old still running.
func checkGone(f *fleet, old []proc, what string) {
	f.t.Helper()
	var left []proc
	for _, p := range old {
		if stillRunning(p) {
			left = append(left, p)
		}
	}
	if len(left) > 0 {
		f.t.Errorf("%s: processes of the old instance still running:\n%s", what, table(left, f.scanSpec()))
	}
}

func scenarioReady(f *fleet, c serverCase) {
	st, procs := start(f, c)
	checkInstance(f, c, procs, st.PID)
	if err := c.serving(f); err != nil {
		f.t.Errorf("%s is Ready but does not answer: %v", c.name, err)
	}
}

func scenarioKill(f *fleet, c serverCase) {
	st, before := start(f, c)
	leader := leaderOf(f, before, st.PID)
	if !killPinned(leader, goneBound) {
		f.t.Fatalf("pid %d did not exit %s after SIGKILL", leader.pid, goneBound)
	}
	exited := time.Now()
	f.snapshot(fmt.Sprintf("right after the SIGKILL of pid %d", leader.pid))
	observeOrphans(f, before, leader, exited)
	st2 := f.waitReady(c.name, st.PID)
	after := live(f.snapshot(fmt.Sprintf("with %s restarted (pid %d)", c.name, st2.PID)))
	checkGone(f, before, "after the restart")
	checkInstance(f, c, after, st2.PID)
	if err := c.serving(f); err != nil {
		f.t.Errorf("%s restarted but does not answer: %v", c.name, err)
	}
}

// orphanWatch bounds how long observeOrphans watches the other processes
// of a killed leader's instance: long enough to tell the ones that end on
// their own (postgres's children) from the ones that never do (nginx's
// workers).
const orphanWatch = 3 * time.Second

// observeOrphans logs what the other processes of the instance of a
// leader just killed do on their own: how long until they are gone, or
// that they still run after orphanWatch. It asserts nothing: procfleet
// acts meanwhile, and the checks after the restart judge it.
func observeOrphans(f *fleet, before []proc, leader proc, exited time.Time) {
	f.t.Helper()
	var others []proc
	for _, p := range before {
		if p.pid != leader.pid {
			others = append(others, p)
		}
	}
	if len(others) == 0 {
		f.t.Logf("pid %d had no other process", leader.pid)
		return
	}
	running := func() (n int) {
		for _, p := range others {
			if stillRunning(p) {
				n++
			}
		}
		return n
	}
	if _, ok := f.poll(orphanWatch, func() (bool, string) { return running() == 0, "" }); ok {
		f.t.Logf("the %d other process(es) of pid %d's instance were gone %s after its exit", len(others), leader.pid, time.Since(exited).Round(time.Millisecond))
	} else {
		f.t.Logf("%d of the %d other process(es) of pid %d's instance still ran %s after its exit", running(), len(others), leader.pid, time.Since(exited).Round(time.Millisecond))
	}
}

func scenarioEdit(f *fleet, c serverCase) {
	st, before := start(f, c)
	f.edit(c.name+".yaml", c.editOld, c.editNew)
	st2 := f.waitReady(c.name, st.PID)
	after := live(f.snapshot(fmt.Sprintf("with %s replaced (pid %d)", c.name, st2.PID)))
	checkGone(f, before, "after the replacement")
	checkInstance(f, c, after, st2.PID)
	if err := c.edited(f, leaderOf(f, after, st2.PID)); err != nil {
		f.t.Errorf("the new %s does not run with the edit: %v", c.name, err)
	}
}

func scenarioAdopt(f *fleet, c serverCase) {
	st, before := start(f, c)
	// What the instance is made of for good: the processes of two scans.
	// One seen once may be a child the server made for a moment (postgres
	// forks a backend for each connection, the probe's included).
	before = stable(before, live(f.procs()))
	f.killUp()
	checkSame(f, before, st.PID, "after up was killed")
	f.startUp()
	st2 := f.waitReady(c.name, 0)
	after := live(f.snapshot("after up was started again"))
	if st2.PID != st.PID {
		f.t.Errorf("%s was not adopted: pid %d Ready before up was killed, pid %d after (restarts %d)", c.name, st.PID, st2.PID, st2.Restarts)
	}
	checkSame(f, before, st.PID, "after up was started again")
	checkInstance(f, c, after, st.PID)
	if bad := f.agree(c.name); len(bad) > 0 {
		f.t.Errorf("after adoption, status and describe disagree:\n%s", strings.Join(bad, "\n"))
	}
}

func procKey(p proc) string { return fmt.Sprintf("%d/%d", p.pid, p.start) }

// stable returns the processes of a that b has too.
func stable(a, b []proc) []proc {
	inB := map[string]bool{}
	for _, p := range b {
		inB[procKey(p)] = true
	}
	var out []proc
	for _, p := range a {
		if inB[procKey(p)] {
			out = append(out, p)
		}
	}
	return out
}

// checkSame fails the test unless every process of before still runs
// (nothing of the instance led by leader was signalled) and every other
// live process of the fleet descends from that instance: a child the
// server forks on its own (a postgres backend for a probe's connection)
// is the same instance, a second instance would not descend from it.
func checkSame(f *fleet, before []proc, leader int, what string) {
	f.t.Helper()
	now := live(f.procs())
	in := descendants(now, leader)
	was := map[string]bool{}
	for _, p := range before {
		was[procKey(p)] = true
	}
	var added []proc
	for _, p := range now {
		if !was[procKey(p)] && !in[p.pid] {
			added = append(added, p)
		}
		delete(was, procKey(p))
	}
	if len(added) > 0 {
		f.t.Errorf("%s: new processes outside the instance of pid %d:\n%s", what, leader, table(added, f.scanSpec()))
	}
	if len(was) > 0 {
		f.t.Errorf("%s: %d process(es) of the instance gone (%v)", what, len(was), was)
	}
}

func scenarioDown(f *fleet, c serverCase) {
	start(f, c)
	r := f.cli("down", "-f", ".")
	if r.code != 0 {
		f.t.Errorf("down failed:\n%s", r)
	}
	checkNothingLeft(f, []string{c.port}, "after down")
	if _, err := os.Stat(filepath.Join(f.state, "servers", c.name+".json")); err == nil {
		f.t.Errorf("after down, the record servers/%s.json is still there", c.name)
	}
}

// checkNothingLeft fails the test for every live process of the fleet and
// every one of ports (example ports) something listens on.
func checkNothingLeft(f *fleet, ports []string, what string) {
	f.t.Helper()
	procs := live(f.snapshot(what))
	if len(procs) > 0 {
		f.t.Errorf("%s: %d process(es) of the fleet still running:\n%s", what, len(procs), table(procs, f.scanSpec()))
	}
	for _, p := range ports {
		if portListening(f.port(p)) {
			f.t.Errorf("%s: port %d still has a listener", what, f.port(p))
		}
	}
}

func scenarioAgree(f *fleet, c serverCase) {
	st, before := start(f, c)
	leader := leaderOf(f, before, st.PID)
	if bad := f.agree(c.name, leader); len(bad) > 0 {
		f.t.Errorf("with %s Ready, status and describe disagree:\n%s", c.name, strings.Join(bad, "\n"))
	}
	// After an args edit, whatever procfleet makes of it: replaced, or
	// refused with the old process left running.
	f.edit(c.name+".yaml", c.editOld, c.editNew)
	settle(f, c.name, st.PID)
	if bad := f.agree(c.name, leader); len(bad) > 0 {
		f.t.Errorf("after an args edit of %s, status and describe disagree:\n%s", c.name, strings.Join(bad, "\n"))
	}
}

// settle waits until the server is Ready with a pid other than old, or
// has been Quarantined or Failed for stuckBound, bounded by readyBound.
func settle(f *fleet, name string, old int) serverStatus {
	f.t.Helper()
	var last serverStatus
	var stuck streak
	if _, ok := f.poll(readyBound, func() (bool, string) {
		last = f.status(name)
		if last.Phase == "Running" && last.Ready && last.PID != old {
			return true, ""
		}
		return stuck.held(last.Phase == "Quarantined" || last.Phase == "Failed", stuckBound), last.String()
	}); !ok {
		f.t.Fatalf("%s did not settle within %s; status: %s", name, readyBound, last)
	}
	return last
}
