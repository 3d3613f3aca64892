//go:build soak && linux

package soak

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/procfleet/procfleet/internal/testserver"
)

var (
	flagDuration = flag.Duration("soak.duration", 2*time.Minute, "whole soak run; faults stop 30 s before its end")
	flagSeed     = flag.Int64("soak.seed", 0, "random seed (0: from the clock); printed so that a run can be replayed")
	flagServers  = flag.Int("soak.servers", 30, "servers declared at the start")
	flagConverge = flag.Duration("soak.converge", 75*time.Second, "bound on convergence once faults stop (the 30 s resync, restart back-off and a margin)")
	flagKeep     = flag.Bool("soak.keep", false, "keep the temporary folder (fleet, state, logs, stamps)")
	flagReport   = flag.String("soak.report", "", "also write the figures as JSON to this file")
	flagBinary   = flag.String("soak.procfleet", "", "use this procfleet binary instead of building ./cmd/procfleet")
	flagFaults   = flag.String("soak.faults", "kill,stopcont,portgrab,badfile,addremove,killup,corrupt,stranger,exec,pgid,foreign,intent", "fault kinds to inject (comma-separated)")
	flagInPlace  = flag.Bool("soak.inplace", true, "write fleet files in place (O_TRUNC, then write); false: atomically (temp file, rename)")
)

const (
	// maxKills bounds SIGKILLs per server so that restart back-off (1 s x
	// 2^(n-2)) stays a few seconds and convergence stays bounded.
	maxKills = 4
	// faultQuiet is the time left at the end of -soak.duration for
	// convergence and down.
	faultQuiet = 30 * time.Second
	// stopBound bounds a removed server's stop (grace 5 s + kill 5 s + port
	// release 5 s, and a margin).
	stopBound = 30 * time.Second
	// recoverBound bounds a recovery measured during the faults: the 30 s
	// resync (a port released by a stranger is only seen then) and a margin.
	recoverBound = 45 * time.Second
)

// server is one server of the soak's fleet, declared or not.
type server struct {
	name string
	port int
	// launch is how it is started: launchPlain (the test server itself),
	// launchShExec (`sh -c 'exec testserver ...'`), launchShim (a shim
	// script that execs /usr/bin/env, which execs the test server, as
	// pyenv's do) or launchRetitle (the test server rewriting its own
	// argument area and wiping its environment, as nginx does).
	launch string
	// argv is the test server's command line, what the process shows once
	// the launcher exec'd it; title is what a retitling server shows after
	// it rewrote itself ("" for the others). keys holds the argv keys of
	// both: a process showing either is an instance of this server.
	argv  []string
	title string
	keys  []string
	// edits counts the edits of its file (fault "exec"): SOAK_EDIT in its
	// environment, so that an edit replaces the process and leaves its
	// command line as it was.
	edits    int
	file     string
	content  []byte
	declared bool
	busy     bool
	kills    int
	// grabber is the stranger holding this server's port, nil when none.
	grabber *stranger
	// tainted holds the pids whose record the soak corrupted, with the
	// corruption's kind.
	tainted map[int]string
}

// stranger is a process the soak started that procfleet must never signal.
type stranger struct {
	kind    string // "argv" (a server's exact command line), "port" or "group"
	server  string
	pid     int
	start   uint64
	sigFile string
	// member is, for a "group" stranger (the leader of its own process
	// group), the other process of its group; it records signals to the
	// same file.
	member   proc
	cmd      *exec.Cmd
	done     chan struct{}
	expected atomic.Bool
	stopped  atomic.Bool // seen in state T
}

// foreignServer is a server procfleet started from another state folder
// (fault "foreign"): its record was copied into the soak's folder, so the
// soak's procfleet must never act on it.
type foreignServer struct {
	name    string // the soak server whose record name it took
	dir     string // its project folder: fleet/, state/
	proc    proc
	sigFile string
}

// upProc is one run of `procfleet up`.
type upProc struct {
	cmd  *exec.Cmd
	done chan struct{}
	log  string
}

type harness struct {
	t      *testing.T
	seed   int64
	start  time.Time
	rngMu  sync.Mutex
	rng    *rand.Rand
	root   string
	fleet  string
	state  string
	run    string
	bin    string // procfleet
	server string // testserver
	self   string // this test binary (strangers)
	secret string
	want   map[string]string // argv key -> server name; immutable after setup

	exclusive  sync.RWMutex // killup holds it; faults that need `up` running hold it shared
	statusFile atomic.Bool  // no `status` command: read status.json
	journalMu  sync.Mutex
	faultWG    sync.WaitGroup

	mu         sync.Mutex
	servers    map[string]*server
	names      []string
	strangers  map[int]*stranger
	violations []string
	seenDup    map[string]bool
	faults     map[string]int
	counts     map[string]int
	recover    map[string][]time.Duration
	up         *upProc
	upRuns     int
	foreigns   []*foreignServer
	victims    []string       // servers killed by the final burst
	victimPIDs map[string]int // and the pids killed
}

func TestSoak(t *testing.T) {
	seed := *flagSeed
	if seed == 0 {
		seed = time.Now().UnixNano()
	}
	t.Logf("soak seed %d (replay with -soak.seed=%d), duration %s, %d servers", seed, seed, *flagDuration, *flagServers)
	h := newHarness(t, seed)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	h.build()
	h.writeFleet()
	h.startUp()
	coldStart := time.Now()
	if !h.waitConverged(ctx, 90*time.Second, nil, time.Now()) {
		h.fatalf("the fleet did not converge at the start within 90 s")
	}
	h.setCount("coldStartMs", int(time.Since(coldStart).Milliseconds()))

	scanCtx, stopScan := context.WithCancel(ctx)
	scanDone := make(chan struct{})
	go func() { defer close(scanDone); h.scanLoop(scanCtx) }()

	faultFor := *flagDuration - faultQuiet - time.Since(h.start)
	if faultFor < 20*time.Second {
		faultFor = 20 * time.Second
	}
	h.logf("injecting faults for %s", faultFor.Round(time.Second))
	chaosCtx, stopChaos := context.WithTimeout(ctx, faultFor)
	h.chaos(chaosCtx)
	stopChaos()
	h.faultWG.Wait()
	t0 := h.finalBurst()
	h.logf("faults stopped; waiting for convergence (bound %s)", *flagConverge)

	conv := map[string]time.Duration{}
	// Per server, when its process is seen running with its port accepting
	// (10 ms resolution); the status polls (250 ms) confirm procfleet's view.
	upCtx, stopUpWatch := context.WithCancel(ctx)
	upAt := make(chan map[string]time.Duration, 1)
	go func() { upAt <- h.watchRunning(upCtx, t0) }()
	if !h.waitConverged(ctx, *flagConverge, conv, t0) {
		h.violation("convergence: not converged within %s after the faults stopped", *flagConverge)
	}
	stopUpWatch()
	for n, d := range <-upAt {
		if c, ok := conv[n]; ok && d < c {
			conv[n] = d
		}
	}
	h.setCount("convergeAllMs", int(time.Since(t0).Milliseconds()))
	stopScan()
	<-scanDone

	h.checkConverged(ctx)
	h.checkSecret()
	h.downAndCheck(ctx)
	h.report(conv)
}

func newHarness(t *testing.T, seed int64) *harness {
	root, err := os.MkdirTemp("", "procfleet-soak-")
	if err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{
		t:         t,
		seed:      seed,
		start:     time.Now(),
		rng:       rand.New(rand.NewSource(seed)),
		root:      root,
		fleet:     filepath.Join(root, "fleet"),
		state:     filepath.Join(root, "state"),
		run:       filepath.Join(root, "run"),
		self:      self,
		secret:    fmt.Sprintf("soak-secret-%d", seed),
		want:      map[string]string{},
		servers:   map[string]*server{},
		strangers: map[int]*stranger{},
		seenDup:   map[string]bool{},
		faults:    map[string]int{},
		counts:    map[string]int{},
		recover:   map[string][]time.Duration{},
	}
	for _, d := range []string{h.fleet, h.run} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(h.cleanup)
	return h
}

func (h *harness) logf(format string, args ...any) {
	h.t.Helper()
	h.t.Logf("[%7.2fs] %s", time.Since(h.start).Seconds(), fmt.Sprintf(format, args...))
}

func (h *harness) fatalf(format string, args ...any) {
	h.t.Helper()
	h.dumpUpLog()
	h.t.Fatalf(format, args...)
}

// violation records a broken invariant; the test fails at its end with all
// of them.
func (h *harness) violation(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	h.journal("VIOLATION %s", msg)
	h.mu.Lock()
	h.violations = append(h.violations, fmt.Sprintf("[%.2fs] %s", time.Since(h.start).Seconds(), msg))
	h.mu.Unlock()
	h.t.Logf("[%7.2fs] VIOLATION: %s", time.Since(h.start).Seconds(), msg)
}

// journal appends a line to run/faults.log: what the soak did, when, to
// which server and pid, so that a violation can be read against it.
func (h *harness) journal(format string, args ...any) {
	line := fmt.Sprintf("%8.3fs %s\n", time.Since(h.start).Seconds(), fmt.Sprintf(format, args...))
	h.journalMu.Lock()
	defer h.journalMu.Unlock()
	f, err := os.OpenFile(filepath.Join(h.run, "faults.log"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return
	}
	_, _ = f.WriteString(line)
	_ = f.Close()
}

func (h *harness) count(key string, n int) {
	h.mu.Lock()
	h.counts[key] += n
	h.mu.Unlock()
}

func (h *harness) setCount(key string, n int) {
	h.mu.Lock()
	h.counts[key] = n
	h.mu.Unlock()
}

func (h *harness) recovered(kind string, d time.Duration) {
	h.mu.Lock()
	h.recover[kind] = append(h.recover[kind], d)
	h.mu.Unlock()
}

func (h *harness) intn(n int) int {
	h.rngMu.Lock()
	defer h.rngMu.Unlock()
	return h.rng.Intn(n)
}

func (h *harness) between(lo, hi time.Duration) time.Duration {
	return lo + time.Duration(h.intn(int(hi-lo)/int(time.Millisecond)+1))*time.Millisecond
}

// pause waits d, or less when ctx ends; it paces the faults, it waits for
// nothing.
func pause(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// ---- setup -----------------------------------------------------------------

func (h *harness) build() {
	h.server = testserver.Build(h.t)
	h.bin = filepath.Join(h.root, "procfleet")
	if *flagBinary != "" {
		h.bin = *flagBinary
		return
	}
	_, file, _, _ := runtime.Caller(0)
	repo := filepath.Dir(filepath.Dir(file))
	// The tag compiles in the pause between the intent record and the full
	// one that the "intent" fault uses (actuate/testhook_pause_linux.go).
	cmd := exec.Command("go", "build", "-tags", "procfleet_testhooks", "-o", h.bin, "./cmd/procfleet")
	cmd.Dir = repo
	if out, err := cmd.CombinedOutput(); err != nil {
		h.t.Fatalf("build procfleet: %v\n%s", err, out)
	}
	out, err := exec.Command(h.bin, "up", "--help").CombinedOutput()
	if err != nil {
		h.t.Fatalf("procfleet has no up command yet: %v\n%s", err, out)
	}
}

// pickPorts chooses n distinct free ports below the kernel's ephemeral range,
// so that other programs' outgoing connections do not take them.
func (h *harness) pickPorts(n int) []int {
	lo, hi := 20000, 32000
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if l, err := strconv.Atoi(f[0]); err == nil && l > 12000 {
				hi = l
				lo = l - 12000
			}
		}
	}
	seen := map[int]bool{}
	var ports []int
	for len(ports) < n {
		p := lo + h.intn(hi-lo)
		if seen[p] {
			continue
		}
		seen[p] = true
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			continue
		}
		_ = l.Close()
		ports = append(ports, p)
	}
	return ports
}

// Launchers (server.launch).
const (
	launchPlain   = "plain"
	launchShExec  = "sh-exec"
	launchShim    = "shim"
	launchRetitle = "retitle"
)

// launchOf spreads the launchers over the fleet: half the servers start
// through one that changes what the process shows after the spawn.
func launchOf(i int) string {
	switch {
	case i%4 == 1:
		return launchShExec
	case i%8 == 3:
		return launchShim
	case i%8 == 7:
		return launchRetitle
	}
	return launchPlain
}

// shim is a pyenv-style shim: a script that execs /usr/bin/env, which
// execs the program named in its arguments.
const shim = "#!/bin/sh\n# procfleet soak: a pyenv-style shim\nexec /usr/bin/env \"$@\"\n"

// writeFleet makes the servers (the declared ones and 10 spares that
// "addremove" may declare) and writes the declared ones' files.
func (h *harness) writeFleet() {
	if err := os.WriteFile(filepath.Join(h.run, "shim"), []byte(shim), 0o700); err != nil {
		h.t.Fatal(err)
	}
	n := *flagServers
	total := n + 10
	ports := h.pickPorts(total)
	for i := 0; i < total; i++ {
		name := fmt.Sprintf("s%02d", i)
		port := ports[i]
		argv := []string{h.server, "-port", strconv.Itoa(port),
			"-stamp", filepath.Join(h.run, name+".stamp"),
			"-signals", filepath.Join(h.run, name+".signals")}
		s := &server{name: name, port: port, launch: launchOf(i), tainted: map[int]string{},
			file: filepath.Join(h.fleet, name+".yaml")}
		if s.launch == launchRetitle {
			// The title names the soak's private folder, like every argv
			// of its fleet, so that the cleanup's scan cannot match
			// another run's processes.
			s.title = fmt.Sprintf("soak %s: master process %s", name, h.root)
			argv = append(argv, "-retitle", s.title, "-retitle-wipe-env")
			s.keys = append(s.keys, s.title)
		}
		s.argv = argv
		s.keys = append(s.keys, argvKey(argv))
		s.content = h.fleetFile(s)
		h.servers[name] = s
		h.names = append(h.names, name)
		for _, k := range s.keys {
			h.want[k] = name
		}
		if i < n {
			s.declared = true
			if err := os.WriteFile(s.file, s.content, 0o600); err != nil {
				h.t.Fatal(err)
			}
		}
	}
}

// shows reports whether a command line (as cmdlineOf returns it) is one
// an instance of s shows.
func (s *server) shows(cmdline string) bool {
	for _, k := range s.keys {
		if cmdline == k {
			return true
		}
	}
	return false
}

// command is the command line the fleet file declares for s.
func (h *harness) command(s *server) []string {
	switch s.launch {
	case launchShExec:
		q := make([]string, len(s.argv))
		for i, a := range s.argv {
			q[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		return []string{"/bin/sh", "-c", "exec " + strings.Join(q, " ")}
	case launchShim:
		return append([]string{filepath.Join(h.run, "shim")}, s.argv...)
	}
	return s.argv
}

func (h *harness) fleetFile(s *server) []byte {
	cmd := h.command(s)
	quoted := make([]string, len(cmd))
	for i, a := range cmd {
		quoted[i] = strconv.Quote(a)
	}
	return []byte(fmt.Sprintf(`# procfleet soak server %s (%s)
apiVersion: procfleet.dev/v1alpha1
kind: Server
metadata:
  name: %s
spec:
  command: [%s]
  port: %d
  env:
    - name: SOAK_SECRET
      value: %q
    - name: SOAK_EDIT
      value: "%d"
  startupTimeoutSeconds: 20
  terminationGracePeriodSeconds: 5
  killTimeoutSeconds: 5
`, s.name, s.launch, s.name, strings.Join(quoted, ", "), s.port, h.secret, s.edits))
}

func (h *harness) startUp() { h.startUpEnv(nil) }

// startUpEnv starts `procfleet up` with env added to the soak's own.
func (h *harness) startUpEnv(env []string) {
	h.mu.Lock()
	h.upRuns++
	n := h.upRuns
	h.mu.Unlock()
	logPath := filepath.Join(h.run, fmt.Sprintf("up-%d.log", n))
	f, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		h.t.Fatal(err)
	}
	defer f.Close()
	cmd := exec.Command(h.bin, "up", "-f", h.fleet, "--state-dir", h.state)
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		h.t.Fatalf("start procfleet up: %v", err)
	}
	u := &upProc{cmd: cmd, done: make(chan struct{}), log: logPath}
	h.journal("up run %d started: pid %d", n, cmd.Process.Pid)
	go func() { _ = cmd.Wait(); close(u.done) }()
	h.mu.Lock()
	h.up = u
	h.mu.Unlock()
}

func (h *harness) dumpUpLog() {
	h.mu.Lock()
	u := h.up
	h.mu.Unlock()
	if u == nil {
		return
	}
	b, _ := os.ReadFile(u.log)
	if len(b) > 8000 {
		b = b[len(b)-8000:]
	}
	h.t.Logf("tail of %s:\n%s", u.log, b)
}

// ---- observation -------------------------------------------------------------

type statusJSON struct {
	Servers []struct {
		Name     string `json:"name"`
		Phase    string `json:"phase"`
		Ready    bool   `json:"ready"`
		PID      int    `json:"pid"`
		Port     int    `json:"port"`
		Restarts int    `json:"restarts"`
		Reason   string `json:"reason"`
		Message  string `json:"message"`
	} `json:"servers"`
	Errors []struct {
		File    string `json:"file"`
		Line    int    `json:"line"`
		Field   string `json:"field"`
		Message string `json:"message"`
	} `json:"errors"`
}

type serverStatus = struct {
	Name     string `json:"name"`
	Phase    string `json:"phase"`
	Ready    bool   `json:"ready"`
	PID      int    `json:"pid"`
	Port     int    `json:"port"`
	Restarts int    `json:"restarts"`
	Reason   string `json:"reason"`
	Message  string `json:"message"`
}

func (st statusJSON) get(name string) (serverStatus, bool) {
	for _, s := range st.Servers {
		if s.Name == name {
			return s, true
		}
	}
	return serverStatus{}, false
}

// procfleet runs the procfleet binary with a bound and returns its stdout,
// stderr and exit code (-1 when it could not run or timed out).
func (h *harness) procfleet(ctx context.Context, timeout time.Duration, args ...string) (string, string, int) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, h.bin, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) && ctx.Err() == nil {
			code = ee.ExitCode()
		} else {
			code = -1
		}
	}
	return out.String(), errb.String(), code
}

func (h *harness) status(ctx context.Context) (statusJSON, error) {
	var st statusJSON
	if h.statusFile.Load() {
		// No status command in this procfleet: read what up writes.
		b, err := os.ReadFile(filepath.Join(h.state, "status.json"))
		if err == nil {
			err = json.Unmarshal(b, &st)
		}
		return st, err
	}
	out, errOut, code := h.procfleet(ctx, 15*time.Second, "status", "-o", "json", "-f", h.fleet, "--state-dir", h.state)
	if code != 0 && strings.Contains(errOut, "unknown command") {
		h.statusFile.Store(true)
		h.logf("this procfleet has no status command: reading state/status.json instead")
		h.setCount("statusFromFile", 1)
		return h.status(ctx)
	}
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		return st, fmt.Errorf("status -o json (exit %d): %w: %s %s", code, err, out, errOut)
	}
	return st, nil
}

// liveInstances returns the server's live processes that are not the soak's
// strangers. Call with h.mu held.
func (h *harness) liveInstancesLocked(ps []proc) []proc {
	var live []proc
	for _, p := range ps {
		if !p.live() {
			continue
		}
		if st, ok := h.strangers[p.pid]; ok && st.start == p.start {
			continue
		}
		live = append(live, p)
	}
	return live
}

// instances scans /proc for the server's live processes.
func (h *harness) instances(s *server) []proc {
	want := map[string]string{}
	for _, k := range s.keys {
		want[k] = s.name
	}
	procs := scanProcs(want)
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.liveInstancesLocked(procs[s.name])
}

// instance returns the server's one live process.
func (h *harness) instance(s *server) (proc, bool) {
	live := h.instances(s)
	if len(live) != 1 {
		return proc{}, false
	}
	return live[0], true
}

// lastStart returns the pid of the server's most recent start (the last line
// of its stamp file), when that process is alive with the server's command
// line. It costs a few small reads, not a /proc scan.
func (h *harness) lastStart(s *server) (int, bool) {
	b, err := os.ReadFile(filepath.Join(h.run, s.name+".stamp"))
	if err != nil {
		return 0, false
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	f := strings.Fields(lines[len(lines)-1])
	if len(f) != 2 {
		return 0, false
	}
	pid, err := strconv.Atoi(f[1])
	if err != nil {
		return 0, false
	}
	if p, ok := readProc(pid); !ok || !p.live() || !s.shows(cmdlineOf(pid)) {
		return pid, false
	}
	return pid, true
}

// runningAgain reports whether a start newer than old is alive and its port
// accepts.
func (h *harness) runningAgain(s *server, old int) bool {
	pid, ok := h.lastStart(s)
	return ok && pid != old && portAccepts(s.port)
}

func portAccepts(port int) bool {
	c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), 300*time.Millisecond)
	if err != nil {
		return false
	}
	_ = c.Close()
	return true
}

func (h *harness) recordPath(name string) string {
	return filepath.Join(h.state, "servers", name+".json")
}

// replaceRecord puts b in place of server name's record atomically (a
// temp file of mode 0600, renamed over it), as a careful hand edit or a
// copy does: nothing but the content gives it away.
func (h *harness) replaceRecord(name string, b []byte) error {
	tmp := filepath.Join(h.run, "."+name+".json.tmp")
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, h.recordPath(name))
}

// movedAside lists the records of server name that procfleet moved aside:
// untrusted (.corrupt-<time>) or foreign (.foreign-<time>).
func (h *harness) movedAside(name string) []string {
	corrupt, _ := filepath.Glob(h.recordPath(name) + ".corrupt-*")
	foreign, _ := filepath.Glob(h.recordPath(name) + ".foreign-*")
	return append(corrupt, foreign...)
}

// recordProblem says what is wrong with the record of server name, running
// as pid, by procfleet's own rules (a regular file of ours, mode 0600,
// naming that server and pid); "" when it is good.
func (h *harness) recordProblem(name string, pid int) string {
	path := h.recordPath(name)
	fi, err := os.Lstat(path)
	if err != nil {
		return err.Error()
	}
	if !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o600 {
		return fmt.Sprintf("mode %v, want a regular file with mode 0600", fi.Mode())
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
		return fmt.Sprintf("owned by uid %d", st.Uid)
	}
	b, err := os.ReadFile(path)
	var rec struct {
		PID  int    `json:"pid"`
		PGID int    `json:"pgid"`
		Name string `json:"name"`
	}
	if err != nil || json.Unmarshal(b, &rec) != nil || rec.PID != pid || rec.Name != name {
		return fmt.Sprintf("not a record of pid %d: %v %q", pid, err, b)
	}
	if rec.PGID != rec.PID {
		return fmt.Sprintf("pgid %d, not its pid %d (rule 7: untrusted)", rec.PGID, rec.PID)
	}
	return ""
}

// waitFor polls cond every 10 ms until it holds (true), bound passes or ctx
// ends (false), and returns the time it took.
func waitFor(ctx context.Context, bound time.Duration, cond func() bool) (time.Duration, bool) {
	t0 := time.Now()
	deadline := t0.Add(bound)
	for {
		if cond() {
			return time.Since(t0), true
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return time.Since(t0), false
		}
		pause(ctx, 10*time.Millisecond)
	}
}

// scanLoop checks the continuous invariants every 20 ms: never two live
// instances of a server; no stranger stopped.
func (h *harness) scanLoop(ctx context.Context) {
	for ctx.Err() == nil {
		procs := scanProcs(h.want)
		h.mu.Lock()
		var dups [][]proc
		var dupNames []string
		for name, ps := range procs {
			if live := h.liveInstancesLocked(ps); len(live) > 1 {
				dups = append(dups, live)
				dupNames = append(dupNames, name)
			}
		}
		var stoppedStrangers []*stranger
		for _, st := range h.strangers {
			if st.expected.Load() || st.stopped.Load() {
				continue
			}
			for _, q := range []proc{{pid: st.pid, start: st.start}, st.member} {
				if q.pid == 0 {
					continue
				}
				if p, ok := readProc(q.pid); ok && p.start == q.start && (p.state == 'T' || p.state == 't') {
					st.stopped.Store(true)
					stoppedStrangers = append(stoppedStrangers, st)
					break
				}
			}
		}
		h.mu.Unlock()
		for i, live := range dups {
			h.confirmDuplicate(dupNames[i], live)
		}
		for _, st := range stoppedStrangers {
			h.count("strangersSignalled", 1)
			h.violation("stranger signalled: %s stranger pid %d (server %s) is stopped (state T)", st.kind, st.pid, st.server)
		}
		pause(ctx, 20*time.Millisecond)
	}
}

// confirmDuplicate re-reads the processes of a duplicate seen in one scan:
// all must still be alive with the same start time and command line.
func (h *harness) confirmDuplicate(name string, live []proc) {
	s := h.servers[name]
	var still []string
	var key []string
	for _, p := range live {
		q, ok := readProc(p.pid)
		if !ok || !q.live() || q.start != p.start || !s.shows(cmdlineOf(p.pid)) {
			continue
		}
		ppid := 0
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.pid)); err == nil {
			if i := bytes.LastIndexByte(b, ')'); i > 0 {
				if f := strings.Fields(string(b[i+2:])); len(f) > 1 {
					ppid, _ = strconv.Atoi(f[1])
				}
			}
		}
		still = append(still, fmt.Sprintf("pid %d (start %d, ppid %d, state %c)", p.pid, p.start, ppid, q.state))
		key = append(key, strconv.Itoa(p.pid))
	}
	if len(still) < 2 {
		return
	}
	sort.Strings(key)
	k := name + ":" + strings.Join(key, ",")
	h.mu.Lock()
	seen := h.seenDup[k]
	h.seenDup[k] = true
	h.mu.Unlock()
	if seen {
		return
	}
	h.count("duplicates", 1)
	h.violation("duplicate: server %s has %d live instances: %s", name, len(still), strings.Join(still, "; "))
}

// ---- strangers ---------------------------------------------------------------

// startStranger starts this test binary as a stranger with the given argv
// (a server's exact command line, or a made-up one). listen > 0 makes it hold
// that port; it returns nil when the port was taken.
func (h *harness) startStranger(kind, serverName string, argv []string, listen int) (*stranger, error) {
	h.mu.Lock()
	n := len(h.strangers)
	h.mu.Unlock()
	st := &stranger{kind: kind, server: serverName, done: make(chan struct{}),
		sigFile: filepath.Join(h.run, fmt.Sprintf("stranger-%d-%s-%s.signals", n, kind, serverName))}
	cmd := exec.Command(h.self)
	cmd.Args = argv
	cmd.Env = append(os.Environ(), envStranger+"=1", envStrangerSignals+"="+st.sigFile)
	memberFile := ""
	if kind == "group" {
		memberFile = st.sigFile + ".member"
		cmd.Env = append(cmd.Env, envStrangerMember+"="+memberFile)
	}
	if listen > 0 {
		cmd.Env = append(cmd.Env, envStrangerListen+"="+strconv.Itoa(listen))
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	// Registered under h.mu together with the start, so that a scan never
	// sees a stranger with a server's command line before knowing it.
	h.mu.Lock()
	if err := cmd.Start(); err != nil {
		h.mu.Unlock()
		return nil, fmt.Errorf("start stranger: %w", err)
	}
	st.cmd, st.pid = cmd, cmd.Process.Pid
	if p, ok := readProc(st.pid); ok {
		st.start = p.start
	}
	h.strangers[st.pid] = st
	h.mu.Unlock()

	lines := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(out).ReadString('\n')
		lines <- strings.TrimSpace(line)
		_, _ = io.Copy(io.Discard, out)
	}()
	go func() {
		_ = cmd.Wait()
		if !st.expected.Load() {
			h.count("strangersSignalled", 1)
			h.violation("stranger signalled: %s stranger pid %d (server %s) ended on its own: %v", st.kind, st.pid, st.server, cmd.ProcessState)
		}
		close(st.done)
	}()
	var line string
	select {
	case line = <-lines:
	case <-time.After(15 * time.Second):
		line = "timeout"
	}
	if line != "ready" {
		h.stopStranger(st)
		if line == "bind-failed" {
			return nil, nil
		}
		return nil, fmt.Errorf("stranger for %s: %q", serverName, line)
	}
	if memberFile != "" {
		b, err := os.ReadFile(memberFile)
		pid, aerr := strconv.Atoi(strings.TrimSpace(string(b)))
		m, ok := readProc(pid)
		if err != nil || aerr != nil || !ok {
			h.stopStranger(st)
			return nil, fmt.Errorf("group stranger for %s: its member: %v %v %q", serverName, err, aerr, b)
		}
		h.mu.Lock()
		st.member = m
		h.mu.Unlock()
	}
	h.count("strangers-"+kind, 1)
	return st, nil
}

// stopStranger kills a stranger (an expected end) and waits for it.
// argvStrangerAliveLocked reports whether a stranger started with the
// command line of server name still runs. h.mu is held.
func (h *harness) argvStrangerAliveLocked(name string) bool {
	for _, st := range h.strangers {
		if st.kind != "argv" || st.server != name {
			continue
		}
		if p, ok := readProc(st.pid); ok && p.live() && p.start == st.start {
			return true
		}
	}
	return false
}

func (h *harness) stopStranger(st *stranger) {
	if st == nil || !st.expected.CompareAndSwap(false, true) {
		return
	}
	_ = syscall.Kill(st.pid, syscall.SIGKILL)
	select {
	case <-st.done:
	case <-time.After(10 * time.Second):
		h.violation("stranger pid %d did not die after SIGKILL within 10 s", st.pid)
	}
	h.mu.Lock()
	m := st.member
	h.mu.Unlock()
	if m.pid != 0 && processAlive(m) {
		_ = syscall.Kill(m.pid, syscall.SIGKILL)
	}
}

// ---- faults ------------------------------------------------------------------

type fault struct {
	kind   string
	weight int
	fn     func(ctx context.Context) bool
}

// chaos injects faults until ctx ends, then waits for none: in-flight faults
// are awaited by the caller through faultWG.
func (h *harness) chaos(ctx context.Context) {
	faults := []fault{
		{"kill", 5, h.faultKill},
		{"stopcont", 3, h.faultStopCont},
		{"portgrab", 2, h.faultPortGrab},
		{"badfile", 3, h.faultBadFile},
		{"addremove", 3, h.faultAddRemove},
		{"killup", 1, h.faultKillUp},
		{"corrupt", 1, h.faultCorrupt},
		{"stranger", 2, h.faultStranger},
		{"exec", 2, h.faultExecEdit},
		{"pgid", 1, h.faultPGID},
		{"foreign", 1, h.faultForeign},
		{"intent", 1, h.faultIntent},
	}
	enabled := map[string]bool{}
	for _, k := range strings.Split(*flagFaults, ",") {
		enabled[strings.TrimSpace(k)] = true
	}
	total := 0
	for i := range faults {
		if !enabled[faults[i].kind] {
			faults[i].weight = 0
		}
		total += faults[i].weight
	}
	if *flagBinary != "" {
		for i := range faults {
			if faults[i].kind == "intent" && faults[i].weight > 0 {
				// The pause it needs is compiled in only by the soak's
				// own build.
				h.logf("fault intent off: -soak.procfleet names a binary the soak did not build")
				total -= faults[i].weight
				faults[i].weight = 0
			}
		}
	}
	if total == 0 {
		h.t.Fatalf("-soak.faults=%q enables no known fault", *flagFaults)
	}
	// The schedule (kinds and pauses) has its own generator, so that a seed
	// replays it exactly; targets depend on the fleet's state at the time.
	sched := rand.New(rand.NewSource(h.seed))
	for pause(ctx, 150*time.Millisecond+time.Duration(sched.Intn(551))*time.Millisecond) {
		r := sched.Intn(total)
		var f fault
		for _, f = range faults {
			if r < f.weight {
				break
			}
			r -= f.weight
		}
		if f.weight == 0 {
			continue
		}
		h.faultWG.Add(1)
		go func(f fault) {
			defer h.faultWG.Done()
			if f.fn(ctx) {
				h.mu.Lock()
				h.faults[f.kind]++
				h.mu.Unlock()
			}
		}(f)
	}
}

// pick chooses a random server that is not busy and satisfies ok, and marks
// it busy. The caller releases it.
func (h *harness) pick(ok func(*server) bool) *server {
	h.mu.Lock()
	defer h.mu.Unlock()
	var cands []*server
	for _, n := range h.names {
		s := h.servers[n]
		if !s.busy && ok(s) {
			cands = append(cands, s)
		}
	}
	if len(cands) == 0 {
		return nil
	}
	s := cands[h.intn(len(cands))]
	s.busy = true
	return s
}

func (h *harness) release(s *server) {
	h.mu.Lock()
	s.busy = false
	h.mu.Unlock()
}

// taintedAliveLocked reports whether a process whose record was corrupted
// is still alive.
func taintedAlive(s *server) bool {
	for pid := range s.tainted {
		if p, ok := readProc(pid); ok && p.live() {
			return true
		}
	}
	return false
}

func (h *harness) faultKill(ctx context.Context) bool {
	h.exclusive.RLock()
	defer h.exclusive.RUnlock()
	s := h.pick(func(s *server) bool { return s.declared && s.grabber == nil && s.kills < maxKills })
	if s == nil {
		return false
	}
	defer h.release(s)
	p, ok := h.instance(s)
	if !ok {
		return false
	}
	if err := syscall.Kill(p.pid, syscall.SIGKILL); err != nil {
		return false
	}
	h.journal("kill: %s pid %d", s.name, p.pid)
	h.mu.Lock()
	s.kills++
	_, tainted := s.tainted[p.pid]
	delete(s.tainted, p.pid)
	h.mu.Unlock()
	kind := "kill"
	if tainted {
		kind = "kill-untracked"
	}
	d, ok := waitFor(ctx, recoverBound, func() bool { return h.runningAgain(s, p.pid) })
	switch {
	case ok:
		h.recovered(kind, d)
	case ctx.Err() == nil:
		h.violation("kill: server %s (pid %d killed) not running again within %s", s.name, p.pid, recoverBound)
	}
	return true
}

func (h *harness) faultStopCont(ctx context.Context) bool {
	s := h.pick(func(s *server) bool { return s.declared && s.grabber == nil })
	if s == nil {
		return false
	}
	defer h.release(s)
	p, ok := h.instance(s)
	if !ok {
		return false
	}
	if err := syscall.Kill(p.pid, syscall.SIGSTOP); err != nil {
		return false
	}
	h.journal("stopcont: SIGSTOP %s pid %d", s.name, p.pid)
	time.Sleep(h.between(200*time.Millisecond, 2*time.Second)) // the fault's length, not a wait for anything
	_ = syscall.Kill(p.pid, syscall.SIGCONT)
	h.journal("stopcont: SIGCONT %s pid %d", s.name, p.pid)
	if q, ok := readProc(p.pid); !ok || !q.live() || q.start != p.start {
		h.violation("stopcont: server %s pid %d ended while SIGSTOPped (nobody was meant to signal it)", s.name, p.pid)
	}
	return true
}

// removeAndWait deletes a server's file and waits for procfleet to stop it:
// no live instance, port free, record removed.
func (h *harness) removeAndWait(ctx context.Context, s *server, why string) bool {
	if err := os.Remove(s.file); err != nil {
		h.violation("%s: remove %s: %v", why, s.file, err)
		return false
	}
	h.journal("%s: removed the file of %s", why, s.name)
	h.mu.Lock()
	s.declared = false
	h.mu.Unlock()
	d, ok := waitFor(ctx, stopBound, func() bool {
		if _, alive := h.lastStart(s); alive || portAccepts(s.port) {
			return false
		}
		if _, err := os.Stat(h.recordPath(s.name)); !errors.Is(err, os.ErrNotExist) {
			return false
		}
		return len(h.instances(s)) == 0 // the full scan, once the cheap checks pass
	})
	if !ok {
		if ctx.Err() == nil {
			_, recErr := os.Stat(h.recordPath(s.name))
			h.violation("%s: removed server %s not stopped within %s (instances %v, port %d accepting %v, record: %v)",
				why, s.name, stopBound, h.instances(s), s.port, portAccepts(s.port), recErr)
		}
		return false
	}
	h.recovered("remove-to-stopped", d)
	h.journal("%s: %s stopped after %s", why, s.name, d.Round(time.Millisecond))
	return true
}

// writeFleetFile writes a fleet file in place (O_TRUNC, then one write), or
// atomically with -soak.inplace=false.
func writeFleetFile(path string, b []byte) error {
	if *flagInPlace {
		return os.WriteFile(path, b, 0o600)
	}
	tmp := filepath.Join(filepath.Dir(filepath.Dir(path)), "run", "."+filepath.Base(path)+".tmp")
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

func (h *harness) declare(s *server) {
	if err := writeFleetFile(s.file, s.content); err != nil {
		h.violation("write %s: %v", s.file, err)
		return
	}
	h.journal("declared %s", s.name)
	h.mu.Lock()
	s.declared = true
	h.mu.Unlock()
}

func (h *harness) faultPortGrab(ctx context.Context) bool {
	h.exclusive.RLock()
	s := h.pick(func(s *server) bool { return s.declared && s.grabber == nil && !taintedAlive(s) })
	if s == nil {
		h.exclusive.RUnlock()
		return false
	}
	defer h.release(s)
	if !h.removeAndWait(ctx, s, "portgrab") {
		h.declare(s)
		h.exclusive.RUnlock()
		return false
	}
	st, err := h.startStranger("port", s.name, []string{h.self, "soak-port-stranger", strconv.Itoa(s.port)}, s.port)
	if err != nil || st == nil {
		h.count("portgrabLostRace", 1)
		h.declare(s)
		h.exclusive.RUnlock()
		return false
	}
	h.journal("portgrab: stranger pid %d holds port %d of %s", st.pid, s.port, s.name)
	h.mu.Lock()
	s.grabber = st
	h.mu.Unlock()
	h.declare(s)
	h.exclusive.RUnlock()

	if !pause(ctx, h.between(time.Second, 8*time.Second)) {
		return true // the faults stopped: the stranger holds the port to the end
	}
	h.mu.Lock()
	s.grabber = nil
	h.mu.Unlock()
	h.stopStranger(st)
	h.journal("portgrab: stranger pid %d released port %d of %s", st.pid, s.port, s.name)
	d, ok := waitFor(ctx, recoverBound, func() bool { return h.runningAgain(s, 0) })
	switch {
	case ok:
		h.recovered("portgrab-released-to-running", d)
	case ctx.Err() == nil:
		h.violation("portgrab: server %s not running within %s after the stranger released port %d", s.name, recoverBound, s.port)
	}
	return true
}

// broken returns a broken version of a fleet file.
func (h *harness) broken(s *server) (string, []byte) {
	c := string(s.content)
	switch h.intn(4) {
	case 0:
		// Half-way: cut inside the command's flow sequence.
		i := strings.Index(c, "command: [") + len("command: [") + 2
		j := strings.Index(c[i:], "]") + i
		return "truncated", []byte(c[:i+h.intn(j-i)])
	case 1:
		return "syntax", []byte(c + "  labels: {broken\n")
	case 2:
		return "unknownfield", []byte(strings.Replace(c, "\n  port:", "\n  prot:", 1))
	default:
		return "badport", []byte(strings.Replace(c, fmt.Sprintf("port: %d", s.port), "port: 70000", 1))
	}
}

func (h *harness) faultBadFile(ctx context.Context) bool {
	h.exclusive.RLock()
	defer h.exclusive.RUnlock()
	s := h.pick(func(s *server) bool { return s.declared && s.grabber == nil })
	if s == nil {
		return false
	}
	defer h.release(s)
	before, had := h.instance(s)
	variant, b := h.broken(s)
	// Written in place (O_TRUNC, then one write), as a careless editor or
	// an interrupted copy does.
	if err := writeFleetFile(s.file, b); err != nil {
		h.violation("badfile: %v", err)
		return false
	}
	h.count("badfile-"+variant, 1)
	h.journal("badfile: %s written %s (pid %d)", s.name, variant, before.pid)
	time.Sleep(h.between(300*time.Millisecond, 1500*time.Millisecond)) // the fault's length
	if st, err := h.status(ctx); err == nil {
		if len(st.Errors) > 0 {
			h.count("badfileShownInStatus", 1)
		} else {
			h.count("badfileNotShownInStatus", 1)
		}
	}
	if err := writeFleetFile(s.file, s.content); err != nil {
		h.violation("badfile: restore: %v", err)
		return true
	}
	h.journal("badfile: %s restored", s.name)
	// The server must have lived through the broken file: same pid, now
	// and after the watcher's debounce has surely passed.
	if had {
		time.Sleep(300 * time.Millisecond) // an observation window: nothing may happen in it
		if now, ok := h.instance(s); !ok || now.pid != before.pid {
			h.violation("badfile (%s): server %s pid %d did not survive a broken fleet file (now %v)", variant, s.name, before.pid, h.instances(s))
		}
	}
	return true
}

func (h *harness) faultAddRemove(ctx context.Context) bool {
	h.exclusive.RLock()
	defer h.exclusive.RUnlock()
	h.mu.Lock()
	declared := 0
	for _, s := range h.servers {
		if s.declared {
			declared++
		}
	}
	h.mu.Unlock()
	n := *flagServers
	remove := declared >= n+5 || (declared > n-5 && h.intn(2) == 0)
	if remove {
		s := h.pick(func(s *server) bool { return s.declared && s.grabber == nil && !taintedAlive(s) })
		if s == nil {
			return false
		}
		defer h.release(s)
		h.count("removed", 1)
		h.removeAndWait(ctx, s, "remove")
		return true
	}
	s := h.pick(func(s *server) bool { return !s.declared && s.grabber == nil })
	if s == nil {
		return false
	}
	defer h.release(s)
	h.count("added", 1)
	h.declare(s)
	d, ok := waitFor(ctx, recoverBound, func() bool { return h.runningAgain(s, 0) })
	switch {
	case ok:
		h.recovered("add-to-running", d)
	case ctx.Err() == nil:
		h.violation("add: server %s not running within %s after its file was written", s.name, recoverBound)
	}
	return true
}

// killUp SIGKILLs up and waits (bounded) for its end; false (a
// violation) when it cannot be signalled.
func (h *harness) killUp(fault string, u *upProc) bool {
	if err := syscall.Kill(u.cmd.Process.Pid, syscall.SIGKILL); err != nil {
		h.violation("%s: kill up: %v", fault, err)
		return false
	}
	select {
	case <-u.done:
	case <-time.After(10 * time.Second):
		h.violation("%s: up pid %d still alive 10 s after SIGKILL", fault, u.cmd.Process.Pid)
	}
	return true
}

func (h *harness) faultKillUp(ctx context.Context) bool {
	h.exclusive.Lock()
	defer h.exclusive.Unlock()
	if ctx.Err() != nil {
		return false
	}
	procs := scanProcs(h.want)
	h.mu.Lock()
	snap := map[string]proc{}
	for name, ps := range procs {
		if s := h.servers[name]; s.declared {
			if live := h.liveInstancesLocked(ps); len(live) == 1 {
				snap[name] = live[0]
			}
		}
	}
	u := h.up
	h.mu.Unlock()
	if !h.killUp("killup", u) {
		return false
	}
	h.journal("killup: SIGKILL up pid %d (%d servers running)", u.cmd.Process.Pid, len(snap))
	time.Sleep(h.between(0, 1500*time.Millisecond)) // how long up stays down
	restarted := time.Now()
	h.startUp()
	h.mu.Lock()
	u2 := h.up
	h.mu.Unlock()
	// Wait until the new up reports the servers again, then every process
	// seen before must be the same process: adopted, never started again.
	// The lock stays held until then: no file changes while up starts.
	_, settled := waitFor(context.Background(), 20*time.Second, func() bool {
		select {
		case <-u2.done:
			return true
		default:
		}
		// status.json newer than the restart: the new up has loaded the
		// files and is reconciling (before that, status shows only what
		// live observation sees, which would settle at once).
		fi, err := os.Stat(filepath.Join(h.state, "status.json"))
		if err != nil || fi.ModTime().Before(restarted) {
			return false
		}
		st, err := h.status(context.Background())
		if err != nil {
			return false
		}
		for name, p := range snap {
			e, ok := st.get(name)
			if !ok {
				return false
			}
			if e.Phase == "Quarantined" {
				continue
			}
			if !e.Ready || e.PID != p.pid {
				return false
			}
		}
		return true
	})
	select {
	case <-u2.done:
		b, _ := os.ReadFile(u2.log)
		h.violation("killup: the restarted up (pid %d) exited at once (%v): %s", u2.cmd.Process.Pid, u2.cmd.ProcessState, bytes.TrimSpace(b))
		h.startUp()
	default:
		if !settled {
			h.count("killupNotSettled20s", 1)
		}
	}
	for name, p := range snap {
		q, ok := readProc(p.pid)
		if !ok || !q.live() || q.start != p.start {
			h.mu.Lock()
			stopped := h.servers[name].busy
			h.mu.Unlock()
			h.violation("killup: server %s pid %d did not survive the restart of up (busy with another fault: %v)", name, p.pid, stopped)
		}
	}
	return true
}

// faultExecEdit edits the file of a server whose process no longer shows
// what procfleet spawned (it exec'd through sh -c or a shim chain, or
// retitled itself): up must stop that process (it holds it since the
// spawn or adoption, whatever it runs now) and start the new spec, one
// instance at a time. Kills, prunes (addremove), restarts of up (killup)
// and the final down act on these servers as on the others.
func (h *harness) faultExecEdit(ctx context.Context) bool {
	h.exclusive.RLock()
	defer h.exclusive.RUnlock()
	s := h.pick(func(s *server) bool {
		return s.declared && s.launch != launchPlain && s.grabber == nil && !taintedAlive(s)
	})
	if s == nil {
		return false
	}
	defer h.release(s)
	old, ok := h.instance(s)
	if !ok {
		return false
	}
	h.mu.Lock()
	s.edits++
	s.content = h.fleetFile(s)
	h.mu.Unlock()
	if err := writeFleetFile(s.file, s.content); err != nil {
		h.violation("exec: write %s: %v", s.file, err)
		return false
	}
	h.journal("exec: edited %s (%s, pid %d): SOAK_EDIT=%d", s.name, s.launch, old.pid, s.edits)
	d, ok := waitFor(ctx, stopBound+recoverBound, func() bool {
		p, alive := readProc(old.pid)
		gone := !alive || !p.live() || p.start != old.start
		return gone && h.runningAgain(s, old.pid)
	})
	switch {
	case ok:
		h.recovered("exec-edit-to-replaced", d)
	case ctx.Err() == nil:
		h.violation("exec: server %s (%s) not replaced within %s of an edit: old pid %d alive %v, instances %v",
			s.name, s.launch, stopBound+recoverBound, old.pid, processAlive(old), h.instances(s))
	}
	return true
}

// maxGroupStrangers bounds the "pgid" faults of a run: each leaves a
// stranger and its group member running to the end.
const maxGroupStrangers = 3

// faultPGID sets a running server's record's pgid to the process group of
// a stranger of the same uid (the soak's own, a group leader with a member,
// both recording every signal they get), the record valid in every other
// way and written atomically with mode 0600, as a careless hand edit
// would. The record is untrusted (rule 7: a server leads its own group):
// moved aside (.corrupt-<time>) when procfleet reads it (at a resync or a
// restart of up), the server Quarantined / UntrustedRecord unless up still
// holds it, never a second instance; the stranger and its member must
// receive no signal to the end of the run, down included.
func (h *harness) faultPGID(ctx context.Context) bool {
	h.mu.Lock()
	taken := h.counts["pgidTaken"] < maxGroupStrangers
	if taken {
		h.counts["pgidTaken"]++
	}
	h.mu.Unlock()
	if !taken {
		return false
	}
	s := h.pick(func(s *server) bool { return s.declared && s.grabber == nil && !taintedAlive(s) })
	if s == nil {
		return false
	}
	defer h.release(s)
	p, ok := h.instance(s)
	if !ok {
		return false
	}
	path := h.recordPath(s.name)
	b, err := os.ReadFile(path)
	if err != nil {
		return false
	}
	var rec map[string]any
	if json.Unmarshal(b, &rec) != nil {
		return false
	}
	if pid, _ := rec["pid"].(float64); int(pid) != p.pid {
		return false
	}
	st, err := h.startStranger("group", s.name, []string{h.self, "soak-group-stranger", s.name, h.root}, 0)
	if err != nil || st == nil {
		h.violation("pgid: start the group stranger: %v", err)
		return false
	}
	rec["pgid"] = st.pid
	nb, err := json.Marshal(rec)
	if err != nil {
		h.violation("pgid: %v", err)
		return false
	}
	h.mu.Lock()
	s.tainted[p.pid] = "pgid"
	h.mu.Unlock()
	if err := h.replaceRecord(s.name, nb); err != nil {
		h.violation("pgid: %v", err)
		return false
	}
	h.journal("pgid: record of %s (pid %d) names pgid %d, the group of stranger pid %d (member pid %d)", s.name, p.pid, st.pid, st.pid, st.member.pid)
	return true
}

// faultIntent kills -9 the actor (`up`, or `apply` while no up runs)
// between the intent record and the full record of a spawn, then starts up
// again: rule 8, the intent record resolved by the instance token, the
// process adopted (same pid), never started a second time, nothing left
// unrecorded. The window is made real by the pause compiled into the
// soak's procfleet (-tags procfleet_testhooks,
// actuate/testhook_pause_linux.go): the actor started with
// PROCFLEET_TESTHOOK_PAUSE_AFTER_SPAWN=<server>=<file> writes the spawned
// pid to <file> right after the spawn, with the intent record on disk,
// and blocks there until the soak kills it. To make the actor spawn the
// server, the soak kills up and the server's process first.
func (h *harness) faultIntent(ctx context.Context) bool {
	h.exclusive.Lock()
	defer h.exclusive.Unlock()
	if ctx.Err() != nil {
		return false
	}
	s := h.pick(func(s *server) bool {
		return s.declared && s.grabber == nil && !taintedAlive(s) && s.kills < maxKills
	})
	if s == nil {
		return false
	}
	defer h.release(s)
	old, ok := h.instance(s)
	if !ok {
		return false
	}
	actor := "up"
	if h.intn(2) == 0 {
		actor = "apply"
	}
	h.mu.Lock()
	u := h.up
	n := h.counts["intentTaken"]
	h.counts["intentTaken"]++
	h.mu.Unlock()
	if !h.killUp("intent", u) {
		return false
	}
	_ = syscall.Kill(old.pid, syscall.SIGKILL)
	h.mu.Lock()
	s.kills++
	h.mu.Unlock()
	waitFor(ctx, 10*time.Second, func() bool { return !processAlive(old) })
	h.journal("intent: killed up pid %d and %s pid %d; the actor is %s", u.cmd.Process.Pid, s.name, old.pid, actor)

	pauseFile := filepath.Join(h.run, fmt.Sprintf("intent-%d.pid", n))
	hook := "PROCFLEET_TESTHOOK_PAUSE_AFTER_SPAWN=" + s.name + "=" + pauseFile
	var actorDone <-chan struct{}
	var actorPID int
	var actorLog string
	if actor == "up" {
		h.startUpEnv([]string{hook})
		h.mu.Lock()
		actorDone, actorPID, actorLog = h.up.done, h.up.cmd.Process.Pid, h.up.log
		h.mu.Unlock()
	} else {
		actorLog = filepath.Join(h.run, fmt.Sprintf("intent-%d-apply.log", n))
		lf, err := os.OpenFile(actorLog, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
		if err != nil {
			h.violation("intent: %v", err)
			h.startUp()
			return false
		}
		cmd := exec.Command(h.bin, "apply", "-f", h.fleet, "--state-dir", h.state)
		cmd.Env = append(os.Environ(), hook)
		cmd.Stdout, cmd.Stderr = lf, lf
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		err = cmd.Start()
		_ = lf.Close()
		if err != nil {
			h.violation("intent: start apply: %v", err)
			h.startUp()
			return false
		}
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		actorDone, actorPID = done, cmd.Process.Pid
	}
	var paused int
	_, ok = waitFor(context.Background(), 30*time.Second, func() bool {
		b, err := os.ReadFile(pauseFile)
		if err != nil {
			return false
		}
		paused, err = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil
	})
	// The window: the intent record (token, no pid) is on disk now.
	var rec struct {
		PID      int    `json:"pid"`
		Instance string `json:"instance"`
	}
	b, rerr := os.ReadFile(h.recordPath(s.name))
	if rerr == nil {
		rerr = json.Unmarshal(b, &rec)
	}
	_ = syscall.Kill(actorPID, syscall.SIGKILL)
	select {
	case <-actorDone:
	case <-time.After(10 * time.Second):
		h.violation("intent: %s pid %d still alive 10 s after SIGKILL", actor, actorPID)
	}
	if !ok {
		lb, _ := os.ReadFile(actorLog)
		h.violation("intent: %s never paused after spawning %s within 30 s: %s", actor, s.name, bytes.TrimSpace(lb))
		h.startUp()
		return false
	}
	if rerr != nil || rec.PID != 0 || rec.Instance == "" {
		h.violation("intent: at the pause the record of %s is not an intent record (pid %d, instance %q, %v)", s.name, rec.PID, rec.Instance, rerr)
	}
	h.journal("intent: %s pid %d killed -9 after spawning %s pid %d (instance %s)", actor, actorPID, s.name, paused, rec.Instance)
	h.count("intent-"+actor, 1)

	h.startUp()
	h.mu.Lock()
	u2 := h.up
	h.mu.Unlock()
	var last string
	d, adopted := waitFor(context.Background(), recoverBound, func() bool {
		st, err := h.status(context.Background())
		if err != nil {
			return false
		}
		e, ok := st.get(s.name)
		if !ok {
			return false
		}
		last = fmt.Sprintf("%s ready %v pid %d reason %q %q", e.Phase, e.Ready, e.PID, e.Reason, e.Message)
		return e.Ready && e.PID == paused && h.recordProblem(s.name, paused) == ""
	})
	select {
	case <-u2.done:
		lb, _ := os.ReadFile(u2.log)
		h.violation("intent: the restarted up (pid %d) exited: %s", u2.cmd.Process.Pid, bytes.TrimSpace(lb))
		h.startUp()
	default:
	}
	if last, ok := h.lastStart(s); !ok || last != paused {
		h.violation("intent: %s started again after the intent record: last start pid %d (running %v), want the paused spawn pid %d", s.name, last, ok, paused)
	}
	if !adopted {
		h.violation("intent: %s's spawn pid %d not adopted within %s after %s was killed between intent and record: %s", s.name, paused, recoverBound, actor, last)
		return true
	}
	h.recovered("intent-to-adopted", d)
	return true
}

// maxForeign bounds the "foreign" faults of a run: each leaves a server of
// another state folder running to the end.
const maxForeign = 3

// faultForeign copies into the soak's state folder the record of a server
// that procfleet started from another state folder (`procfleet apply` in
// a project of its own, under run/: a real process, a real record, valid
// in every way but its stateDir binding), as a copied project would:
// either over a running server's record or as the record of a spare
// server not declared now. The record is foreign (rule 7): moved aside
// (.foreign-<time>) when read, never acted on; the other folder's server
// must receive no signal until the soak's own end (then `procfleet down`
// in its folder stops it, which also shows that folder still owns it).
// A running server whose record was replaced may lose the proof that it
// is procfleet's (a restart of up then finds no record of it): it is
// tainted, as for corrupt.
func (h *harness) faultForeign(ctx context.Context) bool {
	h.exclusive.RLock()
	defer h.exclusive.RUnlock()
	// Each fault gets its own folder: the number is taken under the lock.
	h.mu.Lock()
	n := h.counts["foreignTaken"]
	h.counts["foreignTaken"]++
	h.mu.Unlock()
	if n >= maxForeign {
		return false
	}
	overRunning := h.intn(2) == 0
	s := h.pick(func(s *server) bool {
		if overRunning {
			return s.declared && s.grabber == nil && !taintedAlive(s)
		}
		return !s.declared && s.grabber == nil
	})
	if s == nil {
		return false
	}
	defer h.release(s)
	var p proc
	if overRunning {
		var ok bool
		if p, ok = h.instance(s); !ok {
			return false
		}
	} else if _, err := os.Stat(h.recordPath(s.name)); err == nil || len(h.instances(s)) > 0 {
		return false // its stop is not over yet
	}
	f := &foreignServer{name: s.name, dir: filepath.Join(h.run, fmt.Sprintf("foreign-%d", n))}
	f.sigFile = filepath.Join(f.dir, "signals")
	fleetDir := filepath.Join(f.dir, "fleet")
	if err := os.MkdirAll(fleetDir, 0o700); err != nil {
		h.violation("foreign: %v", err)
		return false
	}
	doc := fmt.Sprintf("apiVersion: procfleet.dev/v1alpha1\nkind: Server\nmetadata: {name: %s}\nspec:\n  command: [%q, \"-signals\", %q, \"-stamp\", %q]\n  terminationGracePeriodSeconds: 5\n",
		s.name, h.server, f.sigFile, filepath.Join(f.dir, "stamp"))
	if err := os.WriteFile(filepath.Join(fleetDir, s.name+".yaml"), []byte(doc), 0o600); err != nil {
		h.violation("foreign: %v", err)
		return false
	}
	out, errOut, code := h.procfleet(context.Background(), 60*time.Second, "apply", "--wait", "-f", fleetDir, "--state-dir", filepath.Join(f.dir, "state"))
	b, err := os.ReadFile(filepath.Join(f.dir, "state", "servers", s.name+".json"))
	var rec struct {
		PID int `json:"pid"`
	}
	if code != 0 || err != nil || json.Unmarshal(b, &rec) != nil {
		h.violation("foreign: apply in %s: exit %d, record %v: %s%s", f.dir, code, err, out, errOut)
		return false
	}
	fp, ok := readProc(rec.PID)
	if !ok || !fp.live() {
		h.violation("foreign: the server apply started in %s (pid %d) is not running", f.dir, rec.PID)
		return false
	}
	f.proc = fp
	h.mu.Lock()
	h.foreigns = append(h.foreigns, f)
	if overRunning {
		s.tainted[p.pid] = "foreign"
	}
	h.mu.Unlock()
	if err := h.replaceRecord(s.name, b); err != nil {
		h.violation("foreign: %v", err)
		return false
	}
	where := "as the record of undeclared " + s.name
	if overRunning {
		where = fmt.Sprintf("over the record of %s (pid %d)", s.name, p.pid)
	}
	h.journal("foreign: the record of pid %d from %s copied in %s", fp.pid, f.dir, where)
	return true
}

// checkForeign checks, before the soak's down, that no server of another
// state folder was signalled, and after it (after true) stops them with
// `procfleet down` in their own folders.
func (h *harness) checkForeign(ctx context.Context, after bool) {
	h.mu.Lock()
	fs := append([]*foreignServer(nil), h.foreigns...)
	h.mu.Unlock()
	for _, f := range fs {
		if b, err := os.ReadFile(f.sigFile); err == nil && len(b) > 0 {
			h.count("strangersSignalled", 1)
			h.violation("foreign: the server of %s (pid %d) received: %s", f.dir, f.proc.pid, strings.TrimSpace(string(b)))
		}
		if !processAlive(f.proc) {
			h.count("strangersSignalled", 1)
			h.violation("foreign: the server of %s (pid %d) ended (after the soak's down: %v)", f.dir, f.proc.pid, after)
			continue
		}
		if !after {
			continue
		}
		fleetDir := filepath.Join(f.dir, "fleet")
		out, errOut, code := h.procfleet(ctx, time.Minute, "down", "-f", fleetDir, "--state-dir", filepath.Join(f.dir, "state"))
		if code != 0 {
			h.violation("foreign: down in %s: exit %d: %s%s", f.dir, code, out, errOut)
		}
		if _, ok := waitFor(ctx, 10*time.Second, func() bool { return !processAlive(f.proc) }); !ok {
			h.violation("foreign: pid %d still running after down in its own folder %s", f.proc.pid, f.dir)
			_ = syscall.Kill(f.proc.pid, syscall.SIGKILL)
		}
	}
	h.setCount("foreignServers", len(fs))
	if !after {
		moved, _ := filepath.Glob(filepath.Join(h.state, "servers", "*.json.foreign-*"))
		h.setCount("foreignMovedAsideBeforeDown", len(moved))
	}
}

// processAlive reports whether p still runs (same pid and start time).
func processAlive(p proc) bool {
	q, ok := readProc(p.pid)
	return ok && q.live() && q.start == p.start
}

func (h *harness) faultCorrupt(ctx context.Context) bool {
	s := h.pick(func(s *server) bool { return s.declared && s.grabber == nil })
	if s == nil {
		return false
	}
	defer h.release(s)
	p, ok := h.instance(s)
	if !ok {
		return false
	}
	path := h.recordPath(s.name)
	b, err := os.ReadFile(path)
	if err != nil {
		return false
	}
	var rec struct {
		PID int `json:"pid"`
	}
	if json.Unmarshal(b, &rec) != nil || rec.PID != p.pid {
		return false
	}
	kinds := []string{"garbage", "truncated", "mode0666"}
	if os.Geteuid() == 0 {
		kinds = append(kinds, "uid65534")
	}
	kind := kinds[h.intn(len(kinds))]
	h.mu.Lock()
	s.tainted[p.pid] = kind
	h.mu.Unlock()
	switch kind {
	case "garbage":
		err = os.WriteFile(path, []byte("\x00\xffnot a record{{{"), 0o600)
	case "truncated":
		err = os.WriteFile(path, b[:len(b)/2], 0o600)
	case "mode0666":
		err = os.Chmod(path, 0o666)
	case "uid65534":
		err = os.Chown(path, 65534, 65534)
	}
	if err != nil {
		return false
	}
	h.count("corrupt-"+kind, 1)
	h.journal("corrupt: record of %s (pid %d): %s", s.name, p.pid, kind)
	return true
}

func (h *harness) faultStranger(ctx context.Context) bool {
	h.mu.Lock()
	var cands []*server
	for _, n := range h.names {
		if s := h.servers[n]; s.declared {
			cands = append(cands, s)
		}
	}
	h.mu.Unlock()
	if len(cands) == 0 {
		return false
	}
	s := cands[h.intn(len(cands))]
	st, err := h.startStranger("argv", s.name, s.argv, 0)
	if err != nil || st == nil {
		h.violation("stranger: %v", err)
		return false
	}
	h.journal("stranger: pid %d with the command line of %s", st.pid, s.name)
	if pause(ctx, h.between(2*time.Second, 10*time.Second)) {
		h.stopStranger(st)
	}
	return true
}

// finalBurst ends the faults with one blow, so that convergence is measured
// on real work: SIGKILL to a third of the running servers (at most 10) at
// once; it returns the time of the kills. up itself is left running (killup faults test its restarts during
// the run): a restart here would wipe its memory and hide a server stuck in
// a state that only a restart of up clears.
func (h *harness) finalBurst() time.Time {
	procs := scanProcs(h.want)
	h.mu.Lock()
	var victims []proc
	var names []string
	for _, n := range h.names {
		s := h.servers[n]
		if !s.declared || s.grabber != nil || len(s.tainted) > 0 {
			continue
		}
		if live := h.liveInstancesLocked(procs[n]); len(live) == 1 {
			victims = append(victims, live[0])
			names = append(names, n)
		}
	}
	h.mu.Unlock()
	h.rngMu.Lock()
	h.rng.Shuffle(len(victims), func(i, j int) {
		victims[i], victims[j] = victims[j], victims[i]
		names[i], names[j] = names[j], names[i]
	})
	h.rngMu.Unlock()
	n := min(10, len(victims)/3)
	killed := map[string]int{}
	at := time.Now()
	for i := 0; i < n; i++ {
		_ = syscall.Kill(victims[i].pid, syscall.SIGKILL)
		killed[names[i]] = victims[i].pid
	}
	// Convergence counts from the kills. Wait for the victims to be dead
	// (SIGKILL is not synchronous: for a moment the process still runs and
	// its port accepts), so that the convergence check never sees them.
	for i := 0; i < n; i++ {
		pid := victims[i].pid
		waitFor(context.Background(), 5*time.Second, func() bool {
			p, ok := readProc(pid)
			return !ok || !p.live() || p.start != victims[i].start
		})
	}
	h.journal("final burst: SIGKILL %d servers %v", n, names[:n])
	h.mu.Lock()
	h.victims = names[:n]
	h.victimPIDs = killed
	h.faults["final-kill"] += n
	h.mu.Unlock()
	return at
}

// ---- convergence and the end -------------------------------------------------

// expected reports whether a server's status entry is what the soak expects
// of it now, and why not.
func (h *harness) expected(s *server, st statusJSON, procs map[string][]proc) (bool, string) {
	e, ok := st.get(s.name)
	h.mu.Lock()
	declared, grabbed := s.declared, s.grabber != nil
	live := h.liveInstancesLocked(procs[s.name])
	mimicked := h.argvStrangerAliveLocked(s.name)
	h.mu.Unlock()
	if !declared {
		if len(live) > 0 {
			return false, "undeclared but running"
		}
		if ok && e.Phase != "Stopped" {
			return false, "undeclared, phase " + e.Phase
		}
		return true, ""
	}
	if !ok {
		return false, "missing from status"
	}
	if grabbed {
		return e.Phase == "Quarantined", fmt.Sprintf("port held by a stranger: want Quarantined, have %s %q", e.Phase, e.Reason)
	}
	if taintedAlive(s) && e.Phase == "Quarantined" {
		return true, ""
	}
	// An untrusted record is kept (and its server quarantined) until no
	// process runs what it could protect: a stranger with the server's
	// command line, still running when the faults ended, is such a one.
	if mimicked && e.Phase == "Quarantined" && e.Reason == "UntrustedRecord" {
		return true, ""
	}
	if e.Phase != "Running" || !e.Ready {
		return false, fmt.Sprintf("phase %s ready %v reason %q message %q", e.Phase, e.Ready, e.Reason, e.Message)
	}
	if len(live) != 1 || live[0].pid != e.PID {
		return false, fmt.Sprintf("status pid %d, live instances %v", e.PID, live)
	}
	// A record corrupted under a running server is noticed at the next
	// resync (30 s) or restart of up, which rewrites it: until then the
	// server has not converged.
	if p := h.recordProblem(s.name, e.PID); p != "" {
		return false, "record not (yet) rewritten: " + p
	}
	return true, ""
}

// watchRunning records, for each declared server without a port stranger,
// the first time since t0 its newest process is alive and its port accepts.
func (h *harness) watchRunning(ctx context.Context, t0 time.Time) map[string]time.Duration {
	out := map[string]time.Duration{}
	for ctx.Err() == nil {
		for _, n := range h.names {
			s := h.servers[n]
			h.mu.Lock()
			want := s.declared && s.grabber == nil
			h.mu.Unlock()
			if _, seen := out[n]; seen || !want {
				continue
			}
			h.mu.Lock()
			old := h.victimPIDs[n]
			h.mu.Unlock()
			if h.runningAgain(s, old) {
				out[n] = time.Since(t0)
			}
		}
		pause(ctx, 10*time.Millisecond)
	}
	return out
}

// waitConverged polls status until every server is as expected; conv (if
// not nil) receives the time since origin at which each server reached its
// expected state and stayed in it.
func (h *harness) waitConverged(ctx context.Context, bound time.Duration, conv map[string]time.Duration, origin time.Time) bool {
	deadline := time.Now().Add(bound)
	var last statusJSON
	var lastErr error
	why := map[string]string{}
	for {
		at := time.Since(origin)
		st, err := h.status(ctx)
		last, lastErr = st, err
		if err == nil {
			procs := scanProcs(h.want)
			all := true
			for _, n := range h.names {
				s := h.servers[n]
				ok, reason := h.expected(s, st, procs)
				if ok {
					if conv != nil && s.declared {
						if _, seen := conv[n]; !seen {
							conv[n] = at
						}
					}
					delete(why, n)
					continue
				}
				all = false
				why[n] = reason
				if conv != nil {
					delete(conv, n)
				}
			}
			if all {
				return true
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
		pause(ctx, 250*time.Millisecond)
	}
	if lastErr != nil {
		h.logf("last status error: %v", lastErr)
	}
	for n, r := range why {
		h.violation("convergence: server %s: %s", n, r)
	}
	_ = last
	return false
}

// checkConverged checks each Ready server's record and log, and that every
// corrupted record that procfleet read was moved aside.
func (h *harness) checkConverged(ctx context.Context) {
	st, err := h.status(ctx)
	if err != nil {
		h.violation("status after convergence: %v", err)
		return
	}
	for _, n := range h.names {
		s := h.servers[n]
		e, ok := st.get(n)
		if s.declared && ok && e.Phase == "Running" {
			if p := h.recordProblem(n, e.PID); p != "" {
				h.violation("record: Running server %s (pid %d) has no good record: %s", n, e.PID, p)
			}
			if _, err := os.Stat(filepath.Join(h.state, "logs", n+".log")); err != nil {
				h.violation("log: Running server %s has no log: %v", n, err)
			}
		}
		if s.declared && ok && e.Phase == "Running" && s.launch != launchPlain {
			// The premise of the launchers: the process shows the test
			// server (exec'd) or its title (retitled), not what was spawned.
			switch cl := cmdlineOf(e.PID); {
			case s.title != "" && cl == argvKey([]string{s.title}):
				h.count("retitledSeen", 1)
			case s.launch != launchRetitle && cl == argvKey(s.argv):
				h.count("execedSeen", 1)
			}
		}
		if ev, err := os.ReadFile(filepath.Join(h.state, "logs", n+".events.jsonl")); err == nil {
			h.count("commandLineChangedEvents", bytes.Count(ev, []byte(`"CommandLineChanged"`)))
		}
		if len(s.tainted) > 0 {
			moved := h.movedAside(n)
			h.count("taintedMovedAside", len(moved))
			if ok && e.Phase == "Quarantined" && taintedAlive(s) && len(moved) == 0 {
				if _, err := os.Stat(h.recordPath(n)); err != nil {
					h.violation("record lost: server %s is Quarantined over a corrupted record, which is neither in place nor moved aside", n)
				}
			}
		}
	}
}

// checkSecret looks for the servers' environment value in everything
// procfleet wrote itself (its output, events, status, records), never in
// the servers' own logs.
func (h *harness) checkSecret() {
	var files []string
	ups, _ := filepath.Glob(filepath.Join(h.run, "up-*.log"))
	files = append(files, ups...)
	_ = filepath.Walk(h.state, func(p string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() {
			return nil
		}
		if filepath.Base(filepath.Dir(p)) == "logs" && strings.HasSuffix(p, ".log") {
			return nil
		}
		if info.Mode().IsRegular() {
			files = append(files, p)
		}
		return nil
	})
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err == nil && bytes.Contains(b, []byte(h.secret)) {
			h.violation("secret: an environment value appears in %s", f)
		}
	}
	h.count("filesCheckedForSecret", len(files))
}

// downAndCheck runs `procfleet down` (through the running up), stops up,
// then checks that no process of the fleet remains and every port is free.
func (h *harness) downAndCheck(ctx context.Context) {
	quarantined := 0
	if st, err := h.status(ctx); err == nil {
		for _, e := range st.Servers {
			if e.Phase == "Quarantined" {
				quarantined++
			}
		}
	}
	h.mu.Lock()
	u := h.up
	h.mu.Unlock()
	stopUp := func() {
		_ = syscall.Kill(u.cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-u.done:
			if c := u.cmd.ProcessState.ExitCode(); c != 0 {
				h.violation("up: exit %d after SIGTERM (want 0): %v", c, u.cmd.ProcessState)
			}
		case <-time.After(60 * time.Second):
			h.violation("up: still running 60 s after SIGTERM")
			_ = syscall.Kill(u.cmd.Process.Pid, syscall.SIGKILL)
			<-u.done
		}
	}
	h.checkForeign(ctx, false)
	// down while up runs (through its socket); a procfleet whose down
	// cannot do that yet says the folder is held: then up is stopped first.
	out, errOut, code := h.procfleet(ctx, 2*time.Minute, "down", "-f", h.fleet, "--state-dir", h.state)
	upStopped := false
	if code != 0 && strings.Contains(errOut, "holds the state folder") {
		h.logf("down cannot act while up runs in this procfleet: stopping up first")
		h.setCount("downAfterUpStopped", 1)
		stopUp()
		upStopped = true
		out, errOut, code = h.procfleet(ctx, 2*time.Minute, "down", "-f", h.fleet, "--state-dir", h.state)
	}
	h.setCount("downExit", code)
	if code != 0 {
		h.logf("down exit %d (quarantined servers: %d):\n%s%s", code, quarantined, out, errOut)
		if quarantined == 0 {
			h.violation("down: exit %d with no quarantined server: %s%s", code, out, errOut)
		}
	}
	if !upStopped {
		stopUp()
	}

	// Processes of the fleet left: allowed only for a process whose record
	// was corrupted and moved aside (procfleet cannot prove it its own).
	procs := scanProcs(h.want)
	h.mu.Lock()
	left := map[string][]proc{}
	for name, ps := range procs {
		if live := h.liveInstancesLocked(ps); len(live) > 0 {
			left[name] = live
		}
	}
	h.mu.Unlock()
	byRule, orphans := 0, 0
	for name, live := range left {
		s := h.servers[name]
		moved := h.movedAside(name)
		for _, p := range live {
			if _, tainted := s.tainted[p.pid]; tainted && len(moved) > 0 {
				byRule++
			} else {
				orphans++
				h.violation("orphan: server %s pid %d still alive after down (tainted %v, moved-aside records %d)", name, p.pid, s.tainted, len(moved))
			}
			_ = syscall.Kill(p.pid, syscall.SIGKILL)
		}
	}
	h.setCount("orphans", orphans)
	h.setCount("leftByRule", byRule)

	h.checkForeign(ctx, true)
	// Strangers: none may have been signalled; then they go.
	h.mu.Lock()
	var strangers []*stranger
	for _, st := range h.strangers {
		strangers = append(strangers, st)
	}
	h.mu.Unlock()
	for _, st := range strangers {
		if b, err := os.ReadFile(st.sigFile); err == nil && len(b) > 0 {
			h.count("strangersSignalled", 1)
			h.violation("stranger signalled: %s stranger pid %d (server %s) received: %s", st.kind, st.pid, st.server, strings.TrimSpace(string(b)))
		}
		if st.member.pid != 0 && !st.expected.Load() && !processAlive(st.member) {
			h.count("strangersSignalled", 1)
			h.violation("stranger signalled: the member pid %d of group stranger pid %d (server %s) ended", st.member.pid, st.pid, st.server)
		}
		h.stopStranger(st)
	}
	// Every port free once the by-rule processes and strangers are gone.
	for _, n := range h.names {
		s := h.servers[n]
		if _, err := waitFor(ctx, 5*time.Second, func() bool { return !portAccepts(s.port) }); !err {
			h.violation("port: %d (server %s) still accepts after down", s.port, n)
		}
	}
	// Records left: only of quarantined servers (kept by rule).
	recs, _ := filepath.Glob(filepath.Join(h.state, "servers", "*.json"))
	h.setCount("recordsLeftAfterDown", len(recs))
	if len(recs) > quarantined {
		h.violation("records: %d left after down with %d quarantined servers: %v", len(recs), quarantined, recs)
	}
}

func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := int(p*float64(len(s))+0.5) - 1
	if i < 0 {
		i = 0
	}
	if i >= len(s) {
		i = len(s) - 1
	}
	return s[i]
}

func (h *harness) report(conv map[string]time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	var convs, victimConvs []time.Duration
	for _, d := range conv {
		convs = append(convs, d)
	}
	for _, n := range h.victims {
		if d, ok := conv[n]; ok {
			victimConvs = append(victimConvs, d)
		}
	}
	type dist struct {
		N   int     `json:"n"`
		P50 float64 `json:"p50Ms"`
		P99 float64 `json:"p99Ms"`
		Max float64 `json:"maxMs"`
	}
	mk := func(ds []time.Duration) dist {
		return dist{N: len(ds), P50: ms(percentile(ds, .5)), P99: ms(percentile(ds, .99)), Max: ms(percentile(ds, 1))}
	}
	rep := struct {
		Seed        int64           `json:"seed"`
		Duration    string          `json:"duration"`
		UpRuns      int             `json:"upRuns"`
		Faults      map[string]int  `json:"faults"`
		Counts      map[string]int  `json:"counts"`
		Convergence dist            `json:"convergenceAfterFaults"`
		Victims     dist            `json:"convergenceOfFinalBurstVictims"`
		Recovery    map[string]dist `json:"recoveryDuringFaults"`
		Duplicates  int             `json:"duplicates"`
		Strangers   int             `json:"strangersSignalled"`
		Orphans     int             `json:"orphans"`
		Violations  []string        `json:"violations"`
	}{
		Seed: h.seed, Duration: time.Since(h.start).Round(time.Second).String(), UpRuns: h.upRuns,
		Faults: h.faults, Counts: h.counts, Convergence: mk(convs), Victims: mk(victimConvs), Recovery: map[string]dist{},
		Duplicates: h.counts["duplicates"], Strangers: h.counts["strangersSignalled"], Orphans: h.counts["orphans"],
		Violations: h.violations,
	}
	for k, ds := range h.recover {
		rep.Recovery[k] = mk(ds)
	}
	b, _ := json.MarshalIndent(rep, "", "  ")
	h.t.Logf("soak report:\n%s", b)
	_ = os.WriteFile(filepath.Join(h.run, "report.json"), b, 0o600)
	if *flagReport != "" {
		_ = os.WriteFile(*flagReport, b, 0o644)
	}
	total := 0
	var kinds []string
	for k, n := range h.faults {
		total += n
		kinds = append(kinds, fmt.Sprintf("%s=%d", k, n))
	}
	sort.Strings(kinds)
	h.t.Logf("SOAK seed=%d faults=%d (%s) convergence p50=%.0fms p99=%.0fms (final-burst victims p50=%.0fms p99=%.0fms) duplicates=%d strangersSignalled=%d orphans=%d violations=%d",
		h.seed, total, strings.Join(kinds, " "), rep.Convergence.P50, rep.Convergence.P99, rep.Victims.P50, rep.Victims.P99,
		rep.Duplicates, rep.Strangers, rep.Orphans, len(h.violations))
	if len(h.violations) > 0 {
		h.t.Errorf("%d invariant violations (seed %d); folder %s kept", len(h.violations), h.seed, h.root)
		*flagKeep = true
	}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// cleanup kills, by pid, every process the soak started and every process
// of its fleet (their command lines name the soak's private folder).
func (h *harness) cleanup() {
	h.mu.Lock()
	u := h.up
	var strangers []*stranger
	for _, st := range h.strangers {
		strangers = append(strangers, st)
	}
	h.mu.Unlock()
	if u != nil {
		select {
		case <-u.done:
		default:
			_ = syscall.Kill(u.cmd.Process.Pid, syscall.SIGKILL)
			<-u.done
		}
	}
	for _, st := range strangers {
		st.expected.Store(true)
		if st.member.pid != 0 && processAlive(st.member) {
			_ = syscall.Kill(st.member.pid, syscall.SIGKILL)
		}
		_ = syscall.Kill(st.pid, syscall.SIGKILL)
		select {
		case <-st.done:
		case <-time.After(5 * time.Second):
		}
	}
	for _, ps := range scanProcs(h.want) {
		for _, p := range ps {
			if p.live() {
				_ = syscall.Kill(p.pid, syscall.SIGKILL)
			}
		}
	}
	h.mu.Lock()
	foreigns := append([]*foreignServer(nil), h.foreigns...)
	h.mu.Unlock()
	for _, f := range foreigns {
		if processAlive(f.proc) {
			_ = syscall.Kill(f.proc.pid, syscall.SIGKILL)
		}
	}
	if *flagKeep || h.t.Failed() {
		h.t.Logf("soak folder kept: %s", h.root)
		return
	}
	_ = os.RemoveAll(h.root)
}
