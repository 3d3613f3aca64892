//go:build unix

package reconciler

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/procfleet/procfleet/internal/testserver"
)

// TestEventsFileNotRegular: a FIFO at one server's events file (which
// hung every write before) and a symlink at another's (which made
// procfleet append to the link's target) are moved aside and fresh files
// made; both servers start, the link's target is untouched.
func TestEventsFileNotRegular(t *testing.T) {
	f := newTestFleet(t)
	f.add(&testSpec{name: "fifo", port: testserver.FreePort(t)})
	f.add(&testSpec{name: "link"})
	f.write()
	if err := os.MkdirAll(filepath.Dir(f.state.EventsPath("fifo")), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(f.state.EventsPath("fifo"), 0o600); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(f.dir, "elsewhere")
	if err := os.WriteFile(target, []byte("keep\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, f.state.EventsPath("link")); err != nil {
		t.Fatal(err)
	}
	rr := f.run(t, nil)
	waitStatus(t, rr.r, "both ready", allReady("fifo", "link"))
	for _, name := range []string{"fifo", "link"} {
		path := f.state.EventsPath(name)
		waitFor(t, name+"'s events file", func() bool {
			fi, err := os.Lstat(path)
			return err == nil && fi.Mode().IsRegular() && fi.Size() > 0
		})
		if moved, _ := filepath.Glob(path + ".corrupt-*"); len(moved) != 1 {
			t.Errorf("%s: moved aside %v, want one", name, moved)
		}
	}
	if b, _ := os.ReadFile(target); string(b) != "keep\n" {
		t.Errorf("the symlink's target was written: %q", b)
	}
}
