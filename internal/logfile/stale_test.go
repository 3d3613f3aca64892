package logfile

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestServerOf(t *testing.T) {
	for file, want := range map[string]string{
		"api.log":                   "api",
		"api.log.1":                 "api",
		"api.log.12":                "api",
		"api.log.1.tmp":             "api",
		"api.events.jsonl":          "api",
		"api.events.jsonl.1":        "api",
		"web-0.log":                 "web-0",
		"api.log.corrupt-20261201":  "",
		"api.events.jsonl.corrupt-": "",
		"api.log.x":                 "",
		"api.log.":                  "",
		"api.txt":                   "",
		".log":                      "",
		"api":                       "",
		"api.events.jsonl.2":        "",
	} {
		got, ok := serverOf(file)
		if got != want || ok != (want != "") {
			t.Errorf("serverOf(%q) = %q, %v; want %q", file, got, ok, want)
		}
	}
}

// TestRemoveStale: the files of a server gone from the fleet are removed
// once all of them are a week old; a recent write to any one of them keeps
// them all; servers kept, foreign files, moved-aside files and non-regular
// files are left alone.
func TestRemoveStale(t *testing.T) {
	dir := t.TempDir()
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	old := now.Add(-DefaultStaleAge - time.Minute)
	recent := now.Add(-DefaultStaleAge + time.Minute)
	files := map[string]time.Time{
		"gone.log": old, "gone.log.1": old, "gone.log.2": old, "gone.log.1.tmp": old,
		"gone.events.jsonl": old, "gone.events.jsonl.1": old,
		"gone.log.corrupt-20261101T000000.000000000Z": old,
		"busy.log": old, "busy.events.jsonl": recent, // written lately: kept
		"api.log": old, "api.events.jsonl": old, // in the fleet: kept
		"notes.txt": old,
	}
	for name, mtime := range files {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("x\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, mtime, mtime); err != nil {
			t.Fatal(err)
		}
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo.log"), 0o600); err != nil {
		t.Fatal(err)
	}
	keep := func(name string) bool { return name == "api" }

	removed, err := RemoveStale(dir, keep, 0, now)
	if err != nil {
		t.Fatal(err)
	}
	want := inDir(dir, "gone.events.jsonl", "gone.events.jsonl.1", "gone.log", "gone.log.1", "gone.log.1.tmp", "gone.log.2")
	if diff := cmp.Diff(want, removed); diff != "" {
		t.Errorf("removed (-want +got):\n%s", diff)
	}
	names := dirNames(dir)
	wantLeft := []string{"api.events.jsonl", "api.log", "busy.events.jsonl", "busy.log", "fifo.log",
		"gone.log.corrupt-20261101T000000.000000000Z", "notes.txt"}
	if diff := cmp.Diff(wantLeft, names); diff != "" {
		t.Errorf("left in the folder (-want +got):\n%s", diff)
	}

	// A shorter age, given: busy goes too.
	removed, err = RemoveStale(dir, keep, time.Hour, now)
	if err != nil || len(removed) != 2 {
		t.Errorf("with a 1 h age: removed %v, %v; want busy's two files", removed, err)
	}
	if removed, err := RemoveStale(filepath.Join(dir, "none"), keep, 0, now); removed != nil || err != nil {
		t.Errorf("a missing folder: %v, %v", removed, err)
	}
}

// TestMaintain: one look at the folder removes the files of a stale server
// (its log, over the limit, is not rotated first) and rotates the kept
// server's log that reached the limit; without a StaleCheck nothing is
// removed.
func TestMaintain(t *testing.T) {
	dir := t.TempDir()
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	old := now.Add(-DefaultStaleAge - time.Minute)
	big := strings.Repeat("x", 99) + "\n"
	for name, content := range map[string]string{"gone.log": big, "gone.events.jsonl": "{}\n", "api.log": big, "api.events.jsonl": "{}\n", "small.log": "x\n"} {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, old, old); err != nil {
			t.Fatal(err)
		}
	}
	opts := Options{MaxBytes: 100, Keep: 1}

	rotated, removed, err := Maintain(dir, opts, nil)
	if err != nil {
		t.Fatalf("Maintain without a stale check: %v", err)
	}
	wantRotated := []string{filepath.Join(dir, "api.log"), filepath.Join(dir, "gone.log")}
	if diff := cmp.Diff(wantRotated, rotated); diff != "" || removed != nil {
		t.Errorf("without a stale check: rotated (-want +got):\n%s; removed %v, want none", diff, removed)
	}

	for _, name := range []string{"api.log", "gone.log"} { // over the limit again
		if err := os.WriteFile(filepath.Join(dir, name), []byte(big), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"gone.log", "gone.log.1", "gone.events.jsonl"} {
		if err := os.Chtimes(filepath.Join(dir, name), old, old); err != nil {
			t.Fatal(err)
		}
	}
	keep := func(name string) bool { return name == "api" || name == "small" }
	rotated, removed, err = Maintain(dir, opts, &StaleCheck{Keep: keep, Now: now})
	if err != nil {
		t.Fatalf("Maintain: %v", err)
	}
	if diff := cmp.Diff([]string{filepath.Join(dir, "api.log")}, rotated); diff != "" {
		t.Errorf("rotated (-want +got):\n%s", diff)
	}
	wantRemoved := inDir(dir, "gone.events.jsonl", "gone.log", "gone.log.1")
	if diff := cmp.Diff(wantRemoved, removed); diff != "" {
		t.Errorf("removed (-want +got):\n%s", diff)
	}
	names := dirNames(dir)
	if diff := cmp.Diff([]string{"api.events.jsonl", "api.log", "api.log.1", "small.log"}, names); diff != "" {
		t.Errorf("left in the folder (-want +got):\n%s", diff)
	}
	if rotated, removed, err := Maintain(filepath.Join(dir, "none"), opts, &StaleCheck{Keep: keep, Now: now}); rotated != nil || removed != nil || err != nil {
		t.Errorf("a missing folder: %v, %v, %v", rotated, removed, err)
	}
}

// inDir returns names joined to dir, in order.
func inDir(dir string, names ...string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = filepath.Join(dir, n)
	}
	return out
}

// dirNames lists the names in dir, sorted (none if it cannot be read).
func dirNames(dir string) []string {
	entries, _ := os.ReadDir(dir)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}
