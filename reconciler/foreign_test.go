package reconciler

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/procfleet/procfleet/actuate"
	"github.com/procfleet/procfleet/internal/testserver"
)

// TestForeignRecordOverTrackedServer: a record from another state folder
// (valid in every other way) copied over the record of a server up runs
// is moved aside at the next resync and never acted on, and up, which
// holds the server's process, writes its record again: a restart of up
// must still find the process as its own. Found by the chaos soak (fault
// "foreign"): the server ran on with no record at all.
func TestForeignRecordOverTrackedServer(t *testing.T) {
	f := newTestFleet(t)
	f.add(&testSpec{name: "a", port: testserver.FreePort(t)})
	f.write()
	rr := f.run(t, nil)
	pid := pidOf(waitStatus(t, rr.r, "first start", allReady("a")), "a")

	// The copy: a's record written in another state folder, then copied
	// into this one byte for byte.
	other, err := actuate.OpenStateDir(filepath.Join(t.TempDir(), "copy"))
	if err != nil {
		t.Fatal(err)
	}
	rec, err := f.state.ReadRecord("a")
	if err != nil {
		t.Fatal(err)
	}
	rec.StateDir = nil // bound to the folder it is written in
	if err := other.WriteRecord(rec); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(other.RecordPath("a"))
	if err != nil {
		t.Fatal(err)
	}
	tmp := f.state.RecordPath("a") + ".tmp-copy"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, f.state.RecordPath("a")); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, _ = rr.r.Reload(ctx, true, 5*time.Second) // a resync: every changed record is read
	waitFor(t, "the foreign record moved aside and a's own written again", func() bool {
		moved, _ := filepath.Glob(f.state.RecordPath("a") + ".foreign-*")
		r, err := f.state.ReadRecord("a")
		return len(moved) == 1 && err == nil && r.PID == pid
	})
	if st := rr.r.Status(); !allReady("a")(st) || pidOf(st, "a") != pid {
		t.Errorf("a after the foreign record: want Ready with pid %d:\n%s", pid, dumpStatus(st))
	}
	if n := len(f.starts("a")); n != 1 {
		t.Errorf("a started %d times, want 1", n)
	}

	// A new up adopts it.
	rr.stop(t)
	rr2 := f.run(t, nil)
	st := waitStatus(t, rr2.r, "a adopted", allReady("a"))
	if got := pidOf(st, "a"); got != pid {
		t.Errorf("a pid %d after a restart, want %d adopted", got, pid)
	}
}
