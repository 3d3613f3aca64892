package observe

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// epollBackend watches pidfds with one epoll instance; an eventfd (id 0)
// wakes it. The epoll descriptor is itself on the runtime's poller (an
// epoll instance is readable while it has events ready), so the watcher's
// goroutine parks there between exits and holds no OS thread, and an exit
// wakes it as promptly as a goroutine parked on the pidfd itself.
type epollBackend struct {
	f      *os.File // the epoll instance
	rc     syscall.RawConn
	ev     int
	events []unix.EpollEvent
}

func newExitBackend() (exitBackend, PinMode, error) {
	ep, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, PinNone, fmt.Errorf("epoll_create1: %w", err)
	}
	ev, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		unix.Close(ep)
		return nil, PinNone, fmt.Errorf("eventfd: %w", err)
	}
	if err := unix.EpollCtl(ep, unix.EPOLL_CTL_ADD, ev, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: 0}); err != nil {
		unix.Close(ep)
		unix.Close(ev)
		return nil, PinNone, fmt.Errorf("epoll_ctl eventfd: %w", err)
	}
	if err := unix.SetNonblock(ep, true); err != nil {
		unix.Close(ep)
		unix.Close(ev)
		return nil, PinNone, fmt.Errorf("epoll nonblocking: %w", err)
	}
	f := os.NewFile(uintptr(ep), "epoll")
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		unix.Close(ev)
		return nil, PinNone, fmt.Errorf("epoll: %w", err)
	}
	mode := PinPidfd
	if !pidfdWorks() {
		mode = PinNone
	}
	return &epollBackend{f: f, rc: rc, ev: ev, events: make([]unix.EpollEvent, 128)}, mode, nil
}

// pidfdWorks reports whether pidfd_open works in this process.
func pidfdWorks() bool {
	if pidfdBroken.Load() {
		return false
	}
	fd, err := unix.PidfdOpen(unix.Getpid(), 0)
	if err != nil {
		if errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EPERM) {
			pidfdBroken.Store(true)
		}
		return false
	}
	unix.Close(fd)
	return true
}

func (b *epollBackend) add(id int32, h *Handle) error {
	var err error
	cerr := h.control(func(fd int) {
		err = b.ctl(unix.EPOLL_CTL_ADD, fd, &unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLONESHOT, Fd: id})
	})
	if cerr != nil {
		return fmt.Errorf("watch pid %d: %w", h.PID(), cerr)
	}
	if err != nil {
		return fmt.Errorf("watch pid %d: epoll_ctl: %w", h.PID(), err)
	}
	return nil
}

func (b *epollBackend) remove(_ int32, h *Handle) {
	_ = h.control(func(fd int) { _ = b.ctl(unix.EPOLL_CTL_DEL, fd, nil) })
}

// ctl is epoll_ctl on the instance; it fails once the backend is closed.
func (b *epollBackend) ctl(op, fd int, ev *unix.EpollEvent) error {
	var err error
	if cerr := b.rc.Control(func(ep uintptr) { err = unix.EpollCtl(int(ep), op, fd, ev) }); cerr != nil {
		return cerr
	}
	return err
}

func (b *epollBackend) wait(timeout time.Duration, buf []int32) ([]int32, error) {
	var deadline time.Time // zero: none
	if timeout >= 0 {
		deadline = time.Now().Add(timeout)
	}
	if err := b.f.SetReadDeadline(deadline); err != nil {
		return buf, fmt.Errorf("epoll deadline: %w", err)
	}
	var n int
	var werr error
	err := b.rc.Read(func(ep uintptr) bool {
		n, werr = unix.EpollWait(int(ep), b.events, 0)
		if werr == unix.EINTR {
			n, werr = 0, nil
		}
		return werr != nil || n > 0
	})
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		return buf, nil
	case err != nil:
		return buf, fmt.Errorf("epoll wait: %w", err)
	case werr != nil:
		return buf, fmt.Errorf("epoll_wait: %w", werr)
	}
	for _, e := range b.events[:n] {
		if e.Fd == 0 {
			var drain [8]byte
			_, _ = unix.Read(b.ev, drain[:])
			continue
		}
		buf = append(buf, e.Fd)
	}
	return buf, nil
}

func (b *epollBackend) wake() error {
	var one [8]byte
	binary.NativeEndian.PutUint64(one[:], 1)
	_, err := unix.Write(b.ev, one[:])
	if err == unix.EAGAIN { // counter full: a wake is pending anyway
		return nil
	}
	return err
}

func (b *epollBackend) close() error {
	return errors.Join(b.f.Close(), unix.Close(b.ev))
}
