//go:build unix

package reconciler

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// An events file already there is appended to through its own descriptor
// (openEventsAppend), its size taken from the open; what was in it stays.
func TestEventFilesAppendExisting(t *testing.T) {
	dir := t.TempDir()
	f := &eventFiles{path: func(name string) string { return filepath.Join(dir, name+".events.jsonl") }}
	defer f.closeAll()
	old := `{"old":1}` + "\n"
	if err := os.WriteFile(f.path("a"), []byte(old), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, msg := range []string{"one", "two"} {
		if err := f.append(Event{Time: time.Now(), Server: "a", Reason: ReasonStopping, Message: msg}); err != nil {
			t.Fatal(err)
		}
	}
	ef := f.file("a")
	if _, ok := ef.fh.(*appendFD); !ok {
		t.Errorf("kept %T, want *appendFD", ef.fh)
	}
	b, err := os.ReadFile(f.path("a"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(b), old) || strings.Count(string(b), "\n") != 3 || !strings.HasSuffix(string(b), "\"message\":\"two\"}\n") {
		t.Errorf("events file:\n%s\nwant the old line and both events", b)
	}
	if ef.size != int64(len(b)) {
		t.Errorf("size kept %d, file %d", ef.size, len(b))
	}
}
