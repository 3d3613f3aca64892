package reconciler

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestStaleLogsRemoved: a resync pass removes the log, rotated copies and
// events of a server not in the fleet and silent for over a week, and
// keeps those of a server silent for a day and of the declared server.
func TestStaleLogsRemoved(t *testing.T) {
	f := newTestFleet(t)
	f.add(&testSpec{name: "a"})
	f.write()
	dir := filepath.Dir(f.state.LogPath("a"))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	files := map[string]time.Time{
		"gone.log":             now.Add(-8 * 24 * time.Hour),
		"gone.log.1":           now.Add(-9 * 24 * time.Hour),
		"gone.events.jsonl":    now.Add(-8 * 24 * time.Hour),
		"recent.log":           now.Add(-24 * time.Hour),
		"recent.events.jsonl":  now.Add(-10 * 24 * time.Hour),
		"a.events.jsonl.extra": now.Add(-10 * 24 * time.Hour), // not a log's name
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
	rr := f.run(t, func(c *Config) { c.ResyncPeriod = 20 * time.Millisecond })
	waitStatus(t, rr.r, "ready", allReady("a"))

	deadline := time.Now().Add(30 * time.Second)
	for _, name := range []string{"gone.log", "gone.log.1", "gone.events.jsonl"} {
		for {
			_, err := os.Lstat(filepath.Join(dir, name))
			if errors.Is(err, fs.ErrNotExist) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s not removed by the resync passes (%v)", name, err)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	for _, name := range []string{"recent.log", "recent.events.jsonl", "a.events.jsonl.extra", filepath.Base(f.state.LogPath("a"))} {
		if _, err := os.Lstat(filepath.Join(dir, name)); err != nil {
			t.Errorf("%s removed: %v", name, err)
		}
	}
}
