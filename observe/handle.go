package observe

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// Handle pins one process: on Linux a pidfd, on macOS a kqueue NOTE_EXIT
// registration, elsewhere (PinNone) only the pid and the start time read
// when it was pinned. A Handle is safe for concurrent use. Close it when done.
type Handle struct {
	pid  int
	mode PinMode
	// start is the start time read at Pin time for PinNone and PinKqueue
	// handles (0: could not be read).
	start uint64

	exitedSeen atomic.Bool

	mu       sync.Mutex
	closed   bool
	watchers map[*ExitWatcher]struct{}

	waiting atomic.Bool   // a waiter runs: the first Wait's call or goroutine
	exitCh  chan struct{} // closed by the waiter
	waitErr error         // set before exitCh is closed

	sys handleSys
}

func newHandle(pid int, mode PinMode) *Handle {
	return &Handle{pid: pid, mode: mode, exitCh: make(chan struct{})}
}

// PID returns the pinned pid.
func (h *Handle) PID() int { return h.pid }

// Mode tells how the process is pinned.
func (h *Handle) Mode() PinMode { return h.mode }

// Exited reports, without blocking, whether the pinned process has exited.
// For PinNone handles it is a best effort: the pid is gone, a zombie, or
// holds a process with another start time.
func (h *Handle) Exited() bool {
	if h.exitedSeen.Load() {
		return true
	}
	var exited bool
	if h.mode == PinNone {
		exited = unpinnedExited(h.pid, h.start)
	} else {
		exited = h.sysExited()
	}
	if exited {
		h.exitedSeen.Store(true)
	}
	return exited
}

func (h *Handle) isClosed() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.closed
}

// Close releases the pin and removes the handle from every ExitWatcher it is
// registered with. It is idempotent. A Wait in progress returns an error
// wrapping os.ErrClosed.
func (h *Handle) Close() error {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil
	}
	h.closed = true
	ws := make([]*ExitWatcher, 0, len(h.watchers))
	for w := range h.watchers {
		ws = append(ws, w)
	}
	h.mu.Unlock()
	for _, w := range ws {
		w.Unwatch(h)
	}
	if h.mode == PinNone {
		return nil
	}
	if err := h.sysClose(); err != nil {
		return fmt.Errorf("close handle of pid %d: %w", h.pid, err)
	}
	return nil
}

// Wait blocks until the pinned process exits (nil) or ctx is done
// (ctx.Err()). Pidfd and kqueue handles park one waiter on the runtime's
// poller (no OS thread, no polling), shared by every Wait: the first
// Wait's own goroutine when its ctx can never be done, else a goroutine of
// its own. PinNone handles poll with backoff from 10 ms to 500 ms. It
// returns an error wrapping os.ErrClosed when the handle is closed.
func (h *Handle) Wait(ctx context.Context) error {
	if h.Exited() {
		return nil
	}
	if h.mode == PinNone {
		return h.pollWait(ctx)
	}
	if h.waiting.CompareAndSwap(false, true) {
		if ctx.Done() == nil {
			// Nothing can end this call but the exit or Close: it is the
			// waiter (an actuator's reaper per child saves a goroutine).
			h.waitExit()
			return h.waitErr
		}
		// This goroutine ends when the process exits or the handle is
		// closed.
		go h.waitExit()
	}
	select {
	case <-h.exitCh:
		return h.waitErr
	case <-ctx.Done():
		return ctx.Err()
	}
}

// waitExit waits for the exit or the handle's close, then sets waitErr and
// closes exitCh.
func (h *Handle) waitExit() {
	err := h.sysWaitExit()
	if err == nil {
		h.exitedSeen.Store(true)
	} else if h.isClosed() {
		err = fmt.Errorf("wait for pid %d: %w", h.pid, os.ErrClosed)
	} else {
		err = fmt.Errorf("wait for pid %d: %w", h.pid, err)
	}
	h.waitErr = err
	close(h.exitCh)
}

// Backoff bounds for unpinned polling.
const (
	pollMin = 10 * time.Millisecond
	pollMax = 500 * time.Millisecond
)

func (h *Handle) pollWait(ctx context.Context) error {
	d := pollMin
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		if h.isClosed() {
			return fmt.Errorf("wait for pid %d: %w", h.pid, os.ErrClosed)
		}
		if h.Exited() {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
		d = min(2*d, pollMax)
		t.Reset(d)
	}
}

// afterRead checks, after a read about the pinned process, that the read
// was of the pinned process: it fails with ErrUntrusted when the process
// has exited by now, or (handles that keep a start time) when its pid
// shows another start time.
func (h *Handle) afterRead() error {
	if h.mode != PinPidfd && h.start != 0 {
		if st, err := startTimeOf(h.pid); err == nil && st != h.start {
			h.exitedSeen.Store(true)
			return ErrUntrusted
		}
	}
	if h.Exited() {
		return ErrUntrusted
	}
	return nil
}

// unpinnedExited is the best an unpinned handle can do: the pid is gone or
// an exited state, or it now holds a process with another start time.
func unpinnedExited(pid int, start uint64) bool {
	if CheckLiveness(pid) == LivenessGone {
		return true
	}
	if start == 0 {
		return false
	}
	st, err := startTimeOf(pid)
	return err == nil && st != start
}

func (h *Handle) addWatcher(w *ExitWatcher) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return false
	}
	if h.watchers == nil {
		h.watchers = make(map[*ExitWatcher]struct{})
	}
	h.watchers[w] = struct{}{}
	return true
}

func (h *Handle) removeWatcher(w *ExitWatcher) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.watchers, w)
}

// ExitedAll sets exited[i] to hs[i].Exited() for every handle of hs (exited
// is at least as long as hs). On Linux one poll(2) asks about up to
// exitPollBatch pidfds at once, each held open for the call as Exited holds
// its own (a closed handle reports false, as Exited does); elsewhere it asks
// each handle in turn.
func ExitedAll(hs []*Handle, exited []bool) {
	exited = exited[:len(hs)]
	for i, h := range hs {
		exited[i] = h.exitedSeen.Load()
	}
	sysExitedAll(hs, exited)
	for i, h := range hs {
		if exited[i] {
			h.exitedSeen.Store(true)
		}
	}
}
