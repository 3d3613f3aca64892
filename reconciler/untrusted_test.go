package reconciler

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/procfleet/procfleet/internal/testserver"
	"github.com/procfleet/procfleet/observe"
)

// corruptRecord cuts a server's record in half, as a crash or a disk error
// could, keeping its mode (0600) so that only its content is untrusted.
func corruptRecord(t *testing.T, f *testFleet, name string) {
	t.Helper()
	path := f.state.RecordPath(name)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b[:len(b)/2], 0o600); err != nil {
		t.Fatal(err)
	}
}

// waitGone waits (bounded) until pid is gone or a zombie.
func waitGone(t *testing.T, pid int) {
	t.Helper()
	waitFor(t, "the process to exit", func() bool { return observe.CheckLiveness(pid) == observe.LivenessGone })
}

// TestUntrustedQuarantineLiftedWhenProcessGone: up starts with a server's
// record corrupted while its process still runs: Quarantined /
// UntrustedRecord, the process never signalled. Once that process has
// exited and freed the port, the next resync lifts the quarantine and the
// restart policy starts the server again.
func TestUntrustedQuarantineLiftedWhenProcessGone(t *testing.T) {
	f := newTestFleet(t)
	f.add(&testSpec{name: "a", port: testserver.FreePort(t)})
	f.write()
	rr := f.run(t, nil)
	a1 := pidOf(waitStatus(t, rr.r, "first start", allReady("a")), "a")
	rr.stop(t)
	corruptRecord(t, f, "a")

	rr2 := f.run(t, nil)
	quarantined := func(st Status) bool {
		s, ok := st.Get("a")
		return ok && s.Phase == PhaseQuarantined && s.Reason == "UntrustedRecord"
	}
	waitStatus(t, rr2.r, "a quarantined for its untrusted record", quarantined)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// A resync while the process still runs changes nothing.
	_, _ = rr2.r.Reload(ctx, true, 5*time.Second)
	if st := rr2.r.Status(); !quarantined(st) {
		t.Errorf("a no longer quarantined while the process its untrusted record named (pid %d) runs:\n%s", a1, dumpStatus(st))
	}
	if err := syscall.Kill(a1, 0); err != nil {
		t.Fatalf("pid %d, named by an untrusted record, was ended by up: %v", a1, err)
	}

	if err := syscall.Kill(a1, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitGone(t, a1)
	// Resync (periodic resync is off here) until the quarantine is lifted:
	// the kernel may take a moment to release the dead process's port.
	st := waitStatus(t, rr2.r, "a started again", func(st Status) bool {
		s, _ := st.Get("a")
		if s.Phase == PhaseQuarantined {
			if _, err := rr2.r.Reload(ctx, false, 0); err != nil {
				t.Errorf("Reload: %v", err)
			}
		}
		return s.Phase == PhaseRunning && s.Ready && s.PID != a1 && s.PID != 0
	})
	if rr2.ev.count("a", ReasonQuarantineLifted) != 1 {
		t.Errorf("a: %d QuarantineLifted events, want 1; status:\n%s", rr2.ev.count("a", ReasonQuarantineLifted), dumpStatus(st))
	}
}

func TestSalvageIdentity(t *testing.T) {
	tests := []struct {
		in    string
		pid   int
		start uint64
	}{
		{`{"version":1,"name":"a","pid":4242,"pgid":4242,"startTime":987`, 4242, 987},
		{`{"version":1,"name":"a","pi`, 0, 0},
		{`{not json`, 0, 0},
		{`{"pid": -3}`, 0, 0},
	}
	for _, tc := range tests {
		pid, start := salvageIdentity([]byte(tc.in))
		if pid != tc.pid || start != tc.start {
			t.Errorf("salvageIdentity(%q) = %d, %d; want %d, %d", tc.in, pid, start, tc.pid, tc.start)
		}
	}
}

// TestCorruptRecordWhileTrackedIsRewritten: the record of a server this
// reconciler started (and holds a pidfd of) is corrupted on disk. The next
// resync moves it aside and writes a fresh one from the proven identity; the
// server stays Running with the same pid, and a later reconciler adopts it.
func TestCorruptRecordWhileTrackedIsRewritten(t *testing.T) {
	f := newTestFleet(t)
	f.add(&testSpec{name: "a", port: testserver.FreePort(t)})
	f.write()
	rr := f.run(t, nil)
	a1 := pidOf(waitStatus(t, rr.r, "first start", allReady("a")), "a")
	corruptRecord(t, f, "a")

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := rr.r.Reload(ctx, true, 10*time.Second); err != nil {
		t.Fatalf("Reload: %v", err)
	}
	waitFor(t, "the record rewritten", func() bool { return rr.ev.count("a", ReasonRecordRewritten) == 1 })
	if st := rr.r.Status(); !allReady("a")(st) || pidOf(st, "a") != a1 {
		t.Errorf("after its record was rewritten, a is not Running as pid %d:\n%s", a1, dumpStatus(st))
	}
	rec, err := f.state.ReadRecord("a")
	if err != nil || rec.PID != a1 {
		t.Fatalf("record of a after the rewrite: %+v, %v; want pid %d", rec, err, a1)
	}
	if moved, _ := filepath.Glob(f.state.RecordPath("a") + ".corrupt-*"); len(moved) != 1 {
		t.Errorf("the corrupt record was not moved aside: %v", moved)
	}
	rr.stop(t)

	rr2 := f.run(t, nil)
	st := waitStatus(t, rr2.r, "adoption", allReady("a"))
	if pidOf(st, "a") != a1 || rr2.ev.count("a", ReasonAdopted) != 1 {
		t.Errorf("after a restart of the reconciler a is pid %d with %d Adopted events; want %d adopted", pidOf(st, "a"), rr2.ev.count("a", ReasonAdopted), a1)
	}
}
