package observe

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"golang.org/x/sys/unix"
)

// epollBackend watches pidfds with one epoll instance; an eventfd (id 0)
// wakes it.
type epollBackend struct {
	ep, ev int
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
	mode := PinPidfd
	if !pidfdWorks() {
		mode = PinNone
	}
	return &epollBackend{ep: ep, ev: ev, events: make([]unix.EpollEvent, 128)}, mode, nil
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
		err = unix.EpollCtl(b.ep, unix.EPOLL_CTL_ADD, fd, &unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLONESHOT, Fd: id})
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
	_ = h.control(func(fd int) { _ = unix.EpollCtl(b.ep, unix.EPOLL_CTL_DEL, fd, nil) })
}

func (b *epollBackend) wait(timeout time.Duration, buf []int32) ([]int32, error) {
	ms := -1
	if timeout >= 0 {
		// Round up so that a 0.4 ms wait does not spin.
		ms = int((timeout + time.Millisecond - 1) / time.Millisecond)
	}
	n, err := unix.EpollWait(b.ep, b.events, ms)
	if err == unix.EINTR {
		return buf, nil
	}
	if err != nil {
		return buf, fmt.Errorf("epoll_wait: %w", err)
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
	return errors.Join(unix.Close(b.ep), unix.Close(b.ev))
}
