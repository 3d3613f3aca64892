package actuate

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/procfleet/procfleet/internal/testserver"
	"github.com/procfleet/procfleet/observe"
)

// countScans makes the shared scanner count its scans for the test.
func countScans(t *testing.T) *atomic.Int32 {
	t.Helper()
	var n atomic.Int32
	old := procs
	procs = &procScanner{scan: func(since uint64) ([]observe.ProcEntry, error) {
		n.Add(1)
		return old.scan(since)
	}}
	t.Cleanup(func() { procs = old })
	return &n
}

// A server that starts a double-forked daemon (its own session, parent
// init, out of the server's group and tree): Stop finds it by its cgroup
// or its instance token, and it is gone afterwards.
func TestStopDoubleForkedDaemon(t *testing.T) {
	forModes(t, func(t *testing.T, mode MembershipMode) {
		a, _ := newActuator(t)
		ctx := testCtx(t)
		port := testserver.FreePort(t)
		dir := t.TempDir()
		daemonPID := filepath.Join(dir, "daemon")
		self := testserver.Command()[0]
		// A shell that runs a daemonizing helper, then becomes the server.
		script := `"$0" -daemonize -daemon-pid-file "$1" && exec "$0" -port "$2"`
		req := StartRequest{Name: "api", Argv: []string{"sh", "-c", script, self, daemonPID, itoa(port)}, Env: []string{testserver.Env()},
			Port: port, StartupTimeout: time.Minute, ReadyPeriod: 10 * time.Millisecond}
		r, err := a.Start(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		killCarriersAtCleanup(t, r.Record.Instance)
		defer r.Handle.Close()
		pid, dh := pinnedFromFile(t, daemonPID, r.Done())
		did, err := dh.Identity()
		if err != nil {
			t.Fatal(err)
		}
		if did.SID == r.Record.PID || did.PGID == r.Record.PID || did.PPID == r.Record.PID {
			t.Fatalf("the daemon is not detached: %+v (server pid %d)", did, r.Record.PID)
		}
		b, ev := fresh(t, a)
		if err := b.Stop(ctx, r.Record, StopOptions{}); err != nil {
			t.Fatalf("Stop: %v", err)
		}
		assertGone(t, r.Handle)
		assertGone(t, dh)
		assertNothingLeft(t, r.Record)
		want := "carries the instance token"
		if mode == MembershipCgroup {
			want = "in cgroup"
		}
		found := false
		for _, e := range ev.with(EventSignal) {
			found = found || strings.Contains(e, "pid "+itoa(pid)) && strings.Contains(e, want)
		}
		if !found {
			t.Errorf("no signal event for the daemon %d naming %q: %v", pid, want, ev.with(EventSignal))
		}
	})
}

// A server whose first process exits 0 before it is ready, leaving a
// daemon that holds its port (nginx without "daemon off"): the start
// fails as Daemonized, naming the daemon and its port as data, saying how
// to run it in the foreground; the daemon is stopped.
func TestStartDaemonized(t *testing.T) {
	forModes(t, func(t *testing.T, mode MembershipMode) {
		a, _ := newActuator(t)
		ctx := testCtx(t)
		port := testserver.FreePort(t)
		pidFile := filepath.Join(t.TempDir(), "daemon")
		req := serverReq("api", port, "-daemonize", "-daemon-pid-file", pidFile, "-port", itoa(port), "-listen-delay", "0s")
		// Readiness by a probe that never passes: the first process exits
		// before it could.
		req.Ready = func(context.Context) observe.ProbeResult { return observe.ProbeResult{Message: "not yet"} }
		r, err := a.Start(ctx, req)
		stopIfStarted(t, r)
		// Should the daemon outlive a failure below, it goes at cleanup
		// (pinned, and only if the pin shows the daemon: its pid may have
		// been reused since it was stopped).
		if b, err := os.ReadFile(pidFile); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
				if h, err := observe.Pin(pid); err == nil {
					id, ierr := h.Identity()
					_, carries, _ := h.Env(InstanceEnv)
					if ierr == nil && carries && slices.Contains(id.Cmdline, "-daemon-stage") {
						t.Cleanup(func() { _ = h.Signal(syscall.SIGKILL); _ = h.Close() })
					} else {
						_ = h.Close()
					}
				}
			}
		}
		var se *StartError
		if !errors.As(err, &se) || se.Reason != ReasonDaemonized {
			t.Fatalf("Start = %v, want *StartError Daemonized", err)
		}
		pid, perr := strconv.Atoi(strings.TrimSpace(readFile(t, pidFile)))
		if perr != nil || se.DaemonPID != pid {
			t.Errorf("DaemonPID %d, the daemon is %d (%v)", se.DaemonPID, pid, perr)
		}
		if se.Holder == nil || len(se.Holder.PIDs) == 0 || se.Holder.PIDs[0] != pid {
			t.Errorf("Holder %v, want the daemon %d holding port %d", se.Holder, pid, port)
		}
		for _, w := range []string{"daemonized", "pid " + itoa(pid), "holding port " + itoa(port), "foreground", "daemon off"} {
			if !strings.Contains(se.Message, w) {
				t.Errorf("message %q does not say %q", se.Message, w)
			}
		}
		if observe.CheckLiveness(pid) == observe.LivenessAlive {
			t.Errorf("the daemon %d still runs", pid)
		}
		if !testserver.PortFree(port) {
			t.Errorf("port %d still held", port)
		}
		assertNoRecord(t, a.Dir, "api")
	})
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// cleanupRound starts a server whose child is in its group (and, with
// holdPort, shares its listener), kills the leader with SIGKILL as a
// crash would, and runs Cleanup with the leader's held pin; it fails
// unless nothing of the server is left.
func cleanupRound(t testing.TB, a *Actuator, holdPort bool, env ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := t.TempDir()
	gcFile := filepath.Join(dir, "child")
	port := testserver.FreePort(t)
	args := []string{"-port", itoa(port), "-grandchild", gcFile}
	if holdPort {
		args = append(args, "-grandchild-holds-port")
	}
	req := serverReq("api", port, args...)
	req.Env = append(req.Env, env...)
	req.Ready = func(context.Context) observe.ProbeResult {
		b, err := os.ReadFile(gcFile)
		return observe.ProbeResult{OK: err == nil && strings.HasSuffix(string(b), "\n") && observe.PortAccepting(ctx, port)}
	}
	r, err := a.Start(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	killCarriersAtCleanup(t, r.Record.Instance) // should a round fail half-way
	defer r.Handle.Close()
	b, err := os.ReadFile(gcFile)
	if err != nil {
		t.Fatal(err)
	}
	gcPID, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	gc, err := observe.Pin(gcPID)
	if err != nil {
		t.Fatal(err)
	}
	defer gc.Close()
	if err := r.Handle.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := r.Handle.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if gc.Exited() {
		t.Fatal("the child died with its leader: nothing to clean up")
	}
	if holdPort && testserver.PortFree(port) {
		t.Fatal("the child does not hold the port")
	}
	if err := a.Cleanup(ctx, r.Record, StopOptions{Held: r.Handle, Grace: 10 * time.Second}); err != nil {
		t.Fatalf("Cleanup: %v", err)
	}
	if err := gc.Wait(ctx); err != nil {
		t.Fatalf("the child outlived Cleanup: %v", err)
	}
	if err := a.Dir.RemoveRecord("api"); err != nil {
		t.Fatal(err)
	}
	if !testserver.PortFree(port) {
		t.Fatalf("port %d still held after Cleanup", port)
	}
	if r.Record.Cgroup != "" {
		if dir, err := cgroupDir(r.Record.Cgroup); err == nil {
			if _, err := os.Stat(dir); err == nil {
				t.Fatalf("cgroup %s left after Cleanup", r.Record.Cgroup)
			}
		}
	}
}

// After the leader's kill -9 its child (one in its group, one that also
// holds its port) is stopped by Cleanup: nothing is left, the port is
// free. BenchmarkCleanupAfterKill repeats it (-benchtime 200x: 200 in a
// row) and then counts the processes left by an environment marker.
func TestCleanupAfterLeaderKilled(t *testing.T) {
	forModes(t, func(t *testing.T, mode MembershipMode) {
		for _, holdPort := range []bool{false, true} {
			a, _ := newActuator(t)
			for range 3 {
				cleanupRound(t, a, holdPort)
			}
		}
	})
}

// churnEnv marks every process of BenchmarkCleanupAfterKill's rounds.
const churnEnv = "PROCFLEET_TEST_CHURN"

func BenchmarkCleanupAfterKill(b *testing.B) {
	for _, mode := range []string{"cgroup", "session"} {
		b.Run(mode, func(b *testing.B) {
			if mode == "session" {
				b.Setenv(CgroupEnv, "off")
			}
			d, err := OpenStateDir(b.TempDir())
			if err != nil {
				b.Fatal(err)
			}
			if mode == "cgroup" && d.Membership().Mode != MembershipCgroup {
				b.Skip(d.Membership().Why)
			}
			a := &Actuator{Dir: d}
			// Every round's processes carry one marker that procfleet does not
			// set; after the rounds none may be alive (the churn of issue 20:
			// -benchtime 200x).
			marker := "churn-" + strconv.Itoa(os.Getpid()) + "-" + mode
			for i := 0; b.Loop(); i++ {
				cleanupRound(b, a, i%2 == 1, churnEnv+"="+marker)
			}
			b.StopTimer()
			es, err := observe.ScanProcesses(observe.ScanOptions{EnvKey: churnEnv})
			if err != nil {
				b.Fatal(err)
			}
			for _, e := range es {
				if e.EnvFound && e.Env == marker {
					b.Errorf("pid %d still carries %s=%s after %d rounds", e.PID, churnEnv, marker, b.N)
				}
			}
		})
	}
}

// With nothing left after the leader exited, Cleanup returns at once: in
// the cgroup mode without any process-table scan.
func TestCleanupNothingLeft(t *testing.T) {
	forModes(t, func(t *testing.T, mode MembershipMode) {
		a, ev := newActuator(t)
		ctx := testCtx(t)
		r, err := a.Start(ctx, serverReq("api", 0, "-exit-after", "1h"))
		if err != nil {
			t.Fatal(err)
		}
		defer r.Handle.Close()
		if err := r.Handle.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		<-r.Done()
		scans := countScans(t)
		t0 := time.Now()
		if err := a.Cleanup(ctx, r.Record, StopOptions{Held: r.Handle}); err != nil {
			t.Fatal(err)
		}
		took := time.Since(t0)
		if mode == MembershipCgroup && scans.Load() != 0 {
			t.Errorf("Cleanup with a cgroup scanned the processes %d times", scans.Load())
		}
		if len(ev.with(EventSignal)) != 0 {
			t.Errorf("signals sent with nothing left: %v", ev.with(EventSignal))
		}
		t.Logf("%s mode: Cleanup with nothing left took %v, %d scans", mode, took, scans.Load())
		// Cleanup of a leader that still runs is refused: that is Stop.
		r2, err := a.Start(ctx, serverReq("api2", 0, "-exit-after", "1h"))
		if err != nil {
			t.Fatal(err)
		}
		defer r2.Handle.Close()
		killPinned(t, r2.Record.PID)
		if err := a.Cleanup(ctx, r2.Record, StopOptions{Held: r2.Handle}); err == nil {
			t.Error("Cleanup with a live held leader succeeded")
		}
		if err := a.Stop(ctx, r2.Record, StopOptions{Held: r2.Handle}); err != nil {
			t.Fatal(err)
		}
	})
}

// A stop in the cgroup mode scans no process table.
func TestStopCgroupScansNothing(t *testing.T) {
	a, r := startInCgroup(t)
	ctx := testCtx(t)
	scans := countScans(t)
	b, _ := fresh(t, a)
	if err := b.Stop(ctx, r.Record, StopOptions{}); err != nil {
		t.Fatal(err)
	}
	if scans.Load() != 0 {
		t.Errorf("Stop with a cgroup scanned the processes %d times", scans.Load())
	}
}

// A server started as root that drops its privileges (setpriv to nobody,
// as memcached -u nobody, nginx and postgres do) is still owned and
// stopped, by a procfleet that did not hold it; its record follows the
// uid it runs as. Root only.
func TestStopPrivilegeDrop(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to drop privileges to nobody (not root here)")
	}
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Skipf("no setpriv: %v", err)
	}
	bin := nobodyBinary(t)
	forModes(t, func(t *testing.T, mode MembershipMode) {
		a, ev := newActuator(t)
		ctx := testCtx(t)
		port := testserver.FreePort(t)
		// The spawn waits on a FIFO before it execs setpriv, so that its
		// record is sure to show the spawn as root: the drop comes after it.
		gate := filepath.Join(t.TempDir(), "gate")
		if err := syscall.Mkfifo(gate, 0o600); err != nil {
			t.Fatal(err)
		}
		req := StartRequest{Name: "api", Argv: []string{"/bin/sh", "-c", `read _ < "$0"; exec "$@"`, gate,
			setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", bin, "-port", itoa(port)},
			Port: port, StartupTimeout: time.Minute, ReadyPeriod: 10 * time.Millisecond}
		r, err := a.Spawn(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		killCarriersAtCleanup(t, r.Record.Instance)
		defer r.Handle.Close()
		if r.Record.UID != 0 || r.Record.Cmdline[0] != "/bin/sh" {
			t.Fatalf("record at spawn: uid %d, %q; want root's /bin/sh", r.Record.UID, r.Record.Cmdline)
		}
		openGate(t, gate)
		if err := a.WaitReady(ctx, req, r); err != nil {
			t.Fatal(err)
		}
		rec, changed, err := a.RefreshCmdline(r.Record, r.Handle)
		if err != nil || !changed || rec.UID != 65534 || rec.Cmdline[0] != bin {
			t.Fatalf("RefreshCmdline = %+v, %v, %v; want uid 65534 and the server's command line", rec, changed, err)
		}
		if got := ev.with(EventCommandLineChanged); len(got) != 1 || !strings.Contains(got[0], "as uid 65534 (was 0)") {
			t.Errorf("CommandLineChanged %v, want the uid change named", got)
		}
		b, _ := fresh(t, a)
		if err := b.Stop(ctx, rec, StopOptions{}); err != nil {
			t.Fatalf("Stop: %v", err)
		}
		assertGone(t, r.Handle)
		assertNothingLeft(t, rec)
	})
}

// openGate opens the FIFO at path for writing and closes it, ending the
// read a spawned shell waits in; up to 30 s.
func openGate(t *testing.T, path string) {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err == nil {
			err = f.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		// Unblock the opener before failing, so that it does not outlive the test.
		if f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0); err == nil {
			defer f.Close()
		}
		t.Fatalf("nothing opened %s for reading in 30 s", path)
	}
}

// nobodyBinary copies the stand-alone test server where uid 65534 can run
// it.
func nobodyBinary(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "procfleet-nobody-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile(testserver.Build(t))
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "testserver")
	if err := os.WriteFile(bin, src, 0o755); err != nil {
		t.Fatal(err)
	}
	return bin
}
