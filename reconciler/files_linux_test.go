package reconciler

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// watcherModes: Linux's own watch (raw inotify) with and without the
// writer probe, and the portable one (fsnotify) forced.
var watcherModes = []watcherMode{
	{name: "inotify", closes: true},
	{name: "inotify-noprobe", noProbe: true, closes: true},
	{name: "fsnotify", portable: true},
}

// TestFleetWatcherBusyNeighbourReachesNoOne writes 4 MiB, in 16,384 writes,
// to a log file beside the fleet file while the watcher runs: the kernel
// must not deliver one event for those writes (the folder watch asks for
// names only). The file's creation is one event. A change of the fleet
// file afterwards is still seen.
func TestFleetWatcherBusyNeighbourReachesNoOne(t *testing.T) {
	dir := t.TempDir()
	main := filepath.Join(dir, "procfleet.yaml")
	writeFile(t, main, serverYAML("api", "1"))
	w, r := startWatcher(t, main)
	b, ok := w.backend.(*inotifyBackend)
	if !ok {
		t.Fatalf("the watcher's backend is %T, want inotify", w.backend)
	}

	before := b.kernelEvents.Load()
	f, err := os.OpenFile(filepath.Join(dir, "app.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	line := []byte(strings.Repeat("x", 255) + "\n")
	for range 16384 {
		if _, err := f.Write(line); err != nil {
			t.Fatal(err)
		}
	}
	atomicSave(t, main, serverYAML("api", "2"))
	r.waitUntil(t, "api changed", changed("api"))
	// Events come in order, so the update means every event of the
	// writes was read. The log file's creation is one event; the save is
	// five (temp file created, moved from, moved into place, and the
	// replaced inode's attribute change and watch removal). Without the
	// filter the writes alone were thousands.
	if n := b.kernelEvents.Load() - before; n > 8 {
		t.Errorf("the kernel delivered %d events for a 4 MiB neighbour and one atomic save, want at most 8", n)
	}
}

// TestInotifyProbe asks the writer probe about real files: closed, open
// for writing (O_WRONLY, O_RDWR), open for reading only, replaced by
// another inode since its content watch was added, not watched, and with
// probes turned off.
func TestInotifyProbe(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "procfleet.yaml")
	writeFile(t, file, serverYAML("api", "1"))
	newBackend := func(probes bool) *inotifyBackend {
		nb, err := newNativeBackend(probes)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = nb.close() })
		b := nb.(*inotifyBackend)
		if err := b.watch([]string{dir}, []string{file}); err != nil {
			t.Fatal(err)
		}
		return b
	}
	b := newBackend(true)
	open := func(flag int) func() {
		f, err := os.OpenFile(file, flag, 0)
		if err != nil {
			t.Fatal(err)
		}
		return func() { _ = f.Close() }
	}
	check := func(what string, b *inotifyBackend, file string, want probeResult) {
		t.Helper()
		if got := b.probe(file); got != want {
			t.Errorf("%s: probe = %d, want %d", what, got, want)
		}
	}
	check("closed", b, file, probeNoWriter)
	done := open(os.O_WRONLY)
	check("open O_WRONLY", b, file, probeWriter)
	done()
	check("closed again", b, file, probeNoWriter)
	done = open(os.O_RDWR)
	check("open O_RDWR", b, file, probeWriter)
	done()
	done = open(os.O_RDONLY)
	check("open for reading only", b, file, probeNoWriter)
	done()
	check("not watched", b, filepath.Join(dir, "other.yaml"), probeUnavailable)
	check("probes off", newBackend(false), file, probeUnavailable)
	atomicSave(t, file, serverYAML("api", "2"))
	check("another inode than the watched one", b, file, probeUnavailable)
	if err := b.rewatch(file); err != nil {
		t.Fatal(err)
	}
	check("rewatched", b, file, probeNoWriter)
}
