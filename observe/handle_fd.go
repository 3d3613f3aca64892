//go:build linux || darwin

package observe

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// handleSys holds the pin: a pidfd (Linux) or a kqueue (macOS) wrapped in an
// *os.File, so that every use holds a reference (Control) and Close cannot
// pull the descriptor from under a syscall, and so that waits park on the
// runtime's poller.
type handleSys struct {
	f  *os.File
	rc syscall.RawConn
	// inode is the pidfs inode of a Linux pidfd (haveInode: on pidfs).
	inode     uint64
	haveInode bool
}

func (s *handleSys) set(fd int, name string) error {
	s.f = os.NewFile(uintptr(fd), name)
	rc, err := s.f.SyscallConn()
	if err != nil {
		s.f.Close()
		return err
	}
	s.rc = rc
	return nil
}

// control runs fn with the descriptor; it fails once the handle is closed.
func (h *Handle) control(fn func(fd int)) error {
	return h.sys.rc.Control(func(fd uintptr) { fn(int(fd)) })
}

func (h *Handle) sysClose() error { return h.sys.f.Close() }

// waitFD parks until ready(fd) is true. When the descriptor cannot be
// registered with the runtime poller it falls back to block(fd, 1s) in a
// loop, which holds a thread but notices Close within a second.
func (h *Handle) waitFD(ready func(fd int) bool, block func(fd int, d time.Duration) bool) error {
	err := h.sys.rc.Read(func(fd uintptr) bool { return ready(int(fd)) })
	if err == nil || errors.Is(err, os.ErrClosed) || h.isClosed() {
		return err
	}
	for {
		if h.isClosed() {
			return os.ErrClosed
		}
		var got bool
		if cerr := h.control(func(fd int) { got = block(fd, time.Second) }); cerr != nil {
			return cerr
		}
		if got {
			return nil
		}
	}
}

// signalZero is CheckLiveness's first step on both platforms: kill(pid, 0)
// says gone (ESRCH) or exists (0, EPERM); any other answer is unknown. decided
// is false when the process exists and its state must be read next.
func signalZero(pid int) (l Liveness, decided bool) {
	if pid <= 0 {
		return LivenessGone, true
	}
	err := unix.Kill(pid, 0)
	switch {
	case errors.Is(err, unix.ESRCH):
		return LivenessGone, true
	case err != nil && !errors.Is(err, unix.EPERM):
		return LivenessUnknown, true
	}
	return LivenessAlive, false
}

// pinNone makes an unpinned handle: the pid and the start time read now.
func pinNone(pid int) (*Handle, error) {
	if err := unix.Kill(pid, 0); errors.Is(err, unix.ESRCH) {
		return nil, fmt.Errorf("pin pid %d: %w", pid, ErrGone)
	}
	if CheckLiveness(pid) == LivenessGone {
		return nil, fmt.Errorf("pin pid %d: exited: %w", pid, ErrGone)
	}
	h := newHandle(pid, PinNone)
	if st, err := startTimeOf(pid); err == nil {
		h.start = st
	}
	return h, nil
}

// Env returns the value of key in the environment the pinned process was
// started with (its last execve's; a later setenv does not show), read
// through the pin: a read after the pinned process exited is ErrUntrusted.
// found is false when the variable is absent. An error that does not wrap
// ErrUntrusted means the environment cannot be read: another user's or a
// non-dumpable process (EACCES), or no way on this system.
func (h *Handle) Env(key string) (value string, found bool, err error) {
	if h.isClosed() {
		return "", false, fmt.Errorf("environment of pid %d: handle closed", h.pid)
	}
	b, err := environOf(h.pid)
	if err != nil {
		if errors.Is(err, ErrGone) {
			return "", false, fmt.Errorf("environment of pid %d: %w: %w", h.pid, ErrUntrusted, err)
		}
		return "", false, err
	}
	if err := h.afterRead(); err != nil {
		return "", false, fmt.Errorf("environment of pid %d: %w", h.pid, err)
	}
	value, found = environValue(b, key)
	return value, found, nil
}
