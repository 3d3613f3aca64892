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
	"strings"
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
	// Log receives the file events that count (V(1)), the ignored ones
	// (V(2), once per name), reloads and load errors.
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
//   - only events that can change what spec.Load reads count: a fleet file
//     or path named on the command line, a file a fleet folder contributes
//     (*.yaml, *.yml, not hidden), a symlink target of a fleet file, a fleet
//     folder itself, and a Kubernetes ConfigMap's "..data" swap. Others (a
//     log file written beside procfleet.yaml, an editor's swap or temp file)
//     are ignored, logged at V(2);
//   - file events are hints: after a quiet Debounce it re-reads every file
//     and compares content, so an atomic save, a vim-style save or a
//     delete-then-recreate that leaves the content as it was changes nothing;
//   - a read that differs from the fleet in force is applied at once only
//     when every event since the last settled read put a whole file into
//     place (a create or rename, see fastEligible), the read loads without
//     errors, every file in it declares a server, and a second read right
//     away gives the same content with no event arriving meanwhile. Any
//     other differing read (after a write to a file, a folder file removed
//     or renamed, an overflow or a resync, or a read with errors) is applied
//     only when a second read one debounce later (at once for Reload) finds
//     the same content and no file event arrived while reading, so a file
//     caught between an in-place save's truncate and its write never prunes
//     or changes servers;
//   - a file that fails to load keeps the last good fleet in force; the
//     errors are logged with file and line and reported in FleetUpdate.Errors;
//   - an event queue overflow (fsnotify.ErrEventOverflow: events were lost),
//     or Resync, re-reads everything, confirmed as above.
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

	// Owned by Run's goroutine (and NewFleetWatcher before it): which event
	// names count (see watchDirs), and what the events that counted since
	// the last settled read could have left behind.
	rel     relevance
	win     window
	ignored map[string]bool // names whose ignored events were logged

	// Owned by Run's goroutine: the signature of the last read that differed
	// from the fleet in force and is waiting for a confirming read, and how
	// many reads were dropped in a row because files were still changing.
	pending []byte
	retries int
	// confirms counts the confirming reads of pending so far when it leaves
	// a file declaring no server (emptyFileConfirms).
	confirms int
	// afterRead, when set (tests only), runs right after each read of the
	// files, before the result is judged: it lets a test change a file at
	// the instant an editor's in-place save would.
	afterRead func()
}

// maxReloadRetries bounds how many reads in a row are dropped because file
// events arrived while reading; after that a read is applied only once a
// second read finds it unchanged.
const maxReloadRetries = 8

// emptyFileConfirms is how many debounces in a row a read must stay the
// same before it is applied when a file in it declares no server (16 x the
// default 30 ms: about half a second). That is what an in-place save looks
// like between its truncate and its write, and inotify never says the
// writer has finished (IN_CLOSE_WRITE is not exported by fsnotify 1.10): a
// writer stalled for longer than two debounces on a loaded machine was
// read empty and its servers pruned (soak TestRegressInPlaceSaveChangesNothing,
// about 1 run in 4 at load 6). A file emptied on purpose is applied half a
// second later.
const emptyFileConfirms = 16

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
		ignored:  map[string]bool{},
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
			if w.note(ev, "File event") {
				arm()
			}
		case err, ok := <-w.watcher.Errors:
			if !ok {
				return errors.New("watch fleet files: watcher closed")
			}
			if errors.Is(err, fsnotify.ErrEventOverflow) {
				w.log.Info("File events overflowed; re-reading every fleet file")
			} else {
				w.log.Error(err, "File watch error; re-reading every fleet file")
			}
			// Events were lost: what they were is unknown, so the read is
			// confirmed.
			w.win.unknown()
			arm()
		case <-fire:
			fire = nil
			if w.reload(fn, false) {
				arm()
			}
		case <-w.resync:
			w.win.unknown()
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
// notes them in w.win, and says whether any of them counted.
func (w *FleetWatcher) eventsArrived() bool {
	n := 0
	for {
		select {
		case ev, ok := <-w.watcher.Events:
			if !ok {
				return n > 0
			}
			if w.note(ev, "File event while reading") {
				n++
			}
		default:
			return n > 0
		}
	}
}

// reload re-reads every file and reports what changed, if anything. It
// returns true when the files must be read again after a debounce.
//
// A read that differs from the fleet in force is applied only once
// confirmed, so a file caught between an in-place save's truncate and its
// write, read as empty or partial, never prunes or changes servers:
//
//   - fast, at once, when the events since the last settled read all put
//     whole files into place (fastEligible), the read has no errors, every
//     file in it declares a server (an empty file, just created and not yet
//     written, is not taken for a fleet without its servers), and a second
//     read right away gives the same content with no event arriving during
//     either read;
//   - otherwise by a second identical read one debounce later (or at once
//     for an explicit Reload: its caller has finished saving), with no file
//     event arriving while reading.
//
// Why the fast path is safe: a file renamed into place was complete before
// its name appeared; a file created in place can only hold part of its
// content after a write, which is a Write event, and until then it is
// empty (declaresEveryFile). What it still trusts is event delivery: a
// write made just before the read whose event has not reached the
// watcher by the end of both reads would go unseen for those reads (it
// is seen afterwards and read again). The delayed confirmation has its
// own limit: inotify never says a writer has finished (fsnotify 1.10
// keeps IN_CLOSE_WRITE unexported), so a writer stalled between truncate
// and write for longer than two debounces is read as it stands -- except
// that a read in which a file declares no server (an emptied file) must
// stay the same for emptyFileConfirms debounces first.
//
// A read is settled when it is applied or matches the fleet in force; the
// events noted before an unsettled one stay in the window, so a write to
// one file is still confirmed when a rename into place of another follows.
func (w *FleetWatcher) reload(fn func(FleetUpdate), explicit bool) (again bool) {
	before := w.win
	w.win = window{}
	unsettled := func() bool {
		w.win.merge(before)
		return true
	}
	r := w.read()
	arrived := w.eventsArrived()
	if explicit {
		// The caller has finished saving: a second read now confirms.
		if r2 := w.read(); !bytes.Equal(r.sig, r2.sig) {
			w.log.Info("Fleet files changed while being read; reading again after the debounce")
			w.pending, w.confirms = r2.sig, 0
			w.win.unknown()
			return unsettled()
		}
	} else if arrived && w.retries < maxReloadRetries {
		w.retries++
		w.pending, w.confirms = nil, 0
		w.log.V(1).Info("Fleet files changed while being read; reading again after the debounce", "retry", w.retries)
		return unsettled()
	}
	w.retries = 0

	w.mu.Lock()
	inForce := sameAsInForce(r, w.prints, w.errs)
	w.mu.Unlock()
	if inForce {
		w.pending, w.confirms = nil, 0
		if r.fleet != nil {
			if err := w.watchDirs(r.fleet); err != nil {
				w.log.Error(err, "Cannot watch a fleet folder")
			}
		}
		w.log.V(1).Info("Fleet files re-read; no change")
		return arrived
	}
	if !explicit && !bytes.Equal(r.sig, w.pending) {
		if !arrived && before.fastEligible() && declaresEveryFile(r) {
			if w.confirmNow(r) {
				w.pending, w.confirms = nil, 0
				w.log.V(1).Info("Fleet files put into place whole; applying at once")
				w.apply(r, fn)
				return false
			}
			w.win.unknown()
		}
		// First sight of this content: confirm it before anything running
		// is stopped, pruned or changed on its account.
		w.pending, w.confirms = r.sig, 0
		w.log.V(1).Info("Fleet files differ from the fleet in force; confirming with a second read")
		return unsettled()
	}
	if !explicit && r.fleet != nil && !declaresEveryFile(r) && w.confirms < emptyFileConfirms {
		w.confirms++
		w.log.V(1).Info("A fleet file declares no server; confirming again after the debounce", "confirms", w.confirms)
		return unsettled()
	}
	w.pending, w.confirms = nil, 0
	w.apply(r, fn)
	return arrived
}

// confirmNow reads the files again at once and says whether they gave r's
// content with no event counting during the read.
func (w *FleetWatcher) confirmNow(r readResult) bool {
	r2 := w.read()
	arrived := w.eventsArrived()
	return !arrived && bytes.Equal(r.sig, r2.sig)
}

// declaresEveryFile says whether r loaded without errors and every file it
// read declares at least one server. A file created by open(O_CREAT) is
// empty until its writer's first write, and that write is an event of its
// own; a file with no server is read as such and confirmed the slow way.
func declaresEveryFile(r readResult) bool {
	if r.fleet == nil || r.errs != nil {
		return false
	}
	declared := make(map[string]bool, len(r.fleet.Files))
	for i := range r.fleet.Servers {
		declared[r.fleet.Servers[i].Source.File] = true
	}
	for _, f := range r.fleet.Files {
		if !declared[f] {
			return false
		}
	}
	return true
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
// of each file path, and the folders of symlink targets. It also sets which
// event names count from now on (w.rel).
func (w *FleetWatcher) watchDirs(fleet *spec.Fleet) error {
	want := map[string]bool{}
	rel := relevance{files: map[string]bool{}, folders: map[string]bool{}, canon: map[string]string{}}
	canon := func(dir string) string {
		if c, ok := rel.canon[dir]; ok {
			return c
		}
		c := canonDir(dir)
		rel.canon[dir] = c
		return c
	}
	addFile := func(p string) {
		a := absPath(p)
		rel.files[filepath.Join(canon(filepath.Dir(a)), filepath.Base(a))] = true
	}
	addTarget := func(p string) {
		if fi, err := os.Lstat(p); err == nil && fi.Mode()&os.ModeSymlink != 0 {
			if real, err := filepath.EvalSymlinks(p); err == nil {
				real = absPath(real)
				if rfi, err := os.Stat(real); err == nil && rfi.IsDir() {
					want[real] = true
				} else {
					want[filepath.Dir(real)] = true
					addFile(real)
				}
			}
		}
	}
	for _, p := range w.paths {
		a := absPath(p)
		if fi, err := os.Stat(p); err == nil && fi.IsDir() {
			want[a] = true
			rel.folders[canon(a)] = true
		} else {
			want[filepath.Dir(a)] = true
			addFile(a)
		}
		addTarget(p)
	}
	if fleet != nil {
		for _, f := range fleet.Files {
			addFile(f)
			addTarget(f)
		}
	}
	for dir := range want {
		canon(dir)
	}
	w.rel = rel
	var errs []error
	for dir := range want {
		if w.dirs[dir] {
			continue
		}
		if err := w.watcher.Add(dir); err != nil {
			errs = append(errs, fmt.Errorf("watch fleet folder %s: %w", dir, err))
			continue
		}
		w.dirs[dir] = true
		w.log.V(1).Info("Watching folder", "folder", dir)
	}
	return errors.Join(errs...)
}

// maxIgnoredLogged bounds the names remembered as logged ignored.
const maxIgnoredLogged = 1024

// configMapData is the name a Kubernetes ConfigMap volume swaps atomically
// (a symlink to the folder of the new files) when its content changes.
const configMapData = "..data"

// relevance says which file event names can change what spec.Load reads.
// Names are compared with their folder's symlinks resolved, because a
// folder watched under two names (a symlink and its target) reports its
// events under only one of them.
type relevance struct {
	files   map[string]bool   // fleet files, file paths and symlink targets
	folders map[string]bool   // folder paths
	canon   map[string]string // watched folder (absolute) -> resolved
}

// classify says whether an event on name counts, and whether name is a file
// a fleet folder contributes (removing one removes its servers).
func (rel relevance) classify(name string) (counts, member bool) {
	name = filepath.Clean(name)
	base := filepath.Base(name)
	if base == configMapData {
		return true, false
	}
	if c, ok := rel.canon[name]; ok && rel.folders[c] {
		return true, false // a fleet folder itself
	}
	dir := filepath.Dir(name)
	if c, ok := rel.canon[dir]; ok {
		dir = c
	}
	if rel.folders[dir] && loaderReads(base) {
		return true, true
	}
	return rel.files[filepath.Join(dir, base)], false
}

// isFolder says whether name is a fleet folder.
func (rel relevance) isFolder(name string) bool {
	name = filepath.Clean(name)
	if c, ok := rel.canon[name]; ok {
		name = c
	}
	return rel.folders[name]
}

// loaderReads says whether spec.Load reads a file of this name in a fleet
// folder: *.yaml and *.yml, hidden files skipped (spec/load.go, expand).
func loaderReads(base string) bool {
	if strings.HasPrefix(base, ".") {
		return false
	}
	ext := filepath.Ext(base)
	return ext == ".yaml" || ext == ".yml"
}

func absPath(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return filepath.Clean(p)
}

// canonDir is dir, absolute, with its symlinks resolved when it exists.
func canonDir(dir string) string {
	a := absPath(dir)
	if real, err := filepath.EvalSymlinks(a); err == nil {
		return absPath(real)
	}
	return a
}

// window is what the events that counted since the last settled read (see
// reload) could have left behind.
type window struct {
	counted bool // an event counted
	unsafe  bool // one may have left a file half-written or a folder file missing, or events were lost
}

// unknown marks the window as one whose events are not known (an overflow,
// a resync, a read that changed under the watcher).
func (w *window) unknown() { w.unsafe = true }

func (w *window) merge(o window) {
	w.counted = w.counted || o.counted
	w.unsafe = w.unsafe || o.unsafe
}

// fastEligible says whether every event of the window put a whole file into
// place, so the files it names cannot be read half-written:
//
//   - Create is a rename into place (IN_MOVED_TO: an atomic save, rsync, a
//     ConfigMap's "..data" swap), a link, or a file created by open(O_CREAT)
//     with nothing written yet; a write would be a Write event of its own,
//     and the empty file is caught by declaresEveryFile;
//   - Chmod changes no content;
//   - Remove or Rename of a fleet file named as a path, or of a symlink
//     target, leaves it missing, which is a load error, never applied fast.
//
// Anything else is unsafe: a Write (an in-place save between O_TRUNC and
// its last write; inotify cannot say when the writer closed the file, and
// fsnotify 1.10 does not export IN_CLOSE_WRITE), a Remove or Rename of a
// file in a fleet folder (vim's backup rename leaves the folder without it
// for a moment, which reads as its servers removed), any event on a fleet
// folder itself, and lost events.
func (w window) fastEligible() bool { return w.counted && !w.unsafe }

// note classifies one file event, logs it, and records it in w.win when it
// counts; it says whether it counts.
func (w *FleetWatcher) note(ev fsnotify.Event, msg string) bool {
	if ev.Has(fsnotify.Remove) || ev.Has(fsnotify.Rename) {
		// A watched folder removed or moved takes its watch with it; a
		// later read adds it again if it is back.
		delete(w.dirs, filepath.Clean(ev.Name))
	}
	counts, member := w.rel.classify(ev.Name)
	if !counts {
		// Once per name: a log written at V(2) beside the fleet files
		// would otherwise log its own events for ever.
		if w.log.V(2).Enabled() && !w.ignored[ev.Name] {
			if len(w.ignored) >= maxIgnoredLogged {
				clear(w.ignored)
			}
			w.ignored[ev.Name] = true
			w.log.V(2).Info("File event ignored", "file", ev.Name, "op", ev.Op.String())
		}
		return false
	}
	w.log.V(1).Info(msg, "file", ev.Name, "op", ev.Op.String())
	w.win.counted = true
	if ev.Has(fsnotify.Write) || w.rel.isFolder(ev.Name) ||
		(member && (ev.Has(fsnotify.Remove) || ev.Has(fsnotify.Rename))) {
		w.win.unsafe = true
	}
	return true
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
