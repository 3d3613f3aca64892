package reconciler

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/go-logr/logr"
	"k8s.io/utils/clock"

	"github.com/procfleet/procfleet/spec"
)

// DefaultDebounce is how long the file watcher waits after the last event
// before it re-reads the fleet files.
const DefaultDebounce = 30 * time.Millisecond

// FleetUpdate is a change of the desired state, or of the errors that keep
// the last good one in force.
type FleetUpdate struct {
	// Fleet is the fleet in force: the new one, or the last good one when
	// Errors is not empty.
	Fleet *spec.Fleet
	// Changed names the servers added, removed or changed in any field since
	// the previous update, sorted. Servers whose content did not change are
	// never named, whatever happened to their files.
	Changed []string
	// Errors are the load and validation errors of the files now; empty when
	// they are good.
	Errors spec.ErrorList
}

// FleetWatcherConfig configures a FleetWatcher. The zero value watches
// procfleet.yaml in the current folder.
type FleetWatcherConfig struct {
	// Paths are the fleet files and folders (-f). Empty means
	// spec.DefaultFile.
	Paths []string
	// Debounce is the quiet time after the last event before a reload.
	// Zero means DefaultDebounce.
	Debounce time.Duration
	// Log receives file events (V(1)), reloads and load errors.
	Log logr.Logger
	// Clock drives the debounce timer. Nil means the real clock.
	Clock clock.WithTicker
}

// FleetWatcher turns the fleet files into a stream of desired states.
//
// Guarantees:
//   - it watches the folders that hold the files (and the folders of
//     symlink targets), never the files themselves, so editors' rename-based
//     saves are seen;
//   - file events are hints: after a quiet Debounce it re-reads every file
//     and compares content, so an atomic save, a vim-style save or a
//     delete-then-recreate that leaves the content as it was changes nothing;
//   - a file that fails to load keeps the last good fleet in force; the
//     errors are logged with file and line and reported in FleetUpdate.Errors;
//   - an inotify queue overflow, or Resync, re-reads everything.
type FleetWatcher struct {
	paths    []string
	debounce time.Duration
	log      logr.Logger
	clock    clock.WithTicker
	watcher  *fsnotify.Watcher
	resync   chan struct{}
	reloads  chan chan struct{}

	mu      sync.Mutex
	current *spec.Fleet
	errs    spec.ErrorList
	prints  map[string][]byte
	dirs    map[string]bool
}

// NewFleetWatcher loads the fleet files and starts watching their folders.
// A fleet that does not load is returned as the error (a spec.ErrorList):
// there is no last good fleet to keep yet.
func NewFleetWatcher(cfg FleetWatcherConfig) (*FleetWatcher, error) {
	w := &FleetWatcher{
		paths:    cfg.Paths,
		debounce: cfg.Debounce,
		log:      cfg.Log,
		clock:    cfg.Clock,
		resync:   make(chan struct{}, 1),
		reloads:  make(chan chan struct{}),
		dirs:     map[string]bool{},
	}
	if len(w.paths) == 0 {
		w.paths = []string{spec.DefaultFile}
	}
	if w.debounce <= 0 {
		w.debounce = DefaultDebounce
	}
	if w.clock == nil {
		w.clock = clock.RealClock{}
	}
	fleet, err := spec.Load(w.paths...)
	if err != nil {
		return nil, err
	}
	w.current, w.prints = fleet, fingerprints(fleet)
	w.watcher, err = fsnotify.NewWatcher()
	if err != nil {
		return nil, fmt.Errorf("watch fleet files: %w", err)
	}
	if err := w.watchDirs(fleet); err != nil {
		_ = w.watcher.Close()
		return nil, err
	}
	return w, nil
}

// Fleet returns the fleet in force and the errors of the files now.
func (w *FleetWatcher) Fleet() (*spec.Fleet, spec.ErrorList) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.current, w.errs
}

// Resync asks Run to re-read the files now.
func (w *FleetWatcher) Resync() {
	select {
	case w.resync <- struct{}{}:
	default:
	}
}

// Reload re-reads the files now and returns once the update (if any) was
// delivered to Run's fn. It fails when Run is not running or ctx ends.
func (w *FleetWatcher) Reload(ctx context.Context) error {
	done := make(chan struct{})
	select {
	case w.reloads <- done:
	case <-ctx.Done():
		return fmt.Errorf("reload fleet files: %w", ctx.Err())
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("reload fleet files: %w", ctx.Err())
	}
}

// Run watches until ctx is done, calling fn on its own goroutine for every
// update. It closes the watcher and drains its channels before returning.
func (w *FleetWatcher) Run(ctx context.Context, fn func(FleetUpdate)) error {
	defer func() {
		_ = w.watcher.Close()
		for range w.watcher.Events {
		}
		for range w.watcher.Errors {
		}
	}()
	var timer clock.Timer
	var fire <-chan time.Time
	arm := func() {
		if timer == nil {
			timer = w.clock.NewTimer(w.debounce)
		} else {
			timer.Stop()
			timer.Reset(w.debounce)
		}
		fire = timer.C()
	}
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-w.watcher.Events:
			if !ok {
				return errors.New("watch fleet files: watcher closed")
			}
			w.log.V(1).Info("File event", "file", ev.Name, "op", ev.Op.String())
			arm()
		case err, ok := <-w.watcher.Errors:
			if !ok {
				return errors.New("watch fleet files: watcher closed")
			}
			if errors.Is(err, fsnotify.ErrEventOverflow) {
				w.log.Info("File events overflowed; re-reading every fleet file")
			} else {
				w.log.Error(err, "File watch error; re-reading every fleet file")
			}
			arm()
		case <-fire:
			fire = nil
			w.reload(fn)
		case <-w.resync:
			w.reload(fn)
		case done := <-w.reloads:
			w.reload(fn)
			close(done)
		}
	}
}

// reload re-reads every file and reports what changed, if anything.
func (w *FleetWatcher) reload(fn func(FleetUpdate)) {
	fleet, err := spec.Load(w.paths...)
	w.mu.Lock()
	if err != nil {
		list := asErrorList(err)
		same := sameErrors(list, w.errs)
		w.errs = list
		cur := w.current
		w.mu.Unlock()
		if same {
			return
		}
		for _, fe := range list {
			w.log.Error(fe, "Fleet file invalid; keeping the last good fleet", "file", fe.File, "line", fe.Line, "field", fe.Field)
		}
		fn(FleetUpdate{Fleet: cur, Errors: list})
		return
	}
	prints := fingerprints(fleet)
	changed := changedNames(w.prints, prints)
	hadErrs := len(w.errs) > 0
	w.current, w.prints, w.errs = fleet, prints, nil
	w.mu.Unlock()
	if err := w.watchDirs(fleet); err != nil {
		w.log.Error(err, "Cannot watch a fleet folder")
	}
	if len(changed) == 0 && !hadErrs {
		w.log.V(1).Info("Fleet files re-read; no change")
		return
	}
	w.log.Info("Fleet files changed", "servers", changed)
	fn(FleetUpdate{Fleet: fleet, Changed: changed})
}

// watchDirs adds the folders to watch: each folder path itself, the folder
// of each file path, and the folders of symlink targets.
func (w *FleetWatcher) watchDirs(fleet *spec.Fleet) error {
	want := map[string]bool{}
	addTarget := func(p string) {
		if fi, err := os.Lstat(p); err == nil && fi.Mode()&os.ModeSymlink != 0 {
			if real, err := filepath.EvalSymlinks(p); err == nil {
				if rfi, err := os.Stat(real); err == nil && rfi.IsDir() {
					want[real] = true
				} else {
					want[filepath.Dir(real)] = true
				}
			}
		}
	}
	for _, p := range w.paths {
		if fi, err := os.Stat(p); err == nil && fi.IsDir() {
			want[filepath.Clean(p)] = true
		} else {
			want[filepath.Dir(p)] = true
		}
		addTarget(p)
	}
	if fleet != nil {
		for _, f := range fleet.Files {
			addTarget(f)
		}
	}
	var errs []error
	for dir := range want {
		abs, err := filepath.Abs(dir)
		if err != nil {
			abs = dir
		}
		if w.dirs[abs] {
			continue
		}
		if err := w.watcher.Add(abs); err != nil {
			errs = append(errs, fmt.Errorf("watch fleet folder %s: %w", abs, err))
			continue
		}
		w.dirs[abs] = true
		w.log.V(1).Info("Watching folder", "folder", abs)
	}
	return errors.Join(errs...)
}

// fingerprints maps each server to its full content (every field but its
// source position), so any change, not only a spec-hash change, is seen.
func fingerprints(f *spec.Fleet) map[string][]byte {
	m := make(map[string][]byte, len(f.Servers))
	for i := range f.Servers {
		b, err := json.Marshal(&f.Servers[i])
		if err != nil {
			b = []byte(err.Error())
		}
		m[f.Servers[i].Metadata.Name] = b
	}
	return m
}

func changedNames(old, cur map[string][]byte) []string {
	var out []string
	for n, b := range cur {
		if ob, ok := old[n]; !ok || !bytes.Equal(ob, b) {
			out = append(out, n)
		}
	}
	for n := range old {
		if _, ok := cur[n]; !ok {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

func asErrorList(err error) spec.ErrorList {
	var list spec.ErrorList
	if errors.As(err, &list) {
		return list
	}
	return spec.ErrorList{{Message: err.Error(), Err: err}}
}

func sameErrors(a, b spec.ErrorList) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Error() != b[i].Error() {
			return false
		}
	}
	return true
}
