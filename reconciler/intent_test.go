package reconciler

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/procfleet/procfleet/actuate"
	"github.com/procfleet/procfleet/internal/testserver"
	"github.com/procfleet/procfleet/observe"
)

// TestIntentRecordResolvedByToken: rule 8 through the reconciler. A crash
// between the intent record and the full one is set up by writing, over a
// running server's record, the intent record Spawn writes before the spawn
// (name, instance token, spec hash, state folder, cgroup; no pid): the
// actuate tests make that crash for real with a hook between the two
// writes; here it is the reconciler's reading of it that is tested. The
// next reconciler adopts the process carrying the token (same pid, no
// start) and writes its full record; an intent record nothing carries is
// removed and its server started.
func TestIntentRecordResolvedByToken(t *testing.T) {
	f := newTestFleet(t)
	f.add(&testSpec{name: "api", port: testserver.FreePort(t)})
	f.add(&testSpec{name: "lone"})
	f.write()
	rr := f.run(t, nil)
	st := waitStatus(t, rr.r, "first start", allReady("api", "lone"))
	api, lone := pidOf(st, "api"), pidOf(st, "lone")
	rr.stop(t)

	rec, err := f.state.ReadRecord("api")
	if err != nil {
		t.Fatal(err)
	}
	intent := actuate.Record{Version: rec.Version, Name: rec.Name, Instance: rec.Instance, Port: rec.Port,
		SpecHash: rec.SpecHash, StartedAt: rec.StartedAt, StateDir: rec.StateDir, Cgroup: rec.Cgroup}
	if !intent.Intent() {
		t.Fatalf("record %+v has no instance token", rec)
	}
	if err := f.state.WriteRecord(intent); err != nil {
		t.Fatal(err)
	}
	// lone's process is gone and its record an intent record with a
	// token nothing carries. (No port: Ready as soon as it runs, maybe
	// before it wrote its stamp.)
	waitFor(t, "lone's stamp", func() bool { return len(f.starts("lone")) >= 1 })
	killPID(t, lone)
	lrec, err := f.state.ReadRecord("lone")
	if err != nil {
		t.Fatal(err)
	}
	if err := f.state.WriteRecord(actuate.Record{Version: lrec.Version, Name: "lone", Instance: "0123456789abcdef0123456789abcdef",
		SpecHash: lrec.SpecHash, StateDir: lrec.StateDir}); err != nil {
		t.Fatal(err)
	}

	rr2 := f.run(t, nil)
	st = waitStatus(t, rr2.r, "adoption", func(st Status) bool {
		return allReady("api", "lone")(st) && pidOf(st, "lone") != lone
	})
	if got := pidOf(st, "api"); got != api {
		t.Errorf("api pid %d after the intent record, want %d adopted", got, api)
	}
	if n := len(f.starts("api")); n != 1 {
		t.Errorf("api started %d times, want 1", n)
	}
	onDisk, err := f.state.ReadRecord("api")
	if err != nil || onDisk.PID != api || onDisk.Instance != rec.Instance {
		t.Errorf("api's record after adoption = %+v, %v; want pid %d, instance %s", onDisk, err, api, rec.Instance)
	}
	// lone has no port: Ready as soon as it runs, maybe before its stamp.
	waitFor(t, "lone's second stamp", func() bool { return len(f.starts("lone")) >= 2 })
	if n := len(f.starts("lone")); n != 2 {
		t.Errorf("lone started %d times, want 2 (its intent record removed, then a start)", n)
	}
	waitFor(t, "lone's new record", func() bool {
		r, err := f.state.ReadRecord("lone")
		return err == nil && r.PID == pidOf(st, "lone")
	})
}

// killPID SIGKILLs pid through a pin and waits (bounded) for its exit.
func killPID(t *testing.T, pid int) {
	t.Helper()
	h, err := observe.Pin(pid)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if err := h.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.Wait(ctx); err != nil {
		t.Fatalf("pid %d after SIGKILL: %v", pid, err)
	}
}
