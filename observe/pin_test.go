//go:build linux || darwin

package observe

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"
)

func TestPinIdentityLive(t *testing.T) {
	cmd := startSleep(t)
	h, err := Pin(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if h.Mode() != nativePinMode() || h.PID() != cmd.Process.Pid {
		t.Fatalf("mode %v pid %d", h.Mode(), h.PID())
	}
	id, err := h.Identity()
	if err != nil {
		t.Fatal(err)
	}
	unpinned, err := ReadIdentity(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	if id.StartTime != unpinned.StartTime || id.PID != cmd.Process.Pid {
		t.Errorf("pinned identity %+v, unpinned %+v", id, unpinned)
	}
	if h.Exited() {
		t.Error("Exited() = true for a live process")
	}
	if err := h.Signal(0); err != nil {
		t.Errorf("Signal(0) = %v", err)
	}
}

// IdentityBrief agrees with Identity on everything but the command line,
// which it leaves unread; after the exit it is untrusted as Identity is.
func TestIdentityBrief(t *testing.T) {
	pid := startNonChild(t)
	h, err := Pin(pid)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	full, err := h.Identity()
	if err != nil {
		t.Fatal(err)
	}
	brief, err := h.IdentityBrief()
	if err != nil {
		t.Fatal(err)
	}
	if nativePinMode() == PinPidfd {
		full.Cmdline = nil // the one field IdentityBrief leaves unread
	}
	if fmt.Sprint(brief) != fmt.Sprint(full) || brief.UID != os.Getuid() {
		t.Errorf("IdentityBrief() = %+v, Identity() = %+v (uid %d)", brief, full, os.Getuid())
	}
	if err := h.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := h.Wait(testCtx(t, 10*time.Second)); err != nil {
		t.Fatalf("Wait: %v", err)
	}
	if id, err := h.IdentityBrief(); !errors.Is(err, ErrUntrusted) {
		t.Errorf("IdentityBrief() after exit = %+v, %v; want ErrUntrusted", id, err)
	}
}

func TestPidfdInode(t *testing.T) {
	skipUnlessLinux(t)
	a, b := startSleep(t), startSleep(t)
	ha1, err := Pin(a.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	defer ha1.Close()
	ha2, err := Pin(a.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	defer ha2.Close()
	hb, err := Pin(b.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	defer hb.Close()
	i1, ok1 := ha1.PidfdInode()
	i2, ok2 := ha2.PidfdInode()
	ib, okb := hb.PidfdInode()
	if !ok1 {
		t.Skip("no pidfs on this kernel (before 6.9)")
	}
	if !ok2 || !okb || i1 != i2 || i1 == ib || i1 == 0 {
		t.Errorf("inodes: same process %d/%d (%v/%v), other %d (%v); want equal, then different", i1, i2, ok1, ok2, ib, okb)
	}
}

func TestPinExitThenIdentityUntrusted(t *testing.T) {
	pid := startNonChild(t)
	h, err := Pin(pid)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if _, err := h.Identity(); err != nil {
		t.Fatalf("Identity() before exit: %v", err)
	}
	if err := h.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := h.Wait(testCtx(t, 10*time.Second)); err != nil {
		t.Fatalf("Wait: %v", err)
	}
	id, err := h.Identity()
	if !errors.Is(err, ErrUntrusted) {
		t.Fatalf("Identity() after exit = %+v, %v; want ErrUntrusted", id, err)
	}
	if err := h.Signal(syscall.SIGTERM); !errors.Is(err, ErrGone) {
		t.Errorf("Signal after exit = %v, want ErrGone", err)
	}
	if !h.Exited() {
		t.Error("Exited() = false after exit")
	}
}

// The pidfd wait wakes on the exit of a process that is not our child; the
// kill comes from another process.
func TestWaitWakesOnNonChildExit(t *testing.T) {
	pid := startNonChild(t)
	h, err := Pin(pid)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	ctx := testCtx(t, 10*time.Second)
	waited := make(chan error, 1)
	go func() { waited <- h.Wait(ctx) }()
	// A short Wait on a live process returns the context's error.
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if err := h.Wait(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait on a live process = %v, want DeadlineExceeded", err)
	}
	if out, err := exec.Command("kill", "-KILL", strconv.Itoa(pid)).CombinedOutput(); err != nil {
		t.Fatalf("kill: %v %s", err, out)
	}
	select {
	case err := <-waited:
		if err != nil {
			t.Fatalf("Wait = %v", err)
		}
	case <-ctx.Done():
		t.Fatal("Wait did not wake on exit")
	}
	if err := h.Wait(ctx); err != nil {
		t.Errorf("second Wait = %v", err)
	}
}

func TestHandleClose(t *testing.T) {
	cmd := startSleep(t)
	h, err := Pin(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t, 10*time.Second)
	waited := make(chan error, 1)
	go func() { waited <- h.Wait(ctx) }()
	for range 2 { // idempotent
		if err := h.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
	}
	select {
	case err := <-waited:
		if !errors.Is(err, os.ErrClosed) && !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Wait after Close = %v, want os.ErrClosed", err)
		}
	case <-ctx.Done():
		t.Fatal("Wait did not end on Close")
	}
	if err := h.Signal(syscall.SIGKILL); err == nil {
		t.Error("Signal on a closed handle succeeded")
	}
	if _, err := h.Identity(); err == nil {
		t.Error("Identity on a closed handle succeeded")
	}
	if syscall.Kill(cmd.Process.Pid, 0) != nil {
		t.Error("the process died")
	}
}

// A pid reused by another process: the old pidfd refuses to signal it and
// reports the identity read as untrusted. Reuse is forced through
// /proc/sys/kernel/ns_last_pid (root only; other processes on the machine
// may take the pid first, so the test retries and skips if it never lands).
func TestPidReuse(t *testing.T) {
	skipUnlessLinux(t)
	if os.Geteuid() != 0 {
		t.Skip("needs root to write ns_last_pid")
	}
	var old *exec.Cmd
	var h *Handle
	var oldID Identity
	for attempt := 0; attempt < 50; attempt++ {
		old = exec.Command("sleep", "1000")
		if err := old.Start(); err != nil {
			t.Fatal(err)
		}
		pid := old.Process.Pid
		var err error
		if h, err = Pin(pid); err != nil {
			t.Fatal(err)
		}
		if oldID, err = h.Identity(); err != nil {
			t.Fatal(err)
		}
		_ = old.Process.Kill()
		_ = old.Wait() // reaped: the pid is free
		if err := os.WriteFile("/proc/sys/kernel/ns_last_pid", []byte(strconv.Itoa(pid-1)), 0); err != nil {
			h.Close()
			t.Skipf("cannot write ns_last_pid: %v", err)
		}
		impostor := exec.Command("sleep", "1000")
		if err := impostor.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = impostor.Process.Kill(); _ = impostor.Wait() })
		if impostor.Process.Pid != pid {
			h.Close()
			continue
		}
		defer h.Close()
		// The pid is alive again, holding another process.
		if CheckLiveness(pid) != LivenessAlive {
			t.Fatal("impostor not alive")
		}
		if _, err := h.Identity(); !errors.Is(err, ErrUntrusted) {
			t.Errorf("Identity() through the old handle = %v, want ErrUntrusted", err)
		}
		if err := h.Signal(syscall.SIGKILL); !errors.Is(err, ErrGone) {
			t.Errorf("Signal through the old handle = %v, want ErrGone", err)
		}
		if syscall.Kill(pid, 0) != nil {
			t.Error("the impostor was killed through the old handle")
		}
		hn, err := Pin(pid)
		if err != nil {
			t.Fatal(err)
		}
		defer hn.Close()
		newID, err := hn.Identity()
		if err != nil {
			t.Fatal(err)
		}
		oi, _ := h.PidfdInode()
		ni, ok := hn.PidfdInode()
		// Start times may be equal when both started in the same clock
		// tick; the pidfs inode tells them apart.
		if newID.StartTime == oldID.StartTime && (!ok || oi == ni) {
			t.Errorf("old and new process indistinguishable: start %d, inodes %d/%d", newID.StartTime, oi, ni)
		}
		t.Logf("reuse landed on attempt %d: start times %d -> %d, inodes %d -> %d", attempt+1, oldID.StartTime, newID.StartTime, oi, ni)
		return
	}
	t.Skip("could not force pid reuse: other processes took the pid")
}

// PinNone is what Pin returns when pidfd_open fails with ENOSYS or EPERM. A
// seccomp filter would be needed to make the kernel do that on demand, so
// the test calls the fallback directly.
func TestPinNoneFallback(t *testing.T) {
	cmd := startSleep(t)
	h, err := pinNone(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if h.Mode() != PinNone || h.start == 0 {
		t.Fatalf("mode %v start %d", h.Mode(), h.start)
	}
	if _, ok := h.PidfdInode(); ok {
		t.Error("PidfdInode ok for an unpinned handle")
	}
	if _, err := h.Identity(); err != nil {
		t.Fatal(err)
	}
	if err := h.Signal(0); err != nil {
		t.Fatal(err)
	}
	// A recorded start time that differs from the process's, as after pid
	// reuse: the read is untrusted and the handle counts as exited.
	wrong, err := pinNone(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	wrong.start--
	if _, err := wrong.Identity(); !errors.Is(err, ErrUntrusted) {
		t.Errorf("Identity() with a wrong recorded start time = %v, want ErrUntrusted", err)
	}
	if !unpinnedExited(h.PID(), h.start+1) {
		t.Error("unpinnedExited with another start time = false")
	}

	ctx := testCtx(t, 10*time.Second)
	waited := make(chan error, 1)
	go func() { waited <- h.Wait(ctx) }()
	_ = cmd.Process.Kill() // a zombie until Cleanup reaps it: counts as exited
	if err := <-waited; err != nil {
		t.Fatalf("Wait = %v", err)
	}
	if err := h.Signal(syscall.SIGTERM); !errors.Is(err, ErrGone) {
		t.Errorf("Signal after exit = %v, want ErrGone", err)
	}
}

func TestSignalGroup(t *testing.T) {
	// sh leads its own group; its sleep child is in it.
	cmd := exec.Command("sh", "-c", "sleep 1000 & echo $!; wait")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	startCmd(t, cmd)
	var child int
	if _, err := fmt.Fscan(out, &child); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(child, syscall.SIGKILL) })
	leader := mustPin(t, cmd.Process.Pid)
	member := mustPin(t, child)
	err = leader.SignalGroup(syscall.SIGKILL)
	if errors.Is(err, ErrNotSupported) {
		t.Skipf("no PIDFD_SIGNAL_PROCESS_GROUP here: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t, 10*time.Second)
	if err := member.Wait(ctx); err != nil {
		t.Errorf("group member did not exit: %v", err)
	}
	if err := leader.Wait(ctx); err != nil {
		t.Errorf("leader did not exit: %v", err)
	}
	if err := leader.SignalGroup(syscall.SIGKILL); !errors.Is(err, ErrGone) {
		t.Errorf("SignalGroup after exit = %v, want ErrGone", err)
	}
}
