package observe

// macOS code is compile-checked only (GOOS=darwin go build / go vet).

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// kqueueBackend watches every process with one kqueue: EVFILT_PROC/NOTE_EXIT
// per pid, EVFILT_USER (ident 0) to wake.
type kqueueBackend struct {
	kq     int
	events []unix.Kevent_t
	mu     sync.Mutex
	ids    map[int][]int32 // pid -> watch ids
}

func newExitBackend() (exitBackend, PinMode, error) {
	kq, err := unix.Kqueue()
	if err != nil {
		return nil, PinNone, fmt.Errorf("kqueue: %w", err)
	}
	unix.CloseOnExec(kq)
	var ev [1]unix.Kevent_t
	unix.SetKevent(&ev[0], 0, unix.EVFILT_USER, unix.EV_ADD|unix.EV_CLEAR)
	if _, err := unix.Kevent(kq, ev[:], nil, nil); err != nil {
		unix.Close(kq)
		return nil, PinNone, fmt.Errorf("kevent EVFILT_USER: %w", err)
	}
	return &kqueueBackend{kq: kq, events: make([]unix.Kevent_t, 128), ids: make(map[int][]int32)}, PinKqueue, nil
}

func (b *kqueueBackend) add(id int32, h *Handle) error {
	var ev [1]unix.Kevent_t
	unix.SetKevent(&ev[0], h.PID(), unix.EVFILT_PROC, unix.EV_ADD|unix.EV_CLEAR)
	ev[0].Fflags = unix.NOTE_EXIT
	if _, err := unix.Kevent(b.kq, ev[:], nil, nil); err != nil {
		if errors.Is(err, unix.ESRCH) {
			return fmt.Errorf("watch pid %d: %w", h.PID(), ErrGone)
		}
		return fmt.Errorf("watch pid %d: kevent: %w", h.PID(), err)
	}
	b.mu.Lock()
	b.ids[h.PID()] = append(b.ids[h.PID()], id)
	b.mu.Unlock()
	return nil
}

func (b *kqueueBackend) remove(id int32, h *Handle) {
	b.mu.Lock()
	defer b.mu.Unlock()
	ids := b.ids[h.PID()]
	for i, v := range ids {
		if v == id {
			ids = append(ids[:i], ids[i+1:]...)
			break
		}
	}
	if len(ids) > 0 {
		b.ids[h.PID()] = ids
		return
	}
	delete(b.ids, h.PID())
	var ev [1]unix.Kevent_t
	unix.SetKevent(&ev[0], h.PID(), unix.EVFILT_PROC, unix.EV_DELETE)
	_, _ = unix.Kevent(b.kq, ev[:], nil, nil)
}

func (b *kqueueBackend) wait(timeout time.Duration, buf []int32) ([]int32, error) {
	var ts *unix.Timespec
	if timeout >= 0 {
		t := unix.NsecToTimespec(int64(timeout))
		ts = &t
	}
	n, err := unix.Kevent(b.kq, nil, b.events, ts)
	if err == unix.EINTR {
		return buf, nil
	}
	if err != nil {
		return buf, fmt.Errorf("kevent: %w", err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, e := range b.events[:n] {
		if e.Filter != unix.EVFILT_PROC {
			continue
		}
		pid := int(e.Ident)
		buf = append(buf, b.ids[pid]...)
		delete(b.ids, pid)
	}
	return buf, nil
}

func (b *kqueueBackend) wake() error {
	var ev [1]unix.Kevent_t
	unix.SetKevent(&ev[0], 0, unix.EVFILT_USER, 0)
	ev[0].Fflags = unix.NOTE_TRIGGER
	_, err := unix.Kevent(b.kq, ev[:], nil, nil)
	return err
}

func (b *kqueueBackend) close() error { return unix.Close(b.kq) }
