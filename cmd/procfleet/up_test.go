package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/procfleet/procfleet/internal/testserver"
	"github.com/procfleet/procfleet/observe"
	"github.com/procfleet/procfleet/reconciler"
)

var (
	binOnce sync.Once
	binPath string
	binErr  error
)

// procfleetBin builds this command once per test binary.
func procfleetBin(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		dir, err := os.MkdirTemp("", "procfleet-bin-")
		if err != nil {
			binErr = err
			return
		}
		binPath = filepath.Join(dir, "procfleet")
		out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput()
		if err != nil {
			binErr = fmt.Errorf("build procfleet: %v: %s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

// e2eFleet is a fleet of real test-server binaries run by the real procfleet.
type e2eFleet struct {
	t      *testing.T
	dir    string
	file   string
	state  string
	server string
	ports  map[string]int
	// grace is a server's terminationGracePeriodSeconds (5 when absent);
	// extra more YAML under its spec:, indented by two spaces.
	grace map[string]int
	extra map[string]string
}

func newE2EFleet(t *testing.T, names ...string) *e2eFleet {
	t.Helper()
	dir := t.TempDir()
	f := &e2eFleet{t: t, dir: dir, file: filepath.Join(dir, "procfleet.yaml"), state: filepath.Join(dir, ".procfleet"),
		server: testserver.Build(t), ports: map[string]int{}, grace: map[string]int{}, extra: map[string]string{}}
	for i, port := range testserver.FreePorts(t, len(names)) {
		f.ports[names[i]] = port
	}
	t.Cleanup(f.killServers)
	return f
}

func (f *e2eFleet) stamp(name string) string { return filepath.Join(f.dir, name+".stamp") }

// write saves the fleet: every server depends on the ones listed in deps.
func (f *e2eFleet) write(deps map[string][]string, extraArgs map[string][]string) {
	f.t.Helper()
	var b strings.Builder
	first := true
	for name, port := range f.ports {
		if !first {
			b.WriteString("---\n")
		}
		first = false
		args := append([]string{"-port", strconv.Itoa(port), "-stamp", f.stamp(name)}, extraArgs[name]...)
		q := make([]string, len(args))
		for i, a := range args {
			q[i] = strconv.Quote(a)
		}
		grace := f.grace[name]
		if grace == 0 {
			grace = 5
		}
		fmt.Fprintf(&b, "apiVersion: procfleet.dev/v1alpha1\nkind: Server\nmetadata: {name: %s}\nspec:\n  command: [%q]\n  args: [%s]\n  port: %d\n  terminationGracePeriodSeconds: %d\n",
			name, f.server, strings.Join(q, ", "), port, grace)
		if d := deps[name]; len(d) > 0 {
			fmt.Fprintf(&b, "  dependsOn: [%s]\n", strings.Join(d, ", "))
		}
		b.WriteString(f.extra[name])
	}
	if err := os.WriteFile(f.file+".tmp", []byte(b.String()), 0o644); err != nil {
		f.t.Fatal(err)
	}
	if err := os.Rename(f.file+".tmp", f.file); err != nil {
		f.t.Fatal(err)
	}
}

func (f *e2eFleet) starts(name string) []int {
	b, _ := os.ReadFile(f.stamp(name))
	var pids []int
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if fs := strings.Fields(line); len(fs) == 2 {
			pid, _ := strconv.Atoi(fs[1])
			pids = append(pids, pid)
		}
	}
	return pids
}

// killServers SIGKILLs every test server of this fleet still alive: pinned,
// and checked to run with this fleet's stamp file, before the signal.
func (f *e2eFleet) killServers() {
	for name := range f.ports {
		for _, pid := range f.starts(name) {
			h, err := observe.Pin(pid)
			if err != nil {
				continue
			}
			if id, err := h.Identity(); err == nil && strings.Contains(strings.Join(id.Cmdline, " "), f.stamp(name)) {
				_ = h.Signal(syscall.SIGKILL)
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				_ = h.Wait(ctx)
				cancel()
			}
			_ = h.Close()
		}
	}
}

// cmd runs procfleet to completion.
func (f *e2eFleet) cmd(args ...string) (int, string) {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := exec.CommandContext(ctx, procfleetBin(f.t), append(args, "--state-dir", f.state, "--log-format", "console")...)
	var out bytes.Buffer
	c.Stdout, c.Stderr = &out, &out
	err := c.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		f.t.Fatalf("run procfleet %v: %v", args, err)
	}
	return code, out.String()
}

// up starts `procfleet up` in the background, its output in a file.
func (f *e2eFleet) up(extra ...string) (*exec.Cmd, string) {
	f.t.Helper()
	logPath := filepath.Join(f.dir, fmt.Sprintf("up-%d.log", time.Now().UnixNano()))
	out, err := os.Create(logPath)
	if err != nil {
		f.t.Fatal(err)
	}
	c := exec.Command(procfleetBin(f.t), append([]string{"up", "-f", f.file, "--state-dir", f.state, "--log-format", "console"}, extra...)...)
	c.Stdout, c.Stderr = out, out
	if err := c.Start(); err != nil {
		f.t.Fatal(err)
	}
	out.Close()
	f.t.Cleanup(func() {
		_ = c.Process.Kill()
		_, _ = c.Process.Wait()
	})
	return c, logPath
}

// waitStatus polls status.json until cond holds (bounded).
func (f *e2eFleet) waitStatus(what string, cond func(reconciler.Status) bool) reconciler.Status {
	f.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, err := reconciler.ReadStatus(filepath.Join(f.state, "status.json"))
		if err == nil && cond(st) {
			return st
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("timed out waiting for %s; status %+v (%v)", what, st, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func readyWith(names ...string) func(reconciler.Status) bool {
	return func(st reconciler.Status) bool {
		for _, n := range names {
			if s, ok := st.Get(n); !ok || !s.Ready || s.PID == 0 {
				return false
			}
		}
		return true
	}
}

// waitLog waits until the file holds every one of lines (bounded).
func waitLog(t *testing.T, path string, lines ...string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		b, _ := os.ReadFile(path)
		missing := ""
		for _, l := range lines {
			if !strings.Contains(string(b), l) {
				missing = l
			}
		}
		if missing == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %q in %s:\n%s", missing, path, b)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func pidIn(st reconciler.Status, name string) int { s, _ := st.Get(name); return s.PID }

// TestUpApplyDown runs the real binary: up converges (dependsOn order),
// refuses a second up (naming the holder's pid), applies and downs through
// its socket (a downed server stays stopped until apply), restarts a server
// killed with -9; kill -9 of up and a new up adopt the same pids; SIGTERM
// leaves the servers running; down through a new up stops them all.
func TestUpApplyDown(t *testing.T) {
	f := newE2EFleet(t, "db", "api")
	f.write(map[string][]string{"api": {"db"}}, nil)
	up1, log1 := f.up()
	st := f.waitStatus("both ready", readyWith("db", "api"))
	db, api := pidIn(st, "db"), pidIn(st, "api")
	waitLog(t, log1, "api: ready in")

	code, out := f.cmd("up", "-f", f.file)
	if code != 1 || !strings.Contains(out, fmt.Sprintf("pid %d", up1.Process.Pid)) {
		t.Errorf("second up: exit %d, output %q; want 1 naming pid %d", code, out, up1.Process.Pid)
	}
	code, out = f.cmd("apply", "--wait", "-f", f.file)
	if code != 0 || !strings.Contains(out, "applied through procfleet up: 2 server(s), 2 ready") {
		t.Errorf("apply while up runs: exit %d, output %q; want 0, through up", code, out)
	}

	if err := syscall.Kill(api, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	st = f.waitStatus("api restarted", func(st reconciler.Status) bool {
		return readyWith("api")(st) && pidIn(st, "api") != api
	})
	api = pidIn(st, "api")
	if pidIn(st, "db") != db {
		t.Errorf("db restarted when api was killed")
	}

	// down api through up: stopped and kept stopped; apply starts it again.
	code, out = f.cmd("down", "api", "-f", f.file)
	if code != 0 || !strings.Contains(out, "api: Stopped") {
		t.Fatalf("down api through up: exit %d\n%s", code, out)
	}
	if syscall.Kill(api, 0) == nil {
		t.Errorf("api pid %d alive after down api", api)
	}
	code, out = f.cmd("apply", "--wait", "-f", f.file)
	if code != 0 {
		t.Fatalf("apply after down: exit %d\n%s", code, out)
	}
	st = f.waitStatus("api back", func(st reconciler.Status) bool {
		return readyWith("db", "api")(st) && pidIn(st, "api") != api
	})
	api = pidIn(st, "api")
	if pidIn(st, "db") != db {
		t.Errorf("down api / apply touched db")
	}

	// kill -9 up; a new up adopts both, starts nothing.
	_ = up1.Process.Kill()
	_, _ = up1.Process.Wait()
	up2, log2 := f.up()
	waitLog(t, log2, "db: adopted pid "+strconv.Itoa(db), "api: adopted pid "+strconv.Itoa(api))
	if n, m := len(f.starts("db")), len(f.starts("api")); n != 1 || m != 3 {
		t.Errorf("starts after adoption: db %d api %d; want 1 and 3", n, m)
	}
	// SIGTERM: exit 0, servers left running.
	if err := up2.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := up2.Wait(); err != nil {
		b, _ := os.ReadFile(log2)
		t.Errorf("up after SIGTERM: %v\n%s", err, b)
	}
	for _, pid := range []int{db, api} {
		if syscall.Kill(pid, 0) != nil {
			t.Errorf("pid %d gone after up exited", pid)
		}
	}
	b, _ := os.ReadFile(log1)
	if !strings.Contains(string(b), "db: ready in") || !strings.Contains(string(b), "api: starting") {
		t.Errorf("up's progress lines missing:\n%s", b)
	}

	// down of everything through a third up.
	up3, log3 := f.up()
	waitLog(t, log3, "db: adopted pid "+strconv.Itoa(db), "api: adopted pid "+strconv.Itoa(api))
	code, out = f.cmd("down", "-f", f.file)
	if code != 0 {
		t.Fatalf("down: exit %d\n%s", code, out)
	}
	b, _ = os.ReadFile(log3)
	if i, j := strings.Index(string(b), "api: stopped"), strings.Index(string(b), "db: stopping"); i < 0 || j < 0 || j < i {
		t.Errorf("down did not stop api before db:\n%s", b)
	}
	entries := recordsLeft(f.state)
	if len(entries) != 0 {
		t.Errorf("records left after down: %v", entries)
	}
	for name, port := range f.ports {
		if !testserver.PortFree(port) {
			t.Errorf("%s's port %d still held after down", name, port)
		}
	}
	if err := up3.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := up3.Wait(); err != nil {
		t.Errorf("up3 after SIGTERM: %v", err)
	}
}

// TestApplyWait: apply --wait exits 0 with every server Ready and leaves them
// running; a server that cannot start makes it exit 1 naming it.
func TestApplyWait(t *testing.T) {
	f := newE2EFleet(t, "one", "two")
	f.write(nil, nil)
	code, out := f.cmd("apply", "--wait", "-f", f.file)
	if code != 0 || !strings.Contains(out, "applied: 2 server(s), 2 ready") {
		t.Fatalf("apply --wait: exit %d\n%s", code, out)
	}
	f.write(nil, map[string][]string{"two": {"-exit-after", "10ms", "-exit-code", "4", "-listen-delay", "5s"}})
	code, out = f.cmd("apply", "--wait", "--timeout", "20s", "-f", f.file)
	if code != 1 || !strings.Contains(out, "two: Failed") || !strings.Contains(out, "exited with code 4") {
		t.Errorf("apply with a failing server: exit %d\n%s", code, out)
	}
	if n := len(f.starts("one")); n != 1 {
		t.Errorf("one started %d times, want 1", n)
	}
	if code, out := f.cmd("down", "-f", f.file); code != 0 {
		t.Errorf("down: exit %d\n%s", code, out)
	}
}

// upReadyThenTerm runs up --down-on-exit, waits until name is Ready (in
// status and in up's log), sends up SIGTERM, and returns up, its log and
// name's pid.
func (f *e2eFleet) upReadyThenTerm(name string) (*exec.Cmd, string, int) {
	f.t.Helper()
	up, log := f.up("--down-on-exit")
	st := f.waitStatus("ready", readyWith(name))
	pid := pidIn(st, name)
	waitLog(f.t, log, name+": ready in")
	if err := up.Process.Signal(syscall.SIGTERM); err != nil {
		f.t.Fatal(err)
	}
	return up, log, pid
}

// TestUpDownOnExit: with --down-on-exit, SIGTERM stops every server first
// (records gone, ports free), then up exits 0.
func TestUpDownOnExit(t *testing.T) {
	f := newE2EFleet(t, "solo")
	f.write(nil, nil)
	up, log, pid := f.upReadyThenTerm("solo")
	if err := up.Wait(); err != nil {
		b, _ := os.ReadFile(log)
		t.Fatalf("up --down-on-exit after SIGTERM: %v\n%s", err, b)
	}
	if syscall.Kill(pid, 0) == nil {
		t.Errorf("pid %d still alive after up --down-on-exit", pid)
	}
	entries := recordsLeft(f.state)
	if len(entries) != 0 {
		t.Errorf("records left: %v", entries)
	}
	if !testserver.PortFree(f.ports["solo"]) {
		t.Errorf("port still held")
	}
	b, _ := os.ReadFile(log)
	if !strings.Contains(string(b), "solo: stopped") {
		t.Errorf("no 'solo: stopped' line:\n%s", b)
	}
}

// recordsLeft lists what the state folder's servers/ holds but its spare
// inodes (servers/.spare, never read as records): records and temp files.
func recordsLeft(state string) []string {
	entries, _ := os.ReadDir(filepath.Join(state, "servers"))
	var out []string
	for _, e := range entries {
		if e.Name() != ".spare" {
			out = append(out, e.Name())
		}
	}
	return out
}

// TestUpSecondSignalExitsNow: a second SIGTERM ends up at once, even while
// its --down-on-exit waits out a server's grace period; the server it was
// stopping is left running (as a crash of up would leave it).
func TestUpSecondSignalExitsNow(t *testing.T) {
	f := newE2EFleet(t, "stubborn")
	f.grace["stubborn"] = 120
	f.write(nil, map[string][]string{"stubborn": {"-ignore-term"}})
	t.Cleanup(f.killServers)
	up, log, pid := f.upReadyThenTerm("stubborn")
	// It ignores SIGTERM: up now waits out its 120 s grace period.
	waitLog(t, log, "signal again to exit at once", "stubborn: stopping")
	exited := make(chan error, 1)
	go func() { exited <- up.Wait() }()
	if err := up.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() == 0 {
			t.Errorf("up after a second SIGTERM: %v, want ended by the signal", err)
		}
	case <-time.After(20 * time.Second):
		b, _ := os.ReadFile(log)
		t.Fatalf("up still running 20 s after a second SIGTERM:\n%s", b)
	}
	if syscall.Kill(pid, 0) != nil {
		t.Errorf("pid %d gone; want it left running by the interrupted stop", pid)
	}
}
