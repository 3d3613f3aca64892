package reconciler

import (
	"errors"
	"fmt"
	"path/filepath"
	"sync"

	"github.com/fsnotify/fsnotify"
)

// fsnotifyBackend watches folders through fsnotify: the portable watch,
// used where the platform has no watch of its own here. It cannot ask the
// kernel for name events only (fsnotify 1.10 exports no event mask), so
// every event in a watched folder reaches user space; it reports no closes
// and has no writer probe. A goroutine moves fsnotify's events into a
// bounded queue, so take returns the events delivered so far: one the
// kernel queued a moment ago may still be on its way (see confirmer's
// rule for stateAppeared).
type fsnotifyBackend struct {
	w      *fsnotify.Watcher
	signal chan struct{}
	done   chan struct{}

	mu      sync.Mutex
	queue   []fileEvent
	dropped bool            // events dropped from a full queue since the last take
	folders map[string]bool // watched, as added
}

func newFsnotifyBackend() (*fsnotifyBackend, error) {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, fmt.Errorf("watch fleet files: %w", err)
	}
	b := &fsnotifyBackend{w: w, signal: make(chan struct{}, 1), done: make(chan struct{}), folders: map[string]bool{}}
	go b.pump()
	return b, nil
}

func (b *fsnotifyBackend) closes() bool { return false }

func (b *fsnotifyBackend) watch(folders, _ []string) error {
	want := make(map[string]bool, len(folders))
	var errs []error
	for _, f := range folders {
		want[f] = true
		b.mu.Lock()
		watched := b.folders[f]
		b.mu.Unlock()
		if watched {
			continue
		}
		if err := b.w.Add(f); err != nil {
			errs = append(errs, fmt.Errorf("watch fleet folder %s: %w", f, err))
			continue
		}
		b.mu.Lock()
		b.folders[f] = true
		b.mu.Unlock()
	}
	b.mu.Lock()
	var stale []string
	for f := range b.folders {
		if !want[f] {
			stale = append(stale, f)
			delete(b.folders, f)
		}
	}
	b.mu.Unlock()
	for _, f := range stale {
		_ = b.w.Remove(f) // gone already if the folder was
	}
	return errors.Join(errs...)
}

// rewatch has nothing to do: the folder watch sees the files' writes.
func (b *fsnotifyBackend) rewatch(string) error { return nil }

func (b *fsnotifyBackend) ready() <-chan struct{} { return b.signal }

func (b *fsnotifyBackend) take() []fileEvent {
	b.mu.Lock()
	defer b.mu.Unlock()
	q := b.queue
	b.queue = nil
	if b.dropped {
		b.dropped = false
		q = append(q, fileEvent{op: opLost})
	}
	return q
}

func (b *fsnotifyBackend) probe(string) probeResult { return probeUnavailable }

func (b *fsnotifyBackend) close() error {
	err := b.w.Close()
	<-b.done
	return err
}

// pump moves fsnotify's events into the queue until the watcher is closed.
func (b *fsnotifyBackend) pump() {
	defer close(b.done)
	defer close(b.signal)
	for {
		var ev fileEvent
		select {
		case e, ok := <-b.w.Events:
			if !ok {
				return
			}
			ev = b.translate(e)
		case err, ok := <-b.w.Errors:
			if !ok {
				return
			}
			ev = fileEvent{op: opLost}
			if !errors.Is(err, fsnotify.ErrEventOverflow) {
				ev.err = err
			}
		}
		if ev.op == 0 {
			continue
		}
		b.mu.Lock()
		if len(b.queue) < maxQueuedEvents {
			b.queue = append(b.queue, ev)
		} else {
			b.dropped = true
		}
		b.mu.Unlock()
		select {
		case b.signal <- struct{}{}:
		default:
		}
	}
}

// translate maps an fsnotify event to a fileEvent; op 0 means none.
func (b *fsnotifyBackend) translate(e fsnotify.Event) fileEvent {
	name := filepath.Clean(e.Name)
	b.mu.Lock()
	folder := b.folders[name]
	if folder && e.Has(fsnotify.Remove|fsnotify.Rename) {
		delete(b.folders, name) // its watch went with it
	}
	b.mu.Unlock()
	switch {
	case folder && e.Has(fsnotify.Rename):
		return fileEvent{name: name, op: opLost}
	case folder:
		// Removed (its files were, each with its event, before it) or
		// its attributes changed.
		return fileEvent{}
	case e.Has(fsnotify.Remove) || e.Has(fsnotify.Rename):
		return fileEvent{name: name, op: opRemoved}
	case e.Has(fsnotify.Create):
		return fileEvent{name: name, op: opAppeared}
	case e.Has(fsnotify.Write):
		return fileEvent{name: name, op: opWritten}
	case e.Has(fsnotify.Chmod):
		return fileEvent{name: name, op: opAttrib}
	}
	return fileEvent{}
}
