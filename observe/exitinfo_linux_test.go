package observe

import (
	"errors"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestDecodeWaitStatus(t *testing.T) {
	tests := []struct {
		raw  int32
		want ExitStatus
	}{
		{0x0000, ExitStatus{Code: 0}},
		{0x0700, ExitStatus{Code: 7}},
		{0xff00, ExitStatus{Code: 255}},
		{0x0009, ExitStatus{Code: -1, Signal: "SIGKILL", SignalNumber: 9}},
		{0x000f, ExitStatus{Code: -1, Signal: "SIGTERM", SignalNumber: 15}},
		{0x008b, ExitStatus{Code: -1, Signal: "SIGSEGV", SignalNumber: 11, CoreDumped: true}},
	}
	for _, tt := range tests {
		if got := decodeWaitStatus(tt.raw); got != tt.want {
			t.Errorf("decodeWaitStatus(%#x) = %+v, want %+v", tt.raw, got, tt.want)
		}
	}
}

// skipWithoutExitInfo skips when the kernel cannot tell an exit status
// through a pidfd, as its ioctl says: ENOTTY or EINVAL (no PIDFD_GET_INFO,
// before 6.13), ESRCH for a reaped process (6.13 and 6.14 have
// PIDFD_GET_INFO but not PIDFD_INFO_EXIT).
func skipWithoutExitInfo(t *testing.T, err error) {
	t.Helper()
	if errors.Is(err, unix.ENOTTY) || errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ESRCH) {
		t.Skipf("this kernel has no PIDFD_INFO_EXIT (Linux < 6.15): %v", err)
	}
}

// TestExitStatusOfChild: the test process is the parent, so it decides when
// the child is reaped. While the child is a zombie the pidfd tells nothing;
// once cmd.Wait has reaped it, the status is there.
func TestExitStatusOfChild(t *testing.T) {
	tests := []struct {
		name string
		args []string
		kill bool
		want ExitStatus
	}{
		{name: "exit code 7", args: []string{"-exit-after", "1ms", "-exit-code", "7"}, want: ExitStatus{Code: 7}},
		{name: "SIGKILL", kill: true, want: ExitStatus{Code: -1, Signal: "SIGKILL", SignalNumber: 9}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := startTestServer(t, tt.args...)
			// Pinning a zombie works: the test has not reaped it.
			h, err := Pin(cmd.Process.Pid)
			if err != nil {
				t.Fatal(err)
			}
			defer h.Close()
			if st, ok := h.ExitStatus(); ok {
				t.Errorf("ExitStatus of a process not reaped = %v, want none", st)
			}
			if tt.kill {
				if err := h.Signal(syscall.SIGKILL); err != nil {
					t.Fatal(err)
				}
			}
			if err := h.Wait(testCtx(t, 30*time.Second)); err != nil {
				t.Fatalf("wait for the exit: %v", err)
			}
			// A zombie: exited, not reaped.
			st, ok, err := h.exitInfo()
			skipWithoutExitInfo(t, err)
			if err != nil || ok {
				t.Fatalf("exitInfo of a zombie = %v, %v, %v; want none, no error", st, ok, err)
			}
			werr := cmd.Wait()
			st, ok, err = h.exitInfo()
			skipWithoutExitInfo(t, err)
			if err != nil || !ok {
				t.Fatalf("exitInfo after the reap = %v, %v, %v; want %v (cmd.Wait: %v)", st, ok, err, tt.want, werr)
			}
			if st != tt.want {
				t.Errorf("ExitStatus after the reap = %+v, want %+v (cmd.Wait: %v)", st, tt.want, werr)
			}
			if got, ok := h.ExitStatus(); !ok || got != st {
				t.Errorf("ExitStatus() = %+v, %v; want %+v, true", got, ok, st)
			}
			if cmd.ProcessState.ExitCode() != tt.want.Code {
				t.Errorf("the parent saw code %d, the pidfd %d", cmd.ProcessState.ExitCode(), st.Code)
			}
		})
	}
}

// TestExitStatusOfNonChild is procfleet's case: the process was started by
// someone else (a shell here), which reaps it. The shell's own exit, after
// its `wait` returned, is the event that says the reap is done.
func TestExitStatusOfNonChild(t *testing.T) {
	pid, cmd := startNonChildShell(t)
	// startNonChildShell kills the sleep in Cleanup; this handle is the
	// test's own, kept open until the reap as ExitStatus needs.
	h := mustPin(t, pid)
	if err := h.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// The shell's wait reaps the sleep, then the shell exits and is reaped.
	if err := cmd.Wait(); err != nil {
		t.Logf("shell: %v", err)
	}
	st, ok, err := h.exitInfo()
	skipWithoutExitInfo(t, err)
	want := ExitStatus{Code: -1, Signal: "SIGKILL", SignalNumber: 9}
	if err != nil || !ok || st != want {
		t.Fatalf("exitInfo of a non-child reaped by its parent = %+v, %v, %v; want %+v", st, ok, err, want)
	}
}

// TestExitStatusUnavailable: an unpinned handle, or a closed one, cannot
// tell, even once the process is reaped.
func TestExitStatusUnavailable(t *testing.T) {
	cmd := startTestServer(t, "-exit-after", "1ms", "-exit-code", "7")
	unpinned, err := pinNone(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	closed, err := Pin(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	if err := closed.Close(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if st, ok := unpinned.ExitStatus(); ok {
		t.Errorf("PinNone ExitStatus = %v, want none", st)
	}
	if _, _, err := unpinned.exitInfo(); !errors.Is(err, ErrNotSupported) {
		t.Errorf("PinNone exitInfo error = %v, want ErrNotSupported", err)
	}
	if st, ok := closed.ExitStatus(); ok {
		t.Errorf("closed handle ExitStatus = %v, want none", st)
	}
}
