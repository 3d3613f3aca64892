package logfile

import (
	"os"
	"path/filepath"
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
	var want []string
	for _, n := range []string{"gone.events.jsonl", "gone.events.jsonl.1", "gone.log", "gone.log.1", "gone.log.1.tmp", "gone.log.2"} {
		want = append(want, filepath.Join(dir, n))
	}
	if diff := cmp.Diff(want, removed); diff != "" {
		t.Errorf("removed (-want +got):\n%s", diff)
	}
	left, _ := os.ReadDir(dir)
	var names []string
	for _, e := range left {
		names = append(names, e.Name())
	}
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
