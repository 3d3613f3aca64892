package observe

import (
	"fmt"
	"syscall"

	"golang.org/x/sys/unix"
)

// ExitStatus returns how the pinned process ended, asking its pidfd
// (ioctl PIDFD_GET_INFO with PIDFD_INFO_EXIT, Linux >= 6.15). It works for
// a process that is not our child, but only once its parent has reaped it:
// while it is a zombie the kernel has no exit information yet. The handle
// must stay open until then; the answer does not depend on the pid, so a
// reused pid cannot be read instead.
//
// It returns false when there is nothing to tell (yet): the process runs,
// is a zombie not reaped yet, the kernel is older than 6.15, the handle is
// closed or unpinned (PinNone).
func (h *Handle) ExitStatus() (ExitStatus, bool) {
	st, ok, _ := h.exitInfo()
	return st, ok
}

// exitInfo is ExitStatus with the reason when the kernel refused: an error
// wrapping ENOTTY or EINVAL (no PIDFD_GET_INFO, before 6.13), ESRCH (a
// reaped process on 6.13 and 6.14, which have PIDFD_GET_INFO but not
// PIDFD_INFO_EXIT), or ErrNotSupported for a PinNone handle. No error and
// false: not reaped yet.
func (h *Handle) exitInfo() (ExitStatus, bool, error) {
	if h.mode != PinPidfd {
		return ExitStatus{}, false, fmt.Errorf("exit status of pid %d: %w: unpinned", h.pid, ErrNotSupported)
	}
	info := unix.PidfdInfo{Mask: unix.PIDFD_INFO_EXIT}
	var err error
	if cerr := h.control(func(fd int) { err = unix.IoctlPidfdInfo(fd, &info) }); cerr != nil {
		return ExitStatus{}, false, fmt.Errorf("exit status of pid %d: %w", h.pid, cerr)
	}
	if err != nil {
		return ExitStatus{}, false, fmt.Errorf("exit status of pid %d: PIDFD_GET_INFO: %w", h.pid, err)
	}
	if info.Mask&unix.PIDFD_INFO_EXIT == 0 {
		return ExitStatus{}, false, nil
	}
	return decodeWaitStatus(info.Exit_code), true, nil
}

// decodeWaitStatus reads a wait(2) status word: the exit code in bits 8-15
// when the low 7 bits are 0, else the signal in those bits (0x80: core
// dumped).
func decodeWaitStatus(raw int32) ExitStatus {
	ws := syscall.WaitStatus(uint32(raw))
	if ws.Signaled() {
		sig := ws.Signal()
		name := unix.SignalName(sig)
		if name == "" {
			name = fmt.Sprintf("signal %d", int(sig))
		}
		return ExitStatus{Code: -1, Signal: name, SignalNumber: int(sig), CoreDumped: ws.CoreDump()}
	}
	return ExitStatus{Code: ws.ExitStatus()}
}
