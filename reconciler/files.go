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
//   - a read that differs from the fleet in force is applied only when a
//     second read one debounce later (at once for Reload) finds the same
//     content and no file event arrived while reading, so a file caught
//     between an in-place save's truncate and its write never prunes or
//     changes servers;
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

	// Owned by Run's goroutine: the signature of the last read that differed
	// from the fleet in force and is waiting for a confirming read, and how
	// many reads were dropped in a row because files were still changing.
	pending []byte
	retries int
	// afterRead, when set (tests only), runs right after each read of the
	// files, before the result is judged: it lets a test change a file at
	// the instant an editor's in-place save would.
	afterRead func()
}

// maxReloadRetries bounds how many reads in a row are dropped because file
// events arrived while reading; after that a read is applied only once a
// second read finds it unchanged.
const maxReloadRetries = 8

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
			if w.reload(fn, false) {
				arm()
			}
		case <-w.resync:
			if w.reload(fn, false) {
				arm()
			}
		case done := <-w.reloads:
			if w.reload(fn, true) {
				arm()
			}
			close(done)
		}
	}
}

// readResult is one read of every fleet file.
type readResult struct {
	fleet  *spec.Fleet
	errs   spec.ErrorList
	prints map[string][]byte
	sig    []byte
}

func (w *FleetWatcher) read() readResult {
	fleet, err := spec.Load(w.paths...)
	if w.afterRead != nil {
		w.afterRead()
	}
	if err != nil {
		list := asErrorList(err)
		var b bytes.Buffer
		b.WriteString("errors\n")
		for _, fe := range list {
			b.WriteString(fe.Error())
			b.WriteByte('\n')
		}
		return readResult{errs: list, sig: b.Bytes()}
	}
	prints := fingerprints(fleet)
	sig, err := json.Marshal(prints) // map keys are sorted: the same fleet gives the same bytes
	if err != nil {
		sig = []byte(err.Error())
	}
	return readResult{fleet: fleet, prints: prints, sig: append([]byte("fleet\n"), sig...)}
}

// eventsArrived drains the file events that came while the files were read,
// and says whether there were any.
func (w *FleetWatcher) eventsArrived() bool {
	n := 0
	for {
		select {
		case ev, ok := <-w.watcher.Events:
			if !ok {
				return n > 0
			}
			w.log.V(1).Info("File event while reading", "file", ev.Name, "op", ev.Op.String())
			n++
		default:
			return n > 0
		}
	}
}

// reload re-reads every file and reports what changed, if anything. A read
// that differs from the fleet in force is applied only once confirmed: by a
// second identical read one debounce later (or at once for an explicit
// Reload), with no file event arriving while reading. So a file caught
// between an in-place save's truncate and its write, read as empty or
// partial, never prunes or changes servers. It returns true when the files
// must be read again after a debounce.
func (w *FleetWatcher) reload(fn func(FleetUpdate), explicit bool) (again bool) {
	r := w.read()
	if explicit {
		// The caller has finished saving: a second read now confirms.
		if r2 := w.read(); !bytes.Equal(r.sig, r2.sig) {
			w.log.Info("Fleet files changed while being read; reading again after the debounce")
			w.pending = r2.sig
			return true
		}
	} else if w.eventsArrived() && w.retries < maxReloadRetries {
		w.retries++
		w.pending = nil
		w.log.V(1).Info("Fleet files changed while being read; reading again after the debounce", "retry", w.retries)
		return true
	}
	w.retries = 0

	w.mu.Lock()
	inForce := sameAsInForce(r, w.prints, w.errs)
	w.mu.Unlock()
	if inForce {
		w.pending = nil
		if r.fleet != nil {
			if err := w.watchDirs(r.fleet); err != nil {
				w.log.Error(err, "Cannot watch a fleet folder")
			}
		}
		w.log.V(1).Info("Fleet files re-read; no change")
		return false
	}
	if !explicit && !bytes.Equal(r.sig, w.pending) {
		// First sight of this content: confirm it before anything running
		// is stopped, pruned or changed on its account.
		w.pending = r.sig
		w.log.V(1).Info("Fleet files differ from the fleet in force; confirming with a second read")
		return true
	}
	w.pending = nil
	w.apply(r, fn)
	return false
}

// sameAsInForce says whether r matches the fleet and errors in force.
func sameAsInForce(r readResult, prints map[string][]byte, errs spec.ErrorList) bool {
	if r.errs != nil {
		return sameErrors(r.errs, errs)
	}
	return len(errs) == 0 && len(changedNames(prints, r.prints)) == 0
}

// apply makes a confirmed read the state in force and reports it.
func (w *FleetWatcher) apply(r readResult, fn func(FleetUpdate)) {
	w.mu.Lock()
	if r.errs != nil {
		w.errs = r.errs
		cur := w.current
		w.mu.Unlock()
		for _, fe := range r.errs {
			w.log.Error(fe, "Fleet file invalid; keeping the last good fleet", "file", fe.File, "line", fe.Line, "field", fe.Field)
		}
		fn(FleetUpdate{Fleet: cur, Errors: r.errs})
		return
	}
	changed := changedNames(w.prints, r.prints)
	hadErrs := len(w.errs) > 0
	w.current, w.prints, w.errs = r.fleet, r.prints, nil
	w.mu.Unlock()
	if err := w.watchDirs(r.fleet); err != nil {
		w.log.Error(err, "Cannot watch a fleet folder")
	}
	if len(changed) == 0 && !hadErrs {
		return
	}
	w.log.Info("Fleet files changed", "servers", changed)
	fn(FleetUpdate{Fleet: r.fleet, Changed: changed})
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
