package actuate

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"

	"github.com/procfleet/procfleet/internal/testserver"
	"github.com/procfleet/procfleet/observe"
)

// events records what an Actuator reports.
type events struct {
	mu  sync.Mutex
	all []string // "server reason message"
}

func (e *events) Event(server, reason, message string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.all = append(e.all, server+" "+reason+" "+message)
}

func (e *events) with(reason string) []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []string
	for _, s := range e.all {
		if strings.Contains(s, " "+reason+" ") {
			out = append(out, s)
		}
	}
	return out
}

// forServer returns the events of one server with that reason.
func (e *events) forServer(server, reason string) []string {
	var out []string
	for _, s := range e.with(reason) {
		if strings.HasPrefix(s, server+" ") {
			out = append(out, s)
		}
	}
	return out
}

// signalCounter wraps the real signal path and counts what is sent.
type signalCounter struct {
	mu   sync.Mutex
	sent []string
	drop syscall.Signal // a signal to swallow instead of sending (0: none)
}

func (c *signalCounter) install(a *Actuator) {
	a.signal = func(t target, sig syscall.Signal) (string, error) {
		c.mu.Lock()
		c.sent = append(c.sent, fmt.Sprintf("%s %s", signalName(sig), t))
		c.mu.Unlock()
		if sig == c.drop {
			return "nowhere (swallowed by the test)", nil
		}
		return t.send(sig)
	}
}

func (c *signalCounter) list() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.sent...)
}

func newActuator(t *testing.T) (*Actuator, *events) {
	t.Helper()
	ev := &events{}
	return &Actuator{Dir: newStateDir(t), Log: testr.New(t), Events: ev}, ev
}

// serverReq is a request that runs the test server with args.
func serverReq(name string, port int, args ...string) StartRequest {
	return StartRequest{
		Name: name, Argv: testserver.Command(args...), Env: []string{testserver.Env()}, Port: port,
		StartupTimeout: 60 * time.Second, Grace: 20 * time.Second, KillTimeout: 10 * time.Second,
		ReadyPeriod: 10 * time.Millisecond,
	}
}

func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// killPinned pins pid now and SIGKILLs it at cleanup if it still lives; the
// pin makes sure the cleanup never reaches a process that reused the pid.
func killPinned(t *testing.T, pid int) *observe.Handle {
	t.Helper()
	h, err := observe.Pin(pid)
	if err != nil {
		t.Fatalf("pin %d: %v", pid, err)
	}
	t.Cleanup(func() {
		if !h.Exited() {
			_ = h.Signal(syscall.SIGKILL)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			_ = h.Wait(ctx)
			cancel()
		}
		_ = h.Close()
	})
	return h
}

// startStranger runs the test server as this test's own child, not through
// an Actuator: a process procfleet does not own. It waits for its ready file.
func startStranger(t *testing.T, args ...string) (*exec.Cmd, string) {
	t.Helper()
	dir := t.TempDir()
	ready := filepath.Join(dir, "ready")
	signals := filepath.Join(dir, "signals")
	argv := testserver.Command(append([]string{"-ready-file", ready, "-signals", signals}, args...)...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), testserver.Env())
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
	})
	waitForFile(t, ready, done)
	return cmd, signals
}

// waitForFile waits for a handshake file to hold a line, or for the process
// to end (a failure), up to 30 s.
func waitForFile(t *testing.T, path string, exited <-chan struct{}) string {
	t.Helper()
	deadline := time.NewTimer(30 * time.Second)
	defer deadline.Stop()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		if b, err := os.ReadFile(path); err == nil && strings.HasSuffix(string(b), "\n") {
			return strings.TrimSpace(string(b))
		}
		select {
		case <-tick.C:
		case <-exited:
			t.Fatalf("process exited before writing %s", path)
		case <-deadline.C:
			t.Fatalf("timed out waiting for %s", path)
		}
	}
}

// pinnedFromFile waits for a handshake file naming a pid (see waitForFile),
// pins that process and kills it at cleanup if it still lives.
func pinnedFromFile(t *testing.T, path string, exited <-chan struct{}) (int, *observe.Handle) {
	t.Helper()
	pid, err := strconv.Atoi(waitForFile(t, path, exited))
	if err != nil {
		t.Fatal(err)
	}
	return pid, killPinned(t, pid)
}

// readSignals returns the signal lines a test server recorded ("PID NAME").
func readSignals(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		out = append(out, sc.Text())
	}
	return out
}

// recordFor builds a record for a live process from what the kernel says,
// to be altered by the test.
func recordFor(t *testing.T, name string, pid int) Record {
	t.Helper()
	id, err := observe.ReadIdentity(pid)
	if err != nil {
		t.Fatal(err)
	}
	boot, err := observe.BootID()
	if err != nil {
		t.Fatal(err)
	}
	return Record{Version: 1, Name: name, PID: pid, PGID: id.PGID, StartTime: id.StartTime, BootID: boot,
		UID: id.UID, Cmdline: id.Cmdline, StartedAt: time.Now().UTC().Truncate(time.Second)}
}

// countFDs counts this process's open descriptors.
func countFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("cannot count descriptors: %v", err)
	}
	return len(ents)
}

// fdTargets lists where a process's descriptors point.
func fdTargets(t *testing.T, pid int) map[int]string {
	t.Helper()
	dir := "/proc/" + strconv.Itoa(pid) + "/fd"
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int]string{}
	for _, e := range ents {
		n, _ := strconv.Atoi(e.Name())
		target, _ := os.Readlink(filepath.Join(dir, e.Name()))
		out[n] = target
	}
	return out
}

func assertGone(t *testing.T, h *observe.Handle) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.Wait(ctx); err != nil {
		t.Errorf("pid %d still alive: %v", h.PID(), err)
	}
}

func assertNoRecord(t *testing.T, d *StateDir, name string) {
	t.Helper()
	if _, err := os.Lstat(d.RecordPath(name)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("record of %s still there (%v)", name, err)
	}
}

func assertAlive(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	if err := cmd.Process.Signal(syscall.Signal(0)); err != nil {
		t.Errorf("stranger pid %d is gone: %v", cmd.Process.Pid, err)
	}
}

// withReadyFile makes a request's readiness the test server's ready file,
// which it writes after installing its signal handlers (and listening, with
// -port): a server that is Ready then records the signals it gets.
func withReadyFile(t *testing.T, req StartRequest) StartRequest {
	t.Helper()
	ready := filepath.Join(t.TempDir(), "ready")
	req.Argv = append(req.Argv, "-ready-file", ready)
	req.Ready = func(context.Context) observe.ProbeResult {
		b, err := os.ReadFile(ready)
		return observe.ProbeResult{OK: err == nil && strings.HasSuffix(string(b), "\n")}
	}
	return req
}

// stopIfStarted cleans up after a start that was expected to fail but did
// not, so that no process outlives the test.
func stopIfStarted(t *testing.T, r *Running) {
	t.Helper()
	if r == nil {
		return
	}
	killPinned(t, r.Record.PID)
	_ = r.Handle.Close()
}

// forModes runs f once per membership mode: "cgroup", where this machine
// lets procfleet make cgroups (skipped, saying why, elsewhere), and
// "session" (PROCFLEET_CGROUP=off).
func forModes(t *testing.T, f func(t *testing.T, mode MembershipMode)) {
	t.Helper()
	t.Run("cgroup", func(t *testing.T) {
		t.Setenv(CgroupEnv, "on")
		if m := (&StateDir{Path: t.TempDir()}).Membership(); m.Mode != MembershipCgroup {
			t.Skipf("cgroups not available here: %s", m.Why)
		}
		f(t, MembershipCgroup)
	})
	t.Run("session", func(t *testing.T) {
		sessionMode(t)
		f(t, MembershipSession)
	})
}

// sessionMode makes the test use the session membership
// (PROCFLEET_CGROUP=off): for the paths only that mode has (group signals).
func sessionMode(t *testing.T) {
	t.Helper()
	t.Setenv(CgroupEnv, "off")
}

// removeTestCgroups removes the cgroups a test's state folder made, after
// its other cleanups: a test that kills its server by hand (killPinned)
// leaves an empty one behind, as a server killed outside procfleet does
// until its folder is next locked. Anything still in one is a failure:
// it is killed first.
func removeTestCgroups(t *testing.T, d *StateDir) {
	cg, err := observe.FindCgroup2()
	if err != nil {
		return
	}
	dir, err := cg.Dir(path.Join(cg.Self, cgroupPrefix+d.ID()))
	if err != nil {
		return
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		sub := filepath.Join(dir, e.Name())
		if pop, err := observe.CgroupPopulated(sub); err == nil && pop {
			t.Errorf("cgroup %s still holds processes after the test: killing them", sub)
			_ = killCgroup(sub)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			_ = observe.WaitCgroupEmpty(ctx, sub)
			cancel()
		}
		_ = os.Remove(sub) // the sweep leaves a recorded server's
	}
	d.sweepCgroups()
}

// startInCgroup starts server "api" (running for an hour) with a fresh
// Actuator in the cgroup mode, skipping the test where procfleet cannot
// make cgroups; the process is killed at the test's end.
func startInCgroup(t *testing.T) (*Actuator, *Running) {
	t.Helper()
	a, _ := newActuator(t)
	if m := a.Dir.Membership(); m.Mode != MembershipCgroup {
		t.Skipf("cgroups not available here: %s", m.Why)
	}
	r, err := a.Start(testCtx(t), serverReq("api", 0, "-exit-after", "1h"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Handle.Close() })
	killPinned(t, r.Record.PID)
	return a, r
}
