package observe

// macOS code is compile-checked only (GOOS=darwin go build / go vet).

import (
	"errors"
	"fmt"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Pin registers EVFILT_PROC/NOTE_EXIT for pid on a kqueue of its own before
// anything else, so that an identity read through the handle can be checked
// against an exit that happened meanwhile (the knote is attached to the
// process, not to the pid). Registering on a zombie fails with ESRCH, which
// is reported as ErrGone. Signals still go through kill(2) right after a
// check: macOS has no pidfd, so a tiny window remains.
func Pin(pid int) (*Handle, error) {
	if pid <= 0 {
		return nil, fmt.Errorf("pin pid %d: %w", pid, ErrGone)
	}
	kq, err := unix.Kqueue()
	if err != nil {
		return nil, fmt.Errorf("pin pid %d: kqueue: %w", pid, err)
	}
	unix.CloseOnExec(kq)
	// ev[1] is a user event that Exited fires after it consumed the exit
	// event (EV_CLEAR), so that a parked Wait still wakes.
	var ev [2]unix.Kevent_t
	unix.SetKevent(&ev[0], pid, unix.EVFILT_PROC, unix.EV_ADD|unix.EV_CLEAR)
	ev[0].Fflags = unix.NOTE_EXIT
	unix.SetKevent(&ev[1], kqWakeIdent, unix.EVFILT_USER, unix.EV_ADD|unix.EV_CLEAR)
	if _, err := unix.Kevent(kq, ev[:], nil, nil); err != nil {
		unix.Close(kq)
		if errors.Is(err, unix.ESRCH) {
			return nil, fmt.Errorf("pin pid %d: %w", pid, ErrGone)
		}
		return nil, fmt.Errorf("pin pid %d: kevent: %w", pid, err)
	}
	if err := unix.SetNonblock(kq, true); err != nil {
		unix.Close(kq)
		return nil, fmt.Errorf("pin pid %d: %w", pid, err)
	}
	h := newHandle(pid, PinKqueue)
	if err := h.sys.set(kq, "kqueue"); err != nil {
		return nil, fmt.Errorf("pin pid %d: %w", pid, err)
	}
	if st, err := startTimeOf(pid); err == nil {
		h.start = st
	}
	return h, nil
}

// PidfdInode is always false on macOS (no pidfd).
func (h *Handle) PidfdInode() (uint64, bool) { return h.sys.inode, h.sys.haveInode }

// IdentityBrief is Identity (see the Linux IdentityBrief): here the start
// time and the uid come with the same read.
func (h *Handle) IdentityBrief() (Identity, error) { return h.Identity() }

// Identity reads the identity of the pinned process, then checks the
// handle's kqueue: an exit seen meanwhile makes the read ErrUntrusted.
func (h *Handle) Identity() (Identity, error) {
	if h.isClosed() {
		return Identity{}, fmt.Errorf("identity of pid %d: handle closed", h.pid)
	}
	id, err := ReadIdentity(h.pid)
	if err != nil {
		if errors.Is(err, ErrGone) {
			return id, fmt.Errorf("identity of pid %d: %w: %w", h.pid, ErrUntrusted, err)
		}
		return id, err
	}
	if h.Exited() || (h.start != 0 && id.StartTime != h.start) {
		return id, fmt.Errorf("identity of pid %d: %w", h.pid, ErrUntrusted)
	}
	return id, nil
}

// kqFired polls kq for an event for up to d (0: do not block). The only
// events are the exit and the user event fired after an exit was seen.
func kqFired(kq int, d time.Duration) bool {
	ts := unix.NsecToTimespec(int64(d))
	var ev [1]unix.Kevent_t
	for {
		n, err := unix.Kevent(kq, nil, ev[:], &ts)
		if err == unix.EINTR {
			continue
		}
		return err == nil && n > 0
	}
}

// kqWakeIdent is the ident of a handle's EVFILT_USER event.
const kqWakeIdent = 1

func (h *Handle) sysExited() bool {
	exited := false
	_ = h.control(func(fd int) {
		if exited = kqFired(fd, 0); exited {
			// Hand the news to a Wait parked on the same kqueue.
			var ev [1]unix.Kevent_t
			unix.SetKevent(&ev[0], kqWakeIdent, unix.EVFILT_USER, 0)
			ev[0].Fflags = unix.NOTE_TRIGGER
			_, _ = unix.Kevent(fd, ev[:], nil, nil)
		}
	})
	return exited
}

func (h *Handle) sysWaitExit() error {
	err := h.waitFD(func(fd int) bool { return h.exitedSeen.Load() || kqFired(fd, 0) }, kqFired)
	return err
}

// Signal sends sig with kill(2) right after checking the handle's kqueue.
// The error wraps ErrGone when the process has exited.
func (h *Handle) Signal(sig syscall.Signal) error {
	if h.isClosed() {
		return fmt.Errorf("signal %v to pid %d: handle closed", sig, h.pid)
	}
	if h.Exited() {
		return fmt.Errorf("signal %v to pid %d: %w", sig, h.pid, ErrGone)
	}
	if err := unix.Kill(h.pid, sig); err != nil {
		if errors.Is(err, unix.ESRCH) {
			h.exitedSeen.Store(true)
			return fmt.Errorf("signal %v to pid %d: %w", sig, h.pid, ErrGone)
		}
		return fmt.Errorf("signal %v to pid %d: %w", sig, h.pid, err)
	}
	return nil
}

// SignalGroup is not supported on macOS (no pidfd): the error wraps
// ErrNotSupported; use killpg while the pinned leader is alive.
func (h *Handle) SignalGroup(sig syscall.Signal) error {
	return fmt.Errorf("signal %v to the group of pid %d: %w", sig, h.pid, ErrNotSupported)
}

// sysExitedAll is ExitedAll's look at the handles not known to have
// exited: one at a time.
func sysExitedAll(hs []*Handle, exited []bool) {
	for i, h := range hs {
		if !exited[i] {
			exited[i] = h.Exited()
		}
	}
}
