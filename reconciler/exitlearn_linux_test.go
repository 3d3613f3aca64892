package reconciler

import (
	"bufio"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/procfleet/procfleet/actuate"
	"github.com/procfleet/procfleet/observe"
	"github.com/procfleet/procfleet/spec"
)

// TestAdoptedExitStatusLearned: an adopted server is not the reconciler's
// child, so when it exits its status is unknown (-1) and it is restarted at
// once; once its parent reaps it, the status is read from its pidfd (Linux
// >= 6.15) and replaces the -1 in the last exit.
//
// The test is that parent: it starts the process itself and writes the
// record an earlier `up` would have written, so it decides when the reap
// happens. The process is a shell that exits with code 3 when its stdin
// closes (the test server cannot exit with a code on demand).
func TestAdoptedExitStatusLearned(t *testing.T) {
	f := newTestFleet(t)
	a := startAdoptable(t, f, "")
	pid, h := a.cmd.Process.Pid, a.pin

	wake := make(chan struct{}, 1)
	rr := f.run(t, wakeOnEvent(wake))
	get := func() ServerStatus {
		s, _ := rr.r.Status().Get("s")
		return s
	}
	// The phase changes before the event is sent: wait for both.
	waitChange(t, rr.r, wake, "adoption", func() bool {
		s := get()
		return s.Phase == PhaseRunning && s.PID == pid && rr.ev.index("s", ReasonAdopted) >= 0
	})
	if n := rr.ev.count("s", ReasonAdopted); n != 1 {
		t.Fatalf("%d Adopted events, want 1", n)
	}

	if err := a.stdin.Close(); err != nil {
		t.Fatal(err)
	}
	waitChange(t, rr.r, wake, "the exit seen", func() bool { return rr.ev.index("s", ReasonExited) >= 0 })
	// Not reaped yet (the test has not waited): the kernel has no status
	// to tell, so the last exit can only say unknown.
	first := get().LastExit
	if first == nil || first.Code != -1 || !strings.Contains(first.Reason, "status unknown") {
		t.Fatalf("last exit before the reap = %+v, want code -1, status unknown", first)
	}

	werr := a.cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(werr, &ee) || ee.ExitCode() != 3 {
		t.Fatalf("the shell's exit as its parent saw it: %v, want code 3", werr)
	}
	if _, ok := h.ExitStatus(); !ok {
		t.Skip("this kernel gives no exit status through a pidfd (Linux < 6.15)")
	}
	waitChange(t, rr.r, wake, "the exit status learned", func() bool {
		le := get().LastExit
		return le != nil && le.Code == 3 && rr.ev.index("s", ReasonExitLearned) >= 0
	})
	le := get().LastExit
	if le.Signal != "" || !strings.Contains(le.Reason, "exited with code 3") || !le.At.Equal(first.At) {
		t.Errorf("learned last exit = %+v, want code 3 said in its reason, at %v (the same exit)", le, first.At)
	}
	if i := rr.ev.index("s", ReasonExitLearned); i < 0 || !strings.Contains(rr.ev.all()[i].Message, "pid "+strconv.Itoa(pid)) {
		t.Errorf("no ExitLearned event naming pid %d; events: %+v", pid, rr.ev.all())
	}
	// The restart did not wait for the status.
	waitChange(t, rr.r, wake, "the restart", func() bool {
		s := get()
		return s.Phase == PhaseRunning && s.PID != 0 && s.PID != pid && s.Restarts >= 1
	})
	if n := rr.ev.count("s", ReasonStarting); n != 1 {
		t.Errorf("%d Starting events, want 1", n)
	}
}

// TestAdoptedExitNotReapedStop: while an adopted process that exited is not
// reaped, the look for its status keeps its pidfd open; stopping Run ends
// that look at once (the reconciler's clock is fake, so the look's timer
// never fires: only the cancel can end it) and closes the pidfd, and the
// last exit stays unknown.
func TestAdoptedExitNotReapedStop(t *testing.T) {
	f := newTestFleet(t)
	// restartPolicy Never: a restart racing the stop below would end with
	// its own last exit ("context canceled" from the cancelled spawn).
	a := startAdoptable(t, f, "Never")
	pid := a.cmd.Process.Pid
	ino, ok := a.pin.PidfdInode()
	if !ok {
		t.Skip("no pidfs inode to count the pidfds by (Linux < 6.9)")
	}
	// The test's pin and os/exec's own pidfd of its child (Go >= 1.23).
	base := pidfdsOf(t, ino)
	wake := make(chan struct{}, 1)
	clk := clocktesting.NewFakeClock(time.Now())
	rr := f.run(t, func(c *Config) {
		wakeOnEvent(wake)(c)
		c.Clock = clk
	})
	get := func() ServerStatus {
		s, _ := rr.r.Status().Get("s")
		return s
	}
	waitChange(t, rr.r, wake, "adoption", func() bool { s := get(); return s.Phase == PhaseRunning && s.PID == pid })
	if err := a.stdin.Close(); err != nil {
		t.Fatal(err)
	}
	waitChange(t, rr.r, wake, "the exit seen", func() bool { return rr.ev.index("s", ReasonExited) >= 0 })
	if n := pidfdsOf(t, ino); n != base+1 {
		t.Errorf("%d pidfds on the exited process while its status is looked for, want %d (the test's and the look's)", n, base+1)
	}
	rr.stop(t)
	if n := pidfdsOf(t, ino); n != base {
		t.Errorf("%d pidfds on the exited process after Run returned, want %d (the test's)", n, base)
	}
	if le := get().LastExit; le == nil || le.Code != -1 || !strings.Contains(le.Reason, "status unknown") {
		t.Errorf("last exit = %+v, want code -1, status unknown", le)
	}
}

// adoptable is a process the test started (so the test reaps it) with the
// record an earlier up would have written for server "s" of f: a shell
// that exits with code 3 when its stdin closes (the test server cannot exit
// with a code on demand). It writes "ready" first: its exec is over then.
type adoptable struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	pin   *observe.Handle // the test's own
}

func startAdoptable(t *testing.T, f *testFleet, policy string) adoptable {
	t.Helper()
	f.add(&testSpec{name: "s", policy: policy})
	f.write()
	fleet, err := spec.Load(f.file)
	if err != nil {
		t.Fatal(err)
	}
	srv, ok := fleet.Get("s")
	if !ok {
		t.Fatal("server s not loaded")
	}
	cmd := exec.Command("sh", "-c", "echo ready; read line; exit 3")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	// The shell runs (its exec is over, its command line is readable) once
	// it says so.
	if line, err := bufio.NewReader(stdout).ReadString('\n'); err != nil || line != "ready\n" {
		t.Fatalf("the shell's handshake: %q, %v", line, err)
	}
	pid := cmd.Process.Pid
	h, err := observe.Pin(pid)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	id, err := h.Identity()
	if err != nil {
		t.Fatal(err)
	}
	boot, err := observe.BootID()
	if err != nil {
		t.Fatal(err)
	}
	rec := actuate.Record{Version: actuate.RecordVersion, Name: "s", PID: pid, PGID: id.PGID, StartTime: id.StartTime,
		BootID: boot, UID: id.UID, Cmdline: id.Cmdline, SpecHash: srv.Hash(), StartedAt: time.Now().UTC()}
	if ino, ok := h.PidfdInode(); ok {
		rec.PidfdInode = ino
	}
	if err := f.state.WriteRecord(rec); err != nil {
		t.Fatal(err)
	}
	return adoptable{cmd: cmd, stdin: stdin, pin: h}
}

// wakeOnEvent makes the reconciler's OnEvent also send on wake.
func wakeOnEvent(wake chan struct{}) func(*Config) {
	return func(c *Config) {
		inner := c.OnEvent
		c.OnEvent = func(e Event) {
			inner(e)
			select {
			case wake <- struct{}{}:
			default:
			}
		}
	}
}

// pidfdsOf counts this process's pidfds on the pidfs inode ino (every pidfd
// of one process has the same inode; the link reads "anon_inode:[pidfd]").
func pidfdsOf(t *testing.T, ino uint64) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range ents {
		fi, err := os.Stat(filepath.Join("/proc/self/fd", e.Name()))
		if err != nil {
			continue // closed meanwhile, or the directory's own descriptor
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Ino == ino && strings.Contains(mustReadlink(e.Name()), "pidfd") {
			n++
		}
	}
	return n
}

func mustReadlink(fd string) string {
	l, _ := os.Readlink(filepath.Join("/proc/self/fd", fd))
	return l
}

// waitChange waits until cond holds, woken by every change of the
// reconciler (phase, readiness, pass, status) and by wake; bounded.
func waitChange(t *testing.T, r *Reconciler, wake <-chan struct{}, what string, cond func() bool) {
	t.Helper()
	deadline := time.NewTimer(30 * time.Second)
	defer deadline.Stop()
	for {
		ch := r.Changes()
		if cond() {
			return
		}
		select {
		case <-ch:
		case <-wake:
		case <-deadline.C:
			t.Fatalf("timed out waiting for %s; status:\n%s", what, dumpStatus(r.Status()))
		}
	}
}
