package reconciler

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/utils/clock"

	"github.com/procfleet/procfleet/spec"
)

// DefaultDebounce is how long the file watcher waits after the last event
// before it re-reads the fleet files, where its watch does not report
// writers' closes (fsnotify): there a save's events are passed on by
// fsnotify's own goroutine, and a file that appeared is only trusted when
// a second read one debounce later agrees.
const DefaultDebounce = 30 * time.Millisecond

// closesDebounce is the debounce where the watch reports writers' closes
// (Linux inotify). There a read is safe whenever it is made: the confirmer
// trusts a changed file only once its close was seen or the writer probe
// found nobody writing it, and an event during the read makes it read
// again. The wait only gathers one save's events (a rename and its attrib;
// a truncate, writes and a close), which one writer queues within
// microseconds, into one read (a read of a fleet of 1,000 costs some
// milliseconds of CPU). It is short against DESIGN's 100 ms from save to
// Ready.
const closesDebounce = 5 * time.Millisecond

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
	// Zero means the watch's own: 5 ms where it reports writers' closes
	// (Linux), else DefaultDebounce.
	Debounce time.Duration
	// Log receives the file events that count (V(1)), the ignored ones
	// (V(2), once per name), reloads, changes waiting for a writer, and
	// load errors.
	Log logr.Logger
	// Clock drives the debounce and the waits for unchanged content. Nil
	// means the real clock.
	Clock clock.WithTicker
	// Loader, when set, is a loader that has read the files already (up
	// checks them before it locks the state folder): the watcher's first
	// read then decodes only the documents changed since. Nil means a new
	// one.
	Loader *spec.Loader

	// portable (tests only) makes the watcher use fsnotify and its rules
	// where the platform has a watch of its own (Linux inotify).
	portable bool
	// noProbe (tests only) turns the writer probe off, as on a file
	// system without leases.
	noProbe bool
}

// FleetWatcher turns the fleet files into a stream of desired states.
//
// Guarantees:
//   - It watches the folders that hold the files (and the folders of
//     symlink targets) for names created, moved and removed, so editors'
//     rename-based saves are seen. On Linux the kernel delivers only those
//     name events for the folders, and content events (written, closed by
//     a writer) only for the fleet files themselves: a log written beside
//     procfleet.yaml costs the watcher nothing. Elsewhere fsnotify
//     delivers every event in the folders and those on other names are
//     dropped in user space.
//   - Only events that can change what spec.Load reads count: a fleet file
//     or path named on the command line, a file a fleet folder contributes
//     (*.yaml, *.yml, not hidden), an env file the fleet reads
//     (spec.envFile), a symlink target of any of those, a fleet folder
//     itself, and a Kubernetes ConfigMap's "..data" swap. Others (a log
//     file, an editor's swap or temp file) are ignored, logged at V(2).
//     Env files are watched, read and confirmed like fleet files: an edit
//     of one names in FleetUpdate.Changed the servers that read it.
//   - File events are hints: after a quiet Debounce it re-reads every file
//     and compares content, so an atomic save, a vim-style save or a
//     delete-then-create that leaves the content as it was changes nothing.
//   - A file caught half-written never stops, replaces or starts a server.
//     A read that differs from the fleet in force is applied only once
//     every file whose servers or variables changed is known whole (the
//     rule is confirmer's, a pure function of the events and the reads):
//     on Linux, once no writer has it open (asked of the kernel, below): a
//     file renamed into place at the first read, a file saved in place
//     when its writer closes it, however long the writer stalls before
//     that; where the kernel cannot be asked (another user's file, a file
//     system without leases) a write still waits for its close. A file
//     removed (it may be back a moment later, as in vim's save), one
//     created in place whose close may have come before its watch (without
//     the probe), and elsewhere any file written in place: once its content
//     has stayed the same for 1 s, so elsewhere a writer stalled longer
//     than that mid-save is read as it stands. Elsewhere a file renamed or
//     created into place: when a second read one debounce later agrees
//     and every changed file declares a server.
//   - A file that fails to load keeps the last good fleet in force; the
//     errors are logged with file and line and reported in
//     FleetUpdate.Errors.
//   - Lost events (an inotify queue overflow), a watched folder moved, or
//     Resync: every file is re-read, and a change is applied once it has
//     stayed the same for 1 s and no writer has the file open.
//
// On Linux, whether a writer has a file open is asked of the kernel by
// taking a read lease on it (fcntl F_SETLEASE), released at once: during
// those microseconds another process's open of the file for writing waits
// for the release (or fails with EWOULDBLOCK if it opened with O_NONBLOCK).
// The probe is taken only on a changed file, after a read that differs from
// the fleet in force.
type FleetWatcher struct {
	paths    []string
	debounce time.Duration
	log      logr.Logger
	clock    clock.WithTicker
	backend  watchBackend
	resync   chan struct{}
	reloads  chan chan struct{}

	// loader decodes only the documents that changed since its last read.
	loader *spec.Loader

	mu      sync.Mutex
	current *spec.Fleet
	errs    spec.ErrorList
	prints  map[string][]byte // server -> fingerprint, in force
	files   map[string][]byte // fleet and env file -> what it gave (filePrints), in force

	// Owned by Run's goroutine (and NewFleetWatcher before it).
	conf    *confirmer
	rel     relevance       // which event names count (see watchFiles)
	ignored map[string]bool // names whose ignored events were logged
	waiting []byte          // the pending read logged as waiting for a writer
	// afterRead, when set (tests only), runs right after each read of the
	// files, before the result is judged: it lets a test change a file at
	// the instant an editor's in-place save would.
	afterRead func()
	// onReload, when set (tests only), is given the verdict that ends each
	// reload, once Run has armed its timer (or stopped it) for it.
	onReload func(verdict)
}

// watchBackend is the platform's file watch, used by Run's goroutine only.
type watchBackend interface {
	// closes says whether it reports writers' closes (opClosed).
	closes() bool
	// watch makes the watched folders (name events) and files (content
	// events, where the backend watches files apart) these.
	watch(folders, files []string) error
	// rewatch moves file's content watch to what its name names now; it
	// is called on every name event for a file that counts. A file that
	// does not exist is no error.
	rewatch(file string) error
	// ready is signalled when events may be waiting, and closed when the
	// backend fails.
	ready() <-chan struct{}
	// take returns the events waiting, every event the kernel queued
	// before the call included where the backend reads the kernel itself.
	take() []fileEvent
	// probe says whether a writer has file open.
	probe(file string) probeResult
	// close stops the watch and waits for its goroutines.
	close() error
}

// fileEvent is one event from a backend. Names are as watched: a watched
// folder (resolved, see canonDir) joined with the name in it, or a watched
// file.
type fileEvent struct {
	name string
	op   eventOp
	// err, with opLost, is the error that lost events; nil for an overflow.
	err error
}

// maxQueuedEvents bounds the events a backend keeps in user space (the
// kernel's own default queue: fs.inotify.max_queued_events); past it they
// are dropped and reported as lost.
const maxQueuedEvents = 16384

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
		ignored:  map[string]bool{},
		loader:   cfg.Loader,
	}
	if w.loader == nil {
		w.loader = new(spec.Loader)
	}
	if len(w.paths) == 0 {
		w.paths = []string{spec.DefaultFile}
	}
	if w.clock == nil {
		w.clock = clock.RealClock{}
	}
	r := w.read()
	if r.errs != nil {
		return nil, r.errs
	}
	w.current, w.prints, w.files = r.fleet, r.prints, r.files
	var err error
	if cfg.portable {
		w.backend, err = newFsnotifyBackend()
	} else {
		w.backend, err = newNativeBackend(!cfg.noProbe)
	}
	if err != nil {
		return nil, err
	}
	if w.debounce <= 0 {
		w.debounce = DefaultDebounce
		if w.backend.closes() {
			w.debounce = closesDebounce
		}
	}
	w.conf = newConfirmer(w.backend.closes(), w.debounce)
	if err := w.watchFiles(r.fleet); err != nil {
		_ = w.backend.close()
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
// delivered to Run's fn. The caller has finished saving: a read that a
// second read at once confirms is applied, whatever the events said. It
// fails when Run is not running or ctx ends.
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
// update. It stops the watch and waits for its goroutines before returning.
func (w *FleetWatcher) Run(ctx context.Context, fn func(FleetUpdate)) error {
	defer func() { _ = w.backend.close() }()
	var timer clock.Timer
	var fire <-chan time.Time
	arm := func(d time.Duration) {
		if timer == nil {
			timer = w.clock.NewTimer(d)
		} else {
			if !timer.Stop() {
				// Fired and not received (a fake clock keeps the value):
				// drop it, or the read would come before d.
				select {
				case <-timer.C():
				default:
				}
			}
			timer.Reset(d)
		}
		fire = timer.C()
	}
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	reload := func(explicit bool) {
		v, d, ok := w.reload(fn, explicit)
		if ok {
			arm(d)
		} else if timer != nil {
			timer.Stop()
			fire = nil
		}
		if w.onReload != nil {
			w.onReload(v)
		}
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case _, ok := <-w.backend.ready():
			if !ok {
				return errors.New("watch fleet files: watcher closed")
			}
			if w.noteAll(w.backend.take(), "File event") {
				arm(w.debounce)
			}
		case <-fire:
			fire = nil
			reload(false)
		case <-w.resync:
			w.conf.event("", opLost)
			reload(false)
		case done := <-w.reloads:
			reload(true)
			close(done)
		}
	}
}

// readResult is one read of every fleet file.
type readResult struct {
	fleet  *spec.Fleet
	errs   spec.ErrorList
	prints map[string][]byte // server -> fingerprint
	files  map[string][]byte // fleet and env file -> what it gave (filePrints)
	sig    []byte
}

func (w *FleetWatcher) read() readResult {
	fleet, err := w.loader.Load(w.paths...)
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
	files, sig := filePrints(fleet, prints)
	return readResult{fleet: fleet, prints: prints, files: files, sig: sig}
}

// filePrints maps each file the fleet read to what it gave, and sums up
// the whole read in sig. A fleet file maps to a SHA-256 of the names and
// fingerprints of the servers it declares (empty, not nil, for a file that
// declares none), an env file (by its absolute path) to the variables it
// sets. sig is a SHA-256 of every server's name and fingerprint, so two
// reads agree exactly when their servers do. Servers are taken in name
// order, each name and fingerprint length-prefixed.
func filePrints(f *spec.Fleet, prints map[string][]byte) (files map[string][]byte, sig []byte) {
	files = make(map[string][]byte, len(f.Files))
	for _, file := range f.Files {
		files[file] = []byte{}
	}
	all := sha256.New()
	var buf []byte
	// With one fleet file, sig is its sum too.
	byFile := map[string]hash.Hash(nil)
	if len(f.Files) > 1 {
		byFile = make(map[string]hash.Hash, len(f.Files))
	}
	for i := range f.Servers { // sorted by name
		s := &f.Servers[i]
		name := s.Metadata.Name
		buf = appendField(appendField(buf[:0], name), prints[name])
		all.Write(buf)
		if byFile != nil {
			h := byFile[s.Source.File]
			if h == nil {
				h = sha256.New()
				byFile[s.Source.File] = h
			}
			h.Write(buf)
		}
		for _, e := range s.EnvFiles {
			files[e.Path] = e.AppendPrint([]byte{})
		}
	}
	sig = all.Sum([]byte(sigPrefix))
	if byFile == nil && len(f.Servers) > 0 {
		// The same sum as the file's own would be beside other files.
		files[f.Servers[0].Source.File] = sig[len(sigPrefix):]
	}
	for file, h := range byFile {
		files[file] = h.Sum(nil)
	}
	return files, sig
}

// sigPrefix starts the sig of a read that loaded (an error's starts
// "errors").
const sigPrefix = "fleet\n"

// appendField appends b to buf, prefixed with its length.
func appendField[T string | []byte](buf []byte, b T) []byte {
	buf = binary.BigEndian.AppendUint64(buf, uint64(len(b)))
	return append(buf, b...)
}

// noteAll notes events and says whether any of them counted.
func (w *FleetWatcher) noteAll(evs []fileEvent, msg string) bool {
	counted := false
	for _, ev := range evs {
		if w.note(ev, msg) {
			counted = true
		}
	}
	return counted
}

// note classifies one file event, logs it, and gives it to the confirmer
// when it counts; it says whether it counts.
func (w *FleetWatcher) note(ev fileEvent, msg string) bool {
	if ev.op == opLost {
		switch {
		case ev.err != nil:
			w.log.Error(ev.err, "File watch error; re-reading every fleet file")
		case ev.name == "":
			w.log.Info("File events overflowed; re-reading every fleet file")
		default:
			w.log.Info("Watched folder removed or moved; re-reading every fleet file", "folder", ev.name)
		}
		w.conf.event("", opLost)
		return true
	}
	kind := w.rel.classify(ev.name)
	if kind == nameIgnored {
		// Once per name: a log written at V(2) beside the fleet files
		// would otherwise log its own events for ever.
		if w.log.V(2).Enabled() && !w.ignored[ev.name] {
			if len(w.ignored) >= maxIgnoredLogged {
				clear(w.ignored)
			}
			w.ignored[ev.name] = true
			w.log.V(2).Info("File event ignored", "file", ev.name, "op", ev.op.String())
		}
		return false
	}
	w.log.V(1).Info(msg, "file", ev.name, "op", ev.op.String())
	switch {
	case kind == nameFolder:
		// A fleet folder created, moved or removed: what it holds now is
		// not known from events.
		w.conf.event(ev.name, opLost)
	case kind == nameFile && (ev.op == opPlaced || ev.op == opCreated || ev.op == opAppeared || ev.op == opRemoved):
		if err := w.backend.rewatch(ev.name); err != nil {
			// Its writes will not be seen: only a name event or a resync
			// reads it again.
			w.log.Error(err, "Cannot watch a fleet file's content")
		}
		w.conf.event(ev.name, ev.op)
	default:
		w.conf.event(ev.name, ev.op)
	}
	return true
}

// maxExplicitReads bounds the reads at once of one Reload whose reads keep
// differing; after them it reads again after the debounce.
const maxExplicitReads = 4

// reload reads every file and judges the read (confirmer): applies it,
// or says after how long to read again. It returns the verdict.
func (w *FleetWatcher) reload(fn func(FleetUpdate), explicit bool) (v verdict, again time.Duration, ok bool) {
	reads := 1
	if explicit {
		reads = maxExplicitReads
	}
	var r readResult
	for i := 0; i < reads; i++ {
		r = w.read()
		v = w.conf.judge(w.facts(r, explicit), w.clock.Now())
		if v.kind != verdictReread || v.after > 0 {
			break
		}
		// A second read at once confirms: the next one, if any.
		reads = max(reads, 2)
	}
	switch v.kind {
	case verdictSettled:
		w.waiting = nil
		if r.fleet != nil {
			if err := w.watchFiles(r.fleet); err != nil {
				w.log.Error(err, "Cannot watch the fleet files")
			}
		}
		w.log.V(1).Info("Fleet files re-read; no change")
		return v, 0, false
	case verdictApply:
		w.waiting = nil
		w.log.V(1).Info("Fleet files change confirmed", "why", v.why)
		w.apply(r, fn)
		return v, 0, false
	case verdictWriter:
		if !bytes.Equal(w.waiting, r.sig) {
			w.waiting = r.sig
			w.log.Info("Fleet file change waits for its writer to close the file", "files", v.files)
		}
		return v, v.after, true
	}
	w.log.V(1).Info("Fleet files differ from the fleet in force; reading again", "why", v.why, "files", v.files, "after", v.after)
	return v, max(v.after, w.debounce), true
}

// facts gathers what the confirmer judges a read by: whether it is the
// fleet in force, the changed files and their writer probes, and the
// events that arrived meanwhile (taken after the probes; see confirmer).
func (w *FleetWatcher) facts(r readResult, explicit bool) readFacts {
	f := readFacts{sig: r.sig, explicit: explicit}
	w.mu.Lock()
	f.inForce = sameAsInForce(r, w.prints, w.errs)
	inForce := w.files
	w.mu.Unlock()
	if !f.inForce && !explicit {
		f.files = w.readFiles(r, inForce)
	}
	f.arrived = w.noteAll(w.backend.take(), "File event while reading")
	return f
}

// readFiles lists the files (fleet files and env files) of read r and of
// the fleet in force, whether each changed, and, for the changed ones,
// what the writer probe finds.
// When r has errors the files it read are unknown: every file in force and
// every file with events is taken as changed.
func (w *FleetWatcher) readFiles(r readResult, inForce map[string][]byte) []readFile {
	var out []readFile
	covered := map[string]bool{}
	add := func(file string, keys []string) {
		now, present := r.files[file]
		was, wasPresent := inForce[file]
		rf := readFile{
			keys:     keys,
			changed:  r.errs != nil || present != wasPresent || !bytes.Equal(now, was),
			declares: len(now) > 0,
		}
		if rf.changed && (present || r.errs != nil) {
			rf.probe = w.backend.probe(keys[0])
		}
		for _, k := range keys {
			covered[k] = true
		}
		out = append(out, rf)
	}
	for _, file := range sortedKeys(r.files) {
		add(file, fileKeys(file))
	}
	for _, file := range sortedKeys(inForce) {
		if _, ok := r.files[file]; !ok {
			add(file, fileKeys(file))
		}
	}
	if r.errs != nil {
		for _, k := range sortedKeys(w.conf.files) {
			if !covered[k] && w.rel.classify(k) == nameFile {
				add(k, []string{k})
			}
		}
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
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
	w.current, w.prints, w.files, w.errs = r.fleet, r.prints, r.files, nil
	w.mu.Unlock()
	if err := w.watchFiles(r.fleet); err != nil {
		w.log.Error(err, "Cannot watch the fleet files")
	}
	if len(changed) == 0 && !hadErrs {
		return
	}
	w.log.Info("Fleet files changed", "servers", changed)
	fn(FleetUpdate{Fleet: r.fleet, Changed: changed})
}

// watchFiles makes the backend watch the folders that hold the files (each
// folder path, the folder of each file path and env file, and the folders
// of symlink targets) and the files themselves, and sets which event names
// count from now on (w.rel).
func (w *FleetWatcher) watchFiles(fleet *spec.Fleet) error {
	rel := relevance{files: map[string]bool{}, folders: map[string]bool{}}
	folders := map[string]bool{}
	var files []string
	addFile := func(p string) {
		for _, k := range fileKeys(p) {
			if !rel.files[k] {
				rel.files[k] = true
				files = append(files, k)
				folders[filepath.Dir(k)] = true
			}
		}
	}
	for _, p := range w.paths {
		if fi, err := os.Stat(p); err == nil && fi.IsDir() {
			c := canonDir(p)
			folders[c] = true
			rel.folders[c] = true
			continue
		}
		addFile(p)
	}
	if fleet != nil {
		for _, f := range fleet.Files {
			addFile(f)
		}
		for _, f := range fleet.EnvFiles() {
			addFile(f)
		}
	}
	w.rel = rel
	return w.backend.watch(sortedKeys(folders), files)
}

// fileKeys names a file path as events name it: its folder resolved
// (canonDir), and its symlink target's resolved path when it is a link.
func fileKeys(p string) []string {
	a := absPath(p)
	keys := []string{filepath.Join(canonDir(filepath.Dir(a)), filepath.Base(a))}
	if fi, err := os.Lstat(a); err == nil && fi.Mode()&os.ModeSymlink != 0 {
		if real, err := filepath.EvalSymlinks(a); err == nil && absPath(real) != keys[0] {
			keys = append(keys, absPath(real))
		}
	}
	return keys
}

// maxIgnoredLogged bounds the names remembered as logged ignored.
const maxIgnoredLogged = 1024

// configMapData is the name a Kubernetes ConfigMap volume swaps atomically
// (a symlink to the folder of the new files) when its content changes.
const configMapData = "..data"

// nameKind is what an event's name is to the fleet.
type nameKind uint8

const (
	nameIgnored nameKind = iota // cannot change what spec.Load reads
	nameFile                    // a fleet file, file path, symlink target or fleet folder file
	nameFolder                  // a fleet folder itself
	nameSwap                    // a ConfigMap's "..data" swap
)

// relevance says which event names can change what spec.Load reads. Names
// are resolved paths (see canonDir): backends watch resolved folders.
type relevance struct {
	files   map[string]bool // fleet files, file paths, env files and symlink targets
	folders map[string]bool // fleet folder paths
}

// classify says what name is to the fleet.
func (rel relevance) classify(name string) nameKind {
	name = filepath.Clean(name)
	base := filepath.Base(name)
	switch {
	case base == configMapData:
		return nameSwap
	case rel.folders[name]:
		return nameFolder
	case rel.files[name], rel.folders[filepath.Dir(name)] && loaderReads(base):
		return nameFile
	}
	return nameIgnored
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

// fingerprints maps each server to its full content (every field but its
// source position) and what its env files set (spec.Fleet.Fingerprint), so
// any change, not only a spec-hash change, is seen.
func fingerprints(f *spec.Fleet) map[string][]byte {
	m := make(map[string][]byte, len(f.Servers))
	for i := range f.Servers {
		m[f.Servers[i].Metadata.Name] = f.Fingerprint(i)
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
