package observe

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
)

// exitBackend is the kernel side of an ExitWatcher: epoll over pidfds on
// Linux, one kqueue on macOS.
type exitBackend interface {
	// add registers h under id. An error wrapping ErrGone means the process
	// had already exited.
	add(id int32, h *Handle) error
	// remove deregisters h; errors are ignored (it may have fired or closed).
	remove(id int32, h *Handle)
	// wait blocks until some registrations fire, wake is called, or timeout
	// passes (timeout < 0: no timeout). It returns the ids that fired.
	wait(timeout time.Duration, buf []int32) ([]int32, error)
	wake() error
	close() error
}

// ExitWatcher calls a function once when each watched process exits. One
// goroutine serves every watched process: it waits on an epoll instance
// over their pidfds (Linux; parked on the runtime poller, no OS thread
// held) or in kevent (macOS) and, for PinNone handles, also polls them
// with backoff from 10 ms to 500 ms between its waits.
type ExitWatcher struct {
	log  logr.Logger
	mode PinMode
	be   exitBackend // nil on PinNone-only watchers without a wake source

	mu     sync.Mutex
	closed bool
	nextID int32
	byID   map[int32]*watchEntry
	byH    map[*Handle]*watchEntry
	polled map[*watchEntry]struct{}
	done   chan struct{}
	pokeCh chan struct{} // wakes the loop when be is nil
}

type watchEntry struct {
	id     int32
	h      *Handle
	fn     func()
	polled bool
	next   time.Time
	every  time.Duration
}

// NewExitWatcher starts the watcher's goroutine. Close ends it.
func NewExitWatcher(log logr.Logger) (*ExitWatcher, error) {
	be, mode, err := newExitBackend()
	if err != nil {
		return nil, fmt.Errorf("start exit watcher: %w", err)
	}
	w := &ExitWatcher{
		log:    log.WithName("exitwatcher"),
		mode:   mode,
		be:     be,
		byID:   make(map[int32]*watchEntry),
		byH:    make(map[*Handle]*watchEntry),
		polled: make(map[*watchEntry]struct{}),
		done:   make(chan struct{}),
		pokeCh: make(chan struct{}, 1),
	}
	go w.run()
	return w, nil
}

// Mode is how this watcher learns of exits: PinPidfd (epoll over pidfds),
// PinKqueue, or PinNone (polling).
func (w *ExitWatcher) Mode() PinMode { return w.mode }

// Watch arranges for fn to run once, on a new goroutine, when the process of
// h exits; if it has already exited, fn runs soon. Watching the same handle
// again replaces fn. If h cannot be watched (it is closed), fn runs at once,
// so that a level-triggered caller looks again. After Close, Watch does
// nothing.
func (w *ExitWatcher) Watch(h *Handle, fn func()) {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return
	}
	if e := w.byH[h]; e != nil {
		e.fn = fn
		w.mu.Unlock()
		return
	}
	if !h.addWatcher(w) {
		w.mu.Unlock()
		w.log.V(1).Info("watching a closed handle; reporting it as exited", "pid", h.PID())
		go fn()
		return
	}
	w.nextID++
	if w.nextID <= 0 {
		w.nextID = 1
	}
	e := &watchEntry{id: w.nextID, h: h, fn: fn}
	w.byID[e.id] = e
	w.byH[h] = e
	fire := false
	if h.Mode() == PinNone || w.be == nil {
		e.polled = true
		e.every = pollMin
		e.next = time.Now()
		w.polled[e] = struct{}{}
	} else if err := w.be.add(e.id, h); err != nil {
		if !errors.Is(err, ErrGone) {
			w.log.Error(err, "cannot watch process; reporting it as exited", "pid", h.PID())
		}
		fire = true
	} else if h.Exited() {
		// Registered after the pinned process exited: the registration may
		// be on a reused pid (macOS) or already fired; report it now.
		w.be.remove(e.id, h)
		fire = true
	}
	if fire {
		w.forget(e)
	}
	w.mu.Unlock()
	if fire {
		go fn()
		return
	}
	if e.polled {
		w.poke()
	}
}

// Unwatch stops watching h; its function will not run unless it is already
// running.
func (w *ExitWatcher) Unwatch(h *Handle) {
	w.mu.Lock()
	e := w.byH[h]
	if e != nil {
		if !e.polled && w.be != nil {
			w.be.remove(e.id, h)
		}
		w.forget(e)
	}
	w.mu.Unlock()
}

// forget drops e from the maps; w.mu is held.
func (w *ExitWatcher) forget(e *watchEntry) {
	delete(w.byID, e.id)
	delete(w.byH, e.h)
	delete(w.polled, e)
	e.h.removeWatcher(w)
}

func (w *ExitWatcher) poke() {
	if w.be != nil {
		if err := w.be.wake(); err != nil {
			w.log.Error(err, "cannot wake exit watcher")
		}
		return
	}
	select {
	case w.pokeCh <- struct{}{}:
	default:
	}
}

// Close stops watching every process (no function runs afterwards), ends
// the watcher's goroutine and waits for it. It is idempotent.
func (w *ExitWatcher) Close() error {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		<-w.done
		return nil
	}
	w.closed = true
	for _, e := range w.byID {
		if !e.polled && w.be != nil {
			w.be.remove(e.id, e.h)
		}
		w.forget(e)
	}
	w.mu.Unlock()
	w.poke()
	<-w.done
	if w.be != nil {
		if err := w.be.close(); err != nil {
			return fmt.Errorf("close exit watcher: %w", err)
		}
	}
	return nil
}

// Len returns how many processes are being watched.
func (w *ExitWatcher) Len() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.byID)
}

func (w *ExitWatcher) run() {
	defer close(w.done)
	buf := make([]int32, 0, 128)
	for {
		timeout := w.nextPoll()
		var ids []int32
		if w.be != nil {
			var err error
			ids, err = w.be.wait(timeout, buf[:0])
			if err != nil {
				w.log.Error(err, "exit watcher wait failed")
				// Do not spin on a persistent error.
				timeout = 100 * time.Millisecond
				w.sleep(timeout)
			}
		} else {
			w.sleep(timeout)
		}
		var fire []func()
		w.mu.Lock()
		if w.closed {
			w.mu.Unlock()
			return
		}
		for _, id := range ids {
			e := w.byID[id]
			if e == nil {
				continue
			}
			w.be.remove(e.id, e.h)
			w.forget(e)
			fire = append(fire, e.fn)
		}
		now := time.Now()
		for e := range w.polled {
			if now.Before(e.next) {
				continue
			}
			if e.h.Exited() {
				w.forget(e)
				fire = append(fire, e.fn)
				continue
			}
			e.every = min(2*e.every, pollMax)
			e.next = now.Add(e.every)
		}
		w.mu.Unlock()
		for _, fn := range fire {
			go fn()
		}
	}
}

// nextPoll returns how long the loop may block: until the next PinNone
// check, or forever (-1).
func (w *ExitWatcher) nextPoll() time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.polled) == 0 {
		return -1
	}
	var first time.Time
	for e := range w.polled {
		if first.IsZero() || e.next.Before(first) {
			first = e.next
		}
	}
	return max(time.Until(first), 0)
}

// sleep waits for timeout or a poke (used when there is no kernel backend).
func (w *ExitWatcher) sleep(timeout time.Duration) {
	if timeout < 0 {
		<-w.pokeCh
		return
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-t.C:
	case <-w.pokeCh:
	}
}
