package reconciler

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/go-logr/logr/testr"
	"github.com/google/go-cmp/cmp"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/procfleet/procfleet/spec"
)

// serverYAML is one fleet document.
func serverYAML(name string, args ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: procfleet.dev/v1alpha1\nkind: Server\nmetadata:\n  name: %s\nspec:\n  command: [/bin/sleep]\n", name)
	if len(args) > 0 {
		q := make([]string, len(args))
		for i, a := range args {
			q[i] = strconv.Quote(a)
		}
		fmt.Fprintf(&b, "  args: [%s]\n", strings.Join(q, ", "))
	}
	return b.String()
}

func fleetYAML(docs ...string) string { return strings.Join(docs, "---\n") }

// recorder collects updates from a running FleetWatcher.
type recorder struct {
	mu      sync.Mutex
	updates []FleetUpdate
	signal  chan struct{}
}

func (r *recorder) add(u FleetUpdate) {
	r.mu.Lock()
	r.updates = append(r.updates, u)
	r.mu.Unlock()
	select {
	case r.signal <- struct{}{}:
	default:
	}
}

// waitUntil waits for an update that satisfies ok, and returns every update
// seen up to it.
func (r *recorder) waitUntil(t *testing.T, what string, ok func(FleetUpdate) bool) []FleetUpdate {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		r.mu.Lock()
		for i, u := range r.updates {
			if ok(u) {
				got := append([]FleetUpdate(nil), r.updates[:i+1]...)
				r.updates = r.updates[i+1:]
				r.mu.Unlock()
				return got
			}
		}
		r.mu.Unlock()
		select {
		case <-r.signal:
		case <-timeout:
			t.Fatalf("timed out waiting for an update: %s", what)
		}
	}
}

func startWatcher(t *testing.T, paths ...string) (*FleetWatcher, *recorder) {
	t.Helper()
	w, err := NewFleetWatcher(FleetWatcherConfig{Paths: paths, Log: testr.New(t)})
	if err != nil {
		t.Fatalf("NewFleetWatcher: %v", err)
	}
	return w, runWatcher(t, w)
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func atomicSave(t *testing.T, path, content string) {
	t.Helper()
	tmp := path + ".tmp-save"
	writeFile(t, tmp, content)
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func vimSave(t *testing.T, path, content string) {
	t.Helper()
	if err := os.Rename(path, path+"~"); err != nil {
		t.Fatal(err)
	}
	writeFile(t, path, content)
	if err := os.Remove(path + "~"); err != nil {
		t.Fatal(err)
	}
}

func deleteRecreate(t *testing.T, path, content string) {
	t.Helper()
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	writeFile(t, path, content)
}

func changed(name string) func(FleetUpdate) bool {
	return func(u FleetUpdate) bool {
		for _, n := range u.Changed {
			if n == name {
				return true
			}
		}
		return false
	}
}

// TestFleetWatcherSavesWithoutChangeChangeNothing saves the file with
// identical content in three editor styles, then changes one server in a
// second file as a sentinel: every update up to the sentinel's must name
// only the sentinel server (updates are ordered, so the saves were seen).
func TestFleetWatcherSavesWithoutChangeChangeNothing(t *testing.T) {
	saves := map[string]func(*testing.T, string, string){
		"atomic":          atomicSave,
		"vim":             vimSave,
		"delete-recreate": deleteRecreate,
		"in-place":        writeFile,
	}
	for name, save := range saves {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			main := filepath.Join(dir, "procfleet.yaml")
			other := filepath.Join(dir, "other.yaml")
			content := fleetYAML(serverYAML("api", "100"), serverYAML("db", "100"))
			writeFile(t, main, content)
			writeFile(t, other, serverYAML("sentinel", "1"))
			_, r := startWatcher(t, main, other)

			save(t, main, content)
			save(t, main, content)
			atomicSave(t, other, serverYAML("sentinel", "2"))

			for _, u := range r.waitUntil(t, "sentinel changed", changed("sentinel")) {
				for _, n := range u.Changed {
					if n != "sentinel" {
						t.Errorf("update names %q changed after a %s save of identical content", n, name)
					}
				}
			}
		})
	}
}

func TestFleetWatcherReportsChangedServersOnly(t *testing.T) {
	dir := t.TempDir()
	main := filepath.Join(dir, "procfleet.yaml")
	writeFile(t, main, fleetYAML(serverYAML("api", "100"), serverYAML("db", "100"), serverYAML("web", "100")))
	w, r := startWatcher(t, main)

	// api's args change, db is removed, cache is added, web is untouched.
	atomicSave(t, main, fleetYAML(serverYAML("api", "200"), serverYAML("web", "100"), serverYAML("cache", "1")))
	got := r.waitUntil(t, "api changed", changed("api"))
	last := got[len(got)-1]
	if diff := cmp.Diff([]string{"api", "cache", "db"}, last.Changed); diff != "" {
		t.Errorf("Changed (-want +got):\n%s", diff)
	}
	if _, ok := last.Fleet.Get("db"); ok {
		t.Errorf("db still in the fleet after removal")
	}
	fleet, errs := w.Fleet()
	if len(errs) != 0 || len(fleet.Servers) != 3 {
		t.Errorf("Fleet() = %d servers, errors %v; want 3, none", len(fleet.Servers), errs)
	}
}

func TestFleetWatcherKeepsLastGoodFleetOnBadFile(t *testing.T) {
	dir := t.TempDir()
	main := filepath.Join(dir, "procfleet.yaml")
	writeFile(t, main, fleetYAML(serverYAML("api", "100"), serverYAML("db", "100")))
	w, r := startWatcher(t, main)

	// Broken YAML on line 6, then an unknown field: both keep the last good
	// fleet and report file and line.
	atomicSave(t, main, serverYAML("api", "100")+"  args: [unterminated\n")
	got := r.waitUntil(t, "errors", func(u FleetUpdate) bool { return len(u.Errors) > 0 })
	u := got[len(got)-1]
	if len(u.Changed) != 0 {
		t.Errorf("a bad file changed servers: %v", u.Changed)
	}
	if n := len(u.Fleet.Servers); n != 2 {
		t.Errorf("fleet in force has %d servers, want the last good 2", n)
	}
	fe := u.Errors[0]
	if fe.File != main || fe.Line == 0 {
		t.Errorf("error %q does not name the file and line", fe.Error())
	}
	if fleet, errs := w.Fleet(); len(errs) == 0 || len(fleet.Servers) != 2 {
		t.Errorf("Fleet() = %d servers, %d errors; want 2 and the errors", len(fleet.Servers), len(errs))
	}

	atomicSave(t, main, fleetYAML(serverYAML("api", "100"), serverYAML("db", "100"))+"  colour: blue\n")
	got = r.waitUntil(t, "unknown field error", func(u FleetUpdate) bool {
		return len(u.Errors) > 0 && strings.Contains(u.Errors.Error(), "colour")
	})
	if u := got[len(got)-1]; len(u.Fleet.Servers) != 2 {
		t.Errorf("fleet in force has %d servers, want the last good 2", len(u.Fleet.Servers))
	}

	// Deleting the file is an error too, never "remove every server".
	if err := os.Remove(main); err != nil {
		t.Fatal(err)
	}
	r.waitUntil(t, "missing-file error", func(u FleetUpdate) bool {
		return len(u.Errors) > 0 && len(u.Fleet.Servers) == 2 && strings.Contains(u.Errors.Error(), "no such file")
	})

	// Fixed, with db's args changed: converges, errors cleared.
	writeFile(t, main, fleetYAML(serverYAML("api", "100"), serverYAML("db", "300")))
	got = r.waitUntil(t, "fixed", func(u FleetUpdate) bool { return len(u.Errors) == 0 })
	u = got[len(got)-1]
	if diff := cmp.Diff([]string{"db"}, u.Changed); diff != "" {
		t.Errorf("Changed after the fix (-want +got):\n%s", diff)
	}
	if _, errs := w.Fleet(); len(errs) != 0 {
		t.Errorf("errors kept after the fix: %v", errs)
	}
}

func TestFleetWatcherFollowsSymlinksAndFolders(t *testing.T) {
	project := t.TempDir()
	elsewhere := t.TempDir()
	target := filepath.Join(elsewhere, "real.yaml")
	writeFile(t, target, serverYAML("api", "100"))
	link := filepath.Join(project, "procfleet.yaml")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	folder := filepath.Join(project, "fleet.d")
	if err := os.Mkdir(folder, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(folder, "a.yaml"), serverYAML("a", "1"))
	_, r := startWatcher(t, link, folder)

	// The target is saved atomically in its own folder: only a watch on
	// that folder sees it.
	atomicSave(t, target, serverYAML("api", "200"))
	r.waitUntil(t, "api changed through the symlink", changed("api"))

	// A new file in the fleet folder adds its server; a non-YAML file does not.
	writeFile(t, filepath.Join(folder, "notes.txt"), "not a fleet file")
	writeFile(t, filepath.Join(folder, "b.yml"), serverYAML("b", "1"))
	r.waitUntil(t, "b added", changed("b"))

	// Resync re-reads without any event; nothing changed, so nothing is sent
	// -- prove it with a real change afterwards.
	if err := os.Remove(filepath.Join(folder, "a.yaml")); err != nil {
		t.Fatal(err)
	}
	got := r.waitUntil(t, "a removed", changed("a"))
	if u := got[len(got)-1]; func() bool { _, ok := u.Fleet.Get("a"); return ok }() {
		t.Errorf("a still declared after its file was removed")
	}
}

func TestNewFleetWatcherRejectsABadFleet(t *testing.T) {
	dir := t.TempDir()
	main := filepath.Join(dir, "procfleet.yaml")
	writeFile(t, main, "apiVersion: procfleet.dev/v1alpha1\nkind: Server\nmetadata: {name: x}\nspec: {comand: [a]}\n")
	_, err := NewFleetWatcher(FleetWatcherConfig{Paths: []string{main}, Log: testr.New(t)})
	var list spec.ErrorList
	if err == nil || !asList(err, &list) || list[0].Line == 0 {
		t.Fatalf("NewFleetWatcher on a bad file: err = %v, want an ErrorList with lines", err)
	}
}

func asList(err error, list *spec.ErrorList) bool {
	l := asErrorList(err)
	*list = l
	return len(l) > 0
}

// TestFleetWatcherInPlaceSaveCaughtMidWayChangesNothing reads a file in the
// instant an in-place save (O_TRUNC, then write) has emptied it, or written
// half of it. The kernel cannot be made to schedule the watcher's read into
// that instant on demand, so the test empties the file and restores it from
// the watcher's afterRead seam: the first read sees the bad content, the
// next ones the saved file. Nothing may be reported removed or changed.
func TestFleetWatcherInPlaceSaveCaughtMidWayChangesNothing(t *testing.T) {
	content := fleetYAML(serverYAML("api", "100"), serverYAML("db", "100"))
	for name, midway := range map[string]string{
		"truncated": "",
		"partial":   serverYAML("api", "100"),
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			main := filepath.Join(dir, "procfleet.yaml")
			other := filepath.Join(dir, "other.yaml")
			writeFile(t, main, content)
			writeFile(t, other, serverYAML("sentinel", "1"))
			w, err := NewFleetWatcher(FleetWatcherConfig{Paths: []string{main, other}, Log: testr.New(t)})
			if err != nil {
				t.Fatalf("NewFleetWatcher: %v", err)
			}
			var once sync.Once
			restored := make(chan struct{})
			w.afterRead = func() {
				once.Do(func() {
					writeFile(t, main, content)
					close(restored)
				})
			}
			r := runWatcher(t, w)

			writeFile(t, main, midway) // the save's truncate (and part of its write)
			select {
			case <-restored:
			case <-time.After(10 * time.Second):
				t.Fatal("the watcher did not read the files within 10 s")
			}
			atomicSave(t, other, serverYAML("sentinel", "2"))
			for _, u := range r.waitUntil(t, "sentinel changed", changed("sentinel")) {
				if diff := cmp.Diff([]string{"sentinel"}, u.Changed); diff != "" {
					t.Errorf("update after an in-place save of identical content (-want +got):\n%s", diff)
				}
				if _, ok := u.Fleet.Get("db"); !ok {
					t.Errorf("db left the fleet during an in-place save of identical content")
				}
			}
		})
	}
}

// TestFleetWatcherRemovalIsAppliedOnceConfirmed checks that confirming reads
// do not hold a real removal back.
func TestFleetWatcherRemovalIsAppliedOnceConfirmed(t *testing.T) {
	dir := t.TempDir()
	main := filepath.Join(dir, "procfleet.yaml")
	writeFile(t, main, fleetYAML(serverYAML("api", "100"), serverYAML("db", "100")))
	w, r := startWatcher(t, main)
	writeFile(t, main, serverYAML("api", "100"))
	got := r.waitUntil(t, "db removed", changed("db"))
	if diff := cmp.Diff([]string{"db"}, got[len(got)-1].Changed); diff != "" {
		t.Errorf("Changed (-want +got):\n%s", diff)
	}
	if fleet, _ := w.Fleet(); len(fleet.Servers) != 1 {
		t.Errorf("Fleet() has %d servers after db's removal, want 1", len(fleet.Servers))
	}
}

// logCapture keeps every log line of a funcr logger (and passes it on to
// t.Log), so a test can check what the watcher saw.
type logCapture struct {
	t     *testing.T
	mu    sync.Mutex
	lines []string
}

func newLogCapture(t *testing.T, verbosity int) (*logCapture, logr.Logger) {
	c := &logCapture{t: t}
	return c, funcr.New(c.add, funcr.Options{Verbosity: verbosity})
}

func (c *logCapture) add(prefix, args string) {
	c.mu.Lock()
	c.lines = append(c.lines, args)
	c.mu.Unlock()
	c.t.Log(prefix, args)
}

// matching returns the lines holding every one of parts.
func (c *logCapture) matching(parts ...string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
next:
	for _, l := range c.lines {
		for _, p := range parts {
			if !strings.Contains(l, p) {
				continue next
			}
		}
		out = append(out, l)
	}
	return out
}

// runWatcher runs w until the test ends.
func runWatcher(t *testing.T, w *FleetWatcher) *recorder {
	t.Helper()
	r := &recorder{signal: make(chan struct{}, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx, r.add) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return r
}

// TestFleetWatcherEventFilter checks which events count and which of those
// make the next differing read wait for a confirming read. It classifies
// events on a real layout (a file, a fleet folder, a folder reached through
// a symlink, a file symlinked from elsewhere) without running the watcher.
func TestFleetWatcherEventFilter(t *testing.T) {
	project := t.TempDir()
	elsewhere := t.TempDir()
	main := filepath.Join(project, "procfleet.yaml")
	writeFile(t, main, serverYAML("api", "1"))
	folder := filepath.Join(project, "fleet.d")
	realFolder := filepath.Join(elsewhere, "conf.d")
	linkFolder := filepath.Join(project, "conf.d")
	for _, d := range []string{folder, realFolder} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(realFolder, linkFolder); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(folder, "a.yaml"), serverYAML("a", "1"))
	writeFile(t, filepath.Join(realFolder, "c.yaml"), serverYAML("c", "1"))
	target := filepath.Join(elsewhere, "real.yaml")
	writeFile(t, target, serverYAML("t", "1"))
	link := filepath.Join(project, "extra.yaml")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	w, err := NewFleetWatcher(FleetWatcherConfig{Paths: []string{main, folder, linkFolder, link}, Log: testr.New(t)})
	if err != nil {
		t.Fatalf("NewFleetWatcher: %v", err)
	}
	t.Cleanup(func() { _ = w.watcher.Close() })

	const ignored, safe, unsafe = "ignored", "safe", "unsafe"
	for _, tc := range []struct {
		name string
		op   fsnotify.Op
		want string
	}{
		{main, fsnotify.Create, safe}, // rename into place
		{main, fsnotify.Chmod, safe},
		{main, fsnotify.Write, unsafe}, // in-place save
		{main, fsnotify.Remove, safe},  // missing: a load error, never applied fast
		{main, fsnotify.Rename, safe},
		{filepath.Join(project, "procfleet.log"), fsnotify.Write, ignored},
		{filepath.Join(project, "procfleet.yaml.tmp-save"), fsnotify.Create, ignored},
		{filepath.Join(project, "procfleet.yaml~"), fsnotify.Create, ignored},
		{filepath.Join(project, ".procfleet.yaml.swp"), fsnotify.Write, ignored},
		{filepath.Join(project, "other.yaml"), fsnotify.Create, ignored}, // not a fleet file: project is no fleet folder
		{filepath.Join(folder, "b.yaml"), fsnotify.Create, safe},
		{filepath.Join(folder, "b.yml"), fsnotify.Write, unsafe},
		{filepath.Join(folder, "a.yaml"), fsnotify.Remove, unsafe}, // its servers would go
		{filepath.Join(folder, "a.yaml"), fsnotify.Rename, unsafe}, // vim's backup rename
		{filepath.Join(folder, ".a.yaml.swp"), fsnotify.Write, ignored},
		{filepath.Join(folder, ".hidden.yaml"), fsnotify.Create, ignored},
		{filepath.Join(folder, "notes.txt"), fsnotify.Write, ignored},
		{filepath.Join(folder, "a.yaml.bak"), fsnotify.Create, ignored},
		{folder, fsnotify.Remove, unsafe},
		{filepath.Join(realFolder, "d.yaml"), fsnotify.Create, safe}, // named through the target
		{filepath.Join(linkFolder, "d.yaml"), fsnotify.Write, unsafe},
		{filepath.Join(realFolder, "d.txt"), fsnotify.Create, ignored},
		{target, fsnotify.Create, safe},
		{target, fsnotify.Write, unsafe},
		{filepath.Join(elsewhere, "unrelated.yaml"), fsnotify.Write, ignored},
		{filepath.Join(project, configMapData), fsnotify.Create, safe},
	} {
		rel, err := filepath.Rel(filepath.Dir(project), tc.name)
		if err != nil {
			t.Fatal(err)
		}
		t.Run(fmt.Sprintf("%s %s", rel, tc.op), func(t *testing.T) {
			w.win = window{}
			counts := w.note(fsnotify.Event{Name: tc.name, Op: tc.op}, "File event")
			got := ignored
			if counts {
				got = safe
				if !w.win.fastEligible() {
					got = unsafe
				}
			}
			if got != tc.want {
				t.Errorf("event %s %s is %s, want %s", tc.op, tc.name, got, tc.want)
			}
		})
	}
}

func TestDeclaresEveryFile(t *testing.T) {
	server := func(name, file string) spec.Server {
		s := spec.Server{Metadata: spec.ObjectMeta{Name: name}}
		s.Source.File = file
		return s
	}
	for _, tc := range []struct {
		name string
		r    readResult
		want bool
	}{
		{"every file declares", readResult{fleet: &spec.Fleet{
			Servers: []spec.Server{server("a", "x.yaml"), server("b", "y.yaml")}, Files: []string{"x.yaml", "y.yaml"}}}, true},
		{"an empty file", readResult{fleet: &spec.Fleet{
			Servers: []spec.Server{server("a", "x.yaml")}, Files: []string{"x.yaml", "y.yaml"}}}, false},
		{"no servers at all", readResult{fleet: &spec.Fleet{Files: []string{"x.yaml"}}}, false},
		{"errors", readResult{errs: spec.ErrorList{{File: "x.yaml", Message: "bad"}}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := declaresEveryFile(tc.r); got != tc.want {
				t.Errorf("declaresEveryFile = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestFleetWatcherIgnoresUnrelatedFiles runs the watcher with its log
// written to a file beside procfleet.yaml (each line an event in the
// watched folder: it used to feed itself) and writes editor leftovers and
// non-YAML files in the fleet folder; then changes a sentinel. Events are
// delivered in order, so by the sentinel's update every earlier event was
// seen: none of the unrelated ones may have counted.
func TestFleetWatcherIgnoresUnrelatedFiles(t *testing.T) {
	dir := t.TempDir()
	main := filepath.Join(dir, "procfleet.yaml")
	folder := filepath.Join(dir, "fleet.d")
	if err := os.Mkdir(folder, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, main, serverYAML("api", "1"))
	writeFile(t, filepath.Join(folder, "sentinel.yaml"), serverYAML("sentinel", "1"))
	logFile, err := os.OpenFile(filepath.Join(dir, "procfleet.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = logFile.Close() })
	c := &logCapture{t: t}
	log := funcr.New(func(prefix, args string) {
		c.add(prefix, args)
		_, _ = fmt.Fprintln(logFile, prefix, args)
	}, funcr.Options{Verbosity: 2})
	w, err := NewFleetWatcher(FleetWatcherConfig{Paths: []string{main, folder}, Log: log})
	if err != nil {
		t.Fatalf("NewFleetWatcher: %v", err)
	}
	r := runWatcher(t, w)

	unrelated := []string{
		filepath.Join(dir, "notes.txt"),
		filepath.Join(dir, ".procfleet.yaml.swp"),
		filepath.Join(dir, "procfleet.yaml~"),
		filepath.Join(folder, "README.md"),
		filepath.Join(folder, ".hidden.yaml"),
		filepath.Join(folder, "sentinel.yaml.orig"),
	}
	for _, f := range unrelated {
		writeFile(t, f, "x")
	}
	atomicSave(t, filepath.Join(folder, "sentinel.yaml"), serverYAML("sentinel", "2"))
	for _, u := range r.waitUntil(t, "sentinel changed", changed("sentinel")) {
		if diff := cmp.Diff([]string{"sentinel"}, u.Changed); diff != "" {
			t.Errorf("update (-want +got):\n%s", diff)
		}
	}
	for _, f := range append(unrelated, logFile.Name()) {
		for _, msg := range []string{`"File event"`, `"File event while reading"`} {
			if got := c.matching(msg, strconv.Quote(f)); len(got) > 0 {
				t.Errorf("an event on %s counted: %q", f, got)
			}
		}
	}
	for _, f := range unrelated {
		if got := c.matching(`"File event ignored"`, strconv.Quote(f)); len(got) == 0 {
			t.Errorf("no ignored event logged for %s", f)
		}
	}
	if got := c.matching(`"File event ignored"`, strconv.Quote(logFile.Name())); len(got) == 0 {
		t.Errorf("no ignored event logged for the log file")
	}
}

// TestFleetWatcherConfirmsOnlyWhatCanBeHalfWritten drives the debounce with
// a fake clock, so "applied after one debounce" and "waits for a second"
// are told apart without timing: the fake timer fires only when stepped.
// A whole file put into place (rename, as editors' atomic saves and the
// bench do) is applied at the first read; an in-place write or a file
// removed from a fleet folder waits for the confirming read.
func TestFleetWatcherConfirmsOnlyWhatCanBeHalfWritten(t *testing.T) {
	for _, tc := range []struct {
		name    string
		change  func(t *testing.T, main, folder string)
		want    []string
		confirm bool
	}{
		{"atomic save", func(t *testing.T, main, _ string) {
			atomicSave(t, main, fleetYAML(serverYAML("api", "200"), serverYAML("db", "100")))
		}, []string{"api"}, false},
		{"new folder file renamed into place", func(t *testing.T, _, folder string) {
			tmp := filepath.Join(folder, ".c.yaml.tmp")
			writeFile(t, tmp, serverYAML("c", "1"))
			if err := os.Rename(tmp, filepath.Join(folder, "c.yaml")); err != nil {
				t.Fatal(err)
			}
		}, []string{"c"}, false},
		{"in-place write", func(t *testing.T, main, _ string) {
			// One write of the same length, so exactly one event: the
			// file is never empty, but a Write cannot be told from the
			// first of several.
			f, err := os.OpenFile(main, os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if _, err := f.WriteAt([]byte(fleetYAML(serverYAML("api", "200"), serverYAML("db", "100"))), 0); err != nil {
				t.Fatal(err)
			}
		}, []string{"api"}, true},
		{"folder file removed", func(t *testing.T, _, folder string) {
			if err := os.Remove(filepath.Join(folder, "b.yaml")); err != nil {
				t.Fatal(err)
			}
		}, []string{"b"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			main := filepath.Join(dir, "procfleet.yaml")
			folder := filepath.Join(dir, "fleet.d")
			if err := os.Mkdir(folder, 0o755); err != nil {
				t.Fatal(err)
			}
			writeFile(t, main, fleetYAML(serverYAML("api", "100"), serverYAML("db", "100")))
			writeFile(t, filepath.Join(folder, "b.yaml"), serverYAML("b", "1"))
			fc := clocktesting.NewFakeClock(time.Now())
			w, err := NewFleetWatcher(FleetWatcherConfig{Paths: []string{main, folder}, Log: testr.New(t), Clock: fc})
			if err != nil {
				t.Fatalf("NewFleetWatcher: %v", err)
			}
			r := runWatcher(t, w)

			tc.change(t, main, folder)
			waitFor(t, "the debounce timer", fc.HasWaiters)
			fc.Step(DefaultDebounce)
			if tc.confirm {
				// The read found a change and armed the timer again for
				// the confirming read; nothing may have been applied.
				waitFor(t, "the confirming read's timer", fc.HasWaiters)
				r.mu.Lock()
				early := append([]FleetUpdate(nil), r.updates...)
				r.mu.Unlock()
				if len(early) > 0 {
					t.Fatalf("applied before the confirming read: %+v", early)
				}
				fc.Step(DefaultDebounce)
			}
			got := r.waitUntil(t, "the change", func(FleetUpdate) bool { return true })
			if diff := cmp.Diff(tc.want, got[0].Changed); diff != "" {
				t.Errorf("Changed (-want +got):\n%s", diff)
			}
			if !tc.confirm && fc.HasWaiters() {
				t.Errorf("a confirming read is still armed after a whole file was put into place")
			}
		})
	}
}

// TestFleetWatcherEmptiedFileWaitsLonger: a fleet file truncated in place
// (what an in-place save looks like before its write) declares no server.
// Confirmed by a second read it would prune that file's servers, which a
// writer stalled on a loaded machine made happen in the soak; such a read
// must stay the same for emptyFileConfirms more debounces before it is
// applied. The fake clock tells "not yet" from "applied" without timing.
func TestFleetWatcherEmptiedFileWaitsLonger(t *testing.T) {
	dir := t.TempDir()
	folder := filepath.Join(dir, "fleet.d")
	if err := os.Mkdir(folder, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(folder, "a.yaml"), serverYAML("a", "1"))
	writeFile(t, filepath.Join(folder, "b.yaml"), serverYAML("b", "1"))
	fc := clocktesting.NewFakeClock(time.Now())
	w, err := NewFleetWatcher(FleetWatcherConfig{Paths: []string{folder}, Log: testr.New(t), Clock: fc})
	if err != nil {
		t.Fatalf("NewFleetWatcher: %v", err)
	}
	r := runWatcher(t, w)

	if err := os.Truncate(filepath.Join(folder, "b.yaml"), 0); err != nil {
		t.Fatal(err)
	}
	// The first read, the usual confirming read, then emptyFileConfirms
	// more: none may apply the empty file.
	for i := 0; i < 2+emptyFileConfirms; i++ {
		updates := func() []FleetUpdate {
			r.mu.Lock()
			defer r.mu.Unlock()
			return append([]FleetUpdate(nil), r.updates...)
		}
		waitFor(t, "the watcher's timer or an update", func() bool { return fc.HasWaiters() || len(updates()) > 0 })
		if early := updates(); len(early) > 0 {
			t.Fatalf("the emptied file was applied after %d debounces, want %d: %+v", i, 2+emptyFileConfirms, early)
		}
		fc.Step(DefaultDebounce)
	}
	got := r.waitUntil(t, "b removed", changed("b"))
	if diff := cmp.Diff([]string{"b"}, got[len(got)-1].Changed); diff != "" {
		t.Errorf("Changed (-want +got):\n%s", diff)
	}
}

// TestFleetWatcherOverflowRereadsEverything makes the kernel's inotify
// queue overflow for real: the watcher's goroutine is held inside a read
// (the afterRead seam), so nothing drains the queue while more files than
// fs.inotify.max_queued_events are created in the watched folder (distinct
// names: inotify merges identical consecutive events). The fleet file is
// changed after that, so its event is dropped. Those files are not fleet
// files and their events are ignored; only the overflow can make the
// watcher read the change.
func TestFleetWatcherOverflowRereadsEverything(t *testing.T) {
	b, err := os.ReadFile("/proc/sys/fs/inotify/max_queued_events")
	if err != nil {
		t.Skipf("no inotify queue limit to overflow: %v", err)
	}
	limit, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("max_queued_events %q: %v", b, err)
	}
	if limit > 1<<18 {
		t.Skipf("fs.inotify.max_queued_events is %d: too many files to create to overflow it", limit)
	}
	// fsnotify may hold one read's worth of events (a 64 KiB buffer, 32
	// bytes an event with these names) beside the kernel's queue.
	files := limit + 65536/32 + 1024

	dir := t.TempDir()
	main := filepath.Join(dir, "procfleet.yaml")
	writeFile(t, main, fleetYAML(serverYAML("api", "100"), serverYAML("db", "100")))
	logs, log := newLogCapture(t, 1)
	w, err := NewFleetWatcher(FleetWatcherConfig{Paths: []string{main}, Log: log})
	if err != nil {
		t.Fatalf("NewFleetWatcher: %v", err)
	}
	var hold atomic.Bool
	held, release := make(chan struct{}), make(chan struct{})
	var releaseOnce sync.Once
	unblock := func() { releaseOnce.Do(func() { close(release) }) }
	w.afterRead = func() {
		if hold.CompareAndSwap(true, false) {
			close(held)
			<-release
		}
	}
	r := runWatcher(t, w)
	t.Cleanup(unblock) // runs before runWatcher's (last registered, first run), which waits for Run

	hold.Store(true)
	w.Resync()
	select {
	case <-held:
	case <-time.After(10 * time.Second):
		t.Fatal("the watcher did not read the files within 10 s")
	}
	for i := range files {
		f, err := os.OpenFile(filepath.Join(dir, fmt.Sprintf("junk-%06d.log", i)), os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			unblock()
			t.Fatal(err)
		}
		_ = f.Close()
	}
	atomicSave(t, main, fleetYAML(serverYAML("api", "200"), serverYAML("db", "100")))
	unblock()

	got := r.waitUntil(t, "api changed after the overflow", changed("api"))
	if diff := cmp.Diff([]string{"api"}, got[len(got)-1].Changed); diff != "" {
		t.Errorf("Changed (-want +got):\n%s", diff)
	}
	if len(logs.matching(`"File events overflowed`)) == 0 {
		t.Errorf("fsnotify.ErrEventOverflow was not seen (%d files created, max_queued_events %d)", files, limit)
	}
	for _, msg := range []string{`"File event"`, `"File event while reading"`} {
		if got := logs.matching(msg, strconv.Quote(main)); len(got) > 0 {
			t.Errorf("the fleet file's event was delivered, so the test proves nothing about the overflow: %q", got)
		}
	}
}

// BenchmarkFleetWatcherSaveToUpdate measures the watcher's share of the
// edit-to-Ready target: from an atomic save (write a temp file, rename it
// over the fleet file, as editors and the bench do) of a 100-server fleet
// with one server's args changed, to the FleetUpdate naming that server.
func BenchmarkFleetWatcherSaveToUpdate(b *testing.B) {
	dir := b.TempDir()
	main := filepath.Join(dir, "procfleet.yaml")
	fleet := func(gen int) []byte {
		docs := make([]string, 100)
		for i := range docs {
			arg := "1"
			if i == 50 {
				arg = strconv.Itoa(gen)
			}
			docs[i] = serverYAML(fmt.Sprintf("s%03d", i), arg)
		}
		return []byte(fleetYAML(docs...))
	}
	save := func(gen int) {
		tmp := main + ".tmp"
		if err := os.WriteFile(tmp, fleet(gen), 0o644); err != nil {
			b.Fatal(err)
		}
		if err := os.Rename(tmp, main); err != nil {
			b.Fatal(err)
		}
	}
	save(0)
	w, err := NewFleetWatcher(FleetWatcherConfig{Paths: []string{main}, Log: logr.Discard()})
	if err != nil {
		b.Fatal(err)
	}
	updates := make(chan FleetUpdate, 16)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx, func(u FleetUpdate) { updates <- u }) }()
	b.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			b.Errorf("Run: %v", err)
		}
	})
	gen := 0
	for b.Loop() {
		gen++
		save(gen)
		select {
		case u := <-updates:
			if len(u.Changed) != 1 || u.Changed[0] != "s050" {
				b.Fatalf("update names %v, want s050", u.Changed)
			}
		case <-time.After(10 * time.Second):
			b.Fatal("no update within 10 s of a save")
		}
	}
}

// TestFleetWatcherFollowsConfigMapSwap updates a fleet file the way the
// kubelet updates a ConfigMap volume: the files live in a timestamped
// folder, "..data" links to it, the fleet file links through "..data"; an
// update writes a new timestamped folder, links "..data_tmp" to it, renames
// that over "..data" and removes the old folder. Only "..data" and the old
// target's removal count among those events.
func TestFleetWatcherFollowsConfigMapSwap(t *testing.T) {
	mount := t.TempDir()
	version := func(name, content string) {
		t.Helper()
		dir := filepath.Join(mount, name)
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(dir, "procfleet.yaml"), content)
	}
	version("..2026_11_30_08_00_00.1", fleetYAML(serverYAML("api", "100"), serverYAML("db", "100")))
	if err := os.Symlink("..2026_11_30_08_00_00.1", filepath.Join(mount, configMapData)); err != nil {
		t.Fatal(err)
	}
	main := filepath.Join(mount, "procfleet.yaml")
	if err := os.Symlink(filepath.Join(configMapData, "procfleet.yaml"), main); err != nil {
		t.Fatal(err)
	}
	w, r := startWatcher(t, main)

	version("..2026_11_30_08_01_00.2", fleetYAML(serverYAML("api", "200"), serverYAML("db", "100")))
	tmp := filepath.Join(mount, "..data_tmp")
	if err := os.Symlink("..2026_11_30_08_01_00.2", tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(mount, configMapData)); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(mount, "..2026_11_30_08_00_00.1")); err != nil {
		t.Fatal(err)
	}
	got := r.waitUntil(t, "api changed through the ..data swap", changed("api"))
	if diff := cmp.Diff([]string{"api"}, got[len(got)-1].Changed); diff != "" {
		t.Errorf("Changed (-want +got):\n%s", diff)
	}
	if fleet, errs := w.Fleet(); len(errs) != 0 || len(fleet.Servers) != 2 {
		t.Errorf("Fleet() = %d servers, errors %v; want 2, none", len(fleet.Servers), errs)
	}
}
