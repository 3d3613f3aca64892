package reconciler

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/procfleet/procfleet/actuate"
	"github.com/procfleet/procfleet/internal/api"
	"github.com/procfleet/procfleet/internal/testserver"
)

// waitChanged waits, on the reconciler's change notifications and at most
// 30 s, until cond holds of its status.
func waitChanged(t *testing.T, r *Reconciler, what string, cond func(Status) bool) Status {
	t.Helper()
	deadline := time.NewTimer(30 * time.Second)
	defer deadline.Stop()
	for {
		ch := r.Changes()
		st := r.Status()
		if cond(st) {
			return st
		}
		select {
		case <-ch:
		case <-deadline.C:
			t.Fatalf("timed out waiting for %s; status:\n%s", what, dumpStatus(st))
		}
	}
}

func reasons(evs []Event) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.Reason
	}
	return out
}

// TestDetail runs a real fleet and reads each server's detail as the
// dashboard does: a Running server's record verified against its live
// process and held; its events from the events file, a kill -9 among
// them; its log file; a server quarantined on a stranger's port neither
// held nor recorded; the fleet in force; an unknown name refused with the
// nearest one.
func TestDetail(t *testing.T) {
	f := newTestFleet(t)
	ports := testserver.FreePorts(t, 2)
	stranger := startStranger(t, ports[1], filepath.Join(f.dir, "stranger.signals"), filepath.Join(f.dir, "stranger.ready"))
	f.add(&testSpec{name: "api", port: ports[0]})
	f.add(&testSpec{name: "blocked", port: ports[1]})
	f.write()
	rr := f.run(t, nil)
	r := rr.r

	st := waitChanged(t, r, "api ready, blocked quarantined", func(st Status) bool {
		b, _ := st.Get("blocked")
		return allReady("api")(st) && b.Phase == PhaseQuarantined
	})
	if fl := r.Fleet(); fl == nil || len(fl.Servers) != 2 {
		t.Fatalf("Fleet() = %+v, want the two servers of the file", fl)
	}

	pid := pidOf(st, "api")
	d, err := r.Detail(context.Background(), "api")
	if err != nil {
		t.Fatalf("Detail(api): %v", err)
	}
	if d.Status.PID != pid || !d.Held {
		t.Errorf("Detail(api): status pid %d, held %v; want pid %d, held", d.Status.PID, d.Held, pid)
	}
	if d.Record == nil || d.Record.Record.PID != pid || d.Record.Verdict != actuate.VerdictOwned ||
		!strings.Contains(d.Record.Evidence, "start time") || d.Record.Identity.PID != pid {
		t.Errorf("Detail(api).Record = %+v, want the record of pid %d verified Owned with its evidence and identity", d.Record, pid)
	}
	if d.LogPath != f.state.LogPath("api") {
		t.Errorf("Detail(api).LogPath = %q, want %q", d.LogPath, f.state.LogPath("api"))
	}
	if _, err := os.Stat(d.LogPath); err != nil {
		t.Errorf("api's log: %v", err)
	}
	if rs := reasons(d.Events); !slices.Contains(rs, ReasonStarting) || !slices.Contains(rs, ReasonReady) {
		t.Errorf("Detail(api).Events = %v, want Starting and Ready", rs)
	}

	// kill -9: the restarted server's detail shows the new process and
	// the exit, read back from the events file.
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	st = waitChanged(t, r, "api restarted", func(st Status) bool {
		s, _ := st.Get("api")
		return s.Ready && s.PID != 0 && s.PID != pid
	})
	d, err = r.Detail(context.Background(), "api")
	if err != nil {
		t.Fatalf("Detail(api) after kill -9: %v", err)
	}
	if newPID := pidOf(st, "api"); d.Record == nil || d.Record.Record.PID != newPID || !d.Held {
		t.Errorf("Detail(api) after kill -9: record %+v, held %v; want pid %d, held", d.Record, d.Held, newPID)
	}
	killed := false
	for _, e := range d.Events {
		killed = killed || e.Reason == ReasonExited && strings.Contains(e.Message, "SIGKILL") && strings.Contains(e.Message, strconv.Itoa(pid))
	}
	if !killed {
		t.Errorf("Detail(api).Events after kill -9 = %v, want an Exited event naming pid %d and SIGKILL", d.Events, pid)
	}

	// Quarantined on a stranger's port: nothing held, no record.
	d, err = r.Detail(context.Background(), "blocked")
	if err != nil {
		t.Fatalf("Detail(blocked): %v", err)
	}
	if d.Held || d.Record != nil || d.Status.Phase != PhaseQuarantined || !strings.Contains(d.Status.Message, strconv.Itoa(stranger.Process.Pid)) {
		t.Errorf("Detail(blocked) = held %v, record %+v, status %+v; want Quarantined naming pid %d, not held, no record", d.Held, d.Record, d.Status, stranger.Process.Pid)
	}

	_, err = r.Detail(context.Background(), "apo")
	var ue *UnknownNameError
	if !errors.As(err, &ue) || ue.Nearest != "api" || !errors.Is(err, api.ErrNotFound) {
		t.Errorf("Detail(apo) = %v, want an unknown name suggesting api", err)
	}
}

// TestStateHolds: only a Running or Stopping process with a pid is held;
// a quarantined one is pinned for its exit only.
func TestStateHolds(t *testing.T) {
	for _, p := range []Phase{PhasePending, PhaseStarting, PhaseRunning, PhaseStopping, PhaseStopped, PhaseFailed, PhaseCrashLoopBackOff, PhaseQuarantined} {
		for _, pid := range []int{0, 42} {
			st := state{phase: p, pid: pid}
			want := pid != 0 && (p == PhaseRunning || p == PhaseStopping)
			if got := st.holds(); got != want {
				t.Errorf("state{%s, pid %d}.holds() = %v, want %v", p, pid, got, want)
			}
		}
	}
}

// TestReadEvents reads events from a file and its rotated copy, oldest
// first, skipping lines that are not events; a missing file is no events.
func TestReadEvents(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "api.events")
	if evs, bad, err := ReadEvents(path, 10); err != nil || len(evs) != 0 || bad != 0 {
		t.Fatalf("ReadEvents of a missing file = %v, %d, %v; want nothing", evs, bad, err)
	}
	write := func(p, s string) {
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(path+".1", `{"time":"2026-01-01T00:00:00Z","server":"api","type":"Normal","reason":"Starting","message":"one"}`+"\n")
	write(path, "not json\n"+`{"time":"2026-01-01T00:00:01Z","server":"api","type":"Normal","reason":"Ready","message":"two"}`+"\n")
	evs, bad, err := ReadEvents(path, 10)
	if err != nil || bad != 1 || !slices.Equal(reasons(evs), []string{ReasonStarting, ReasonReady}) {
		t.Errorf("ReadEvents = %v, %d bad, %v; want Starting then Ready, 1 bad", reasons(evs), bad, err)
	}
	evs, _, _ = ReadEvents(path, 1)
	if !slices.Equal(reasons(evs), []string{ReasonReady}) {
		t.Errorf("ReadEvents(n=1) = %v, want the last: Ready", reasons(evs))
	}
}
