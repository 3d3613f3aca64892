package reconciler

import (
	"errors"
	"os"
	"testing"
	"time"

	"github.com/procfleet/procfleet/actuate"
	"github.com/procfleet/procfleet/internal/testserver"
	"github.com/procfleet/procfleet/observe"
)

// TestStateFolderReplacedStopsRun: the state folder moved away and another
// made at its path under a running reconciler (as rm -rf .procfleet and a
// new apply do): the next resync notices, Run returns
// *actuate.StateDirChangedError, and the server keeps running, unsignalled.
func TestStateFolderReplacedStopsRun(t *testing.T) {
	f := newTestFleet(t)
	f.add(&testSpec{name: "a", port: testserver.FreePort(t)})
	f.write()
	rr := f.run(t, func(c *Config) { c.ResyncPeriod = 50 * time.Millisecond })
	st := waitStatus(t, rr.r, "a ready", allReady("a"))
	h, err := observe.Pin(pidOf(st, "a"))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()

	path := f.state.Path
	if err := os.Rename(path, path+".old"); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(path, 0o700); err != nil {
		t.Fatal(err)
	}
	select {
	case <-rr.done:
	case <-time.After(30 * time.Second):
		t.Fatal("Run went on acting on a replaced state folder")
	}
	var ce *actuate.StateDirChangedError
	if !errors.As(rr.err, &ce) {
		t.Errorf("Run returned %v, want *actuate.StateDirChangedError", rr.err)
	}
	if h.Exited() {
		t.Errorf("a (pid %d) was stopped when its state folder was replaced", h.PID())
	}
	if n := len(f.starts("a")); n != 1 {
		t.Errorf("a started %d times, want 1", n)
	}
}
