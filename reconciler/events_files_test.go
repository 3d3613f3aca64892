package reconciler

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A stopped server's events file gives its descriptor back (rest); its
// next event opens the file again and appends to it.
func TestEventFilesRest(t *testing.T) {
	dir := t.TempDir()
	f := &eventFiles{path: func(name string) string { return filepath.Join(dir, name+".events.jsonl") }}
	defer f.closeAll()
	ev := func(server, msg string) {
		t.Helper()
		if err := f.append(Event{Time: time.Now(), Server: server, Reason: ReasonStopped, Message: msg}); err != nil {
			t.Fatal(err)
		}
	}
	ev("a", "one")
	ev("b", "one")
	if f.open != 2 {
		t.Fatalf("%d descriptors kept, want 2", f.open)
	}
	f.rest("a")
	f.rest("never") // no file: nothing to give back
	if f.open != 1 || f.file("a").fh != nil || f.file("b").fh == nil {
		t.Fatalf("after rest(a): %d kept, a open %v, b open %v; want 1, false, true", f.open, f.file("a").fh != nil, f.file("b").fh != nil)
	}
	ev("a", "two")
	if f.open != 2 || f.file("a").fh == nil {
		t.Fatalf("after a's next event: %d kept, a open %v; want 2, true", f.open, f.file("a").fh != nil)
	}
	b, err := os.ReadFile(f.path("a"))
	if err != nil {
		t.Fatal(err)
	}
	if lines := strings.Count(string(b), "\n"); lines != 2 || !strings.Contains(string(b), `"message":"two"`) {
		t.Errorf("a's events file holds %d lines, want both events:\n%s", lines, b)
	}
}

// An events file that has grown past maxEventsFile is moved to .1 when it
// is opened, and the event goes into a fresh file.
func TestEventFilesRotateAtOpen(t *testing.T) {
	dir := t.TempDir()
	f := &eventFiles{path: func(name string) string { return filepath.Join(dir, name+".events.jsonl") }}
	defer f.closeAll()
	big := strings.Repeat("x", maxEventsFile) + "\n"
	if err := os.WriteFile(f.path("a"), []byte(big), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := f.append(Event{Time: time.Now(), Server: "a", Reason: ReasonStopped, Message: "fresh"}); err != nil {
		t.Fatal(err)
	}
	old, err := os.ReadFile(f.path("a") + ".1")
	if err != nil || string(old) != big {
		t.Fatalf("rotated file: %d bytes, %v; want the old %d bytes", len(old), err, len(big))
	}
	b, err := os.ReadFile(f.path("a"))
	if err != nil {
		t.Fatal(err)
	}
	if lines := strings.Count(string(b), "\n"); lines != 1 || !strings.Contains(string(b), `"message":"fresh"`) {
		t.Errorf("fresh events file holds %d lines, want the one event:\n%s", lines, b)
	}
	if ef := f.file("a"); ef.fh == nil || ef.size != int64(len(b)) {
		t.Errorf("kept descriptor %v, size %d; want one, size %d", ef.fh != nil, ef.size, len(b))
	}
}
