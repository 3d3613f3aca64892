package actuate

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// renameInto moves a file to a free name, and says fs.ErrNotExist, as
// os.Rename does, when there is nothing to move (retire then unlinks,
// which says it again).
func TestRenameInto(t *testing.T) {
	dir := t.TempDir()
	from, to := filepath.Join(dir, "a.json"), filepath.Join(dir, "spare")
	if err := os.WriteFile(from, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := renameInto(from, to); err != nil {
		t.Fatalf("renameInto: %v", err)
	}
	if b, err := os.ReadFile(to); err != nil || string(b) != "x" {
		t.Errorf("moved file: %q, %v", b, err)
	}
	err := renameInto(from, to)
	var le *os.LinkError
	if !errors.Is(err, fs.ErrNotExist) || !errors.As(err, &le) || le.Old != from {
		t.Errorf("renameInto of a missing file = %v, want a *os.LinkError of %s wrapping fs.ErrNotExist", err, from)
	}
}
