package reconciler

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"

	"github.com/procfleet/procfleet/actuate"
	"github.com/procfleet/procfleet/internal/testserver"
	"github.com/procfleet/procfleet/observe"
)

// The tests of this file each reproduce one fix of issue 14 (on main
// 74ab52f each fails).

// TestPortConflictStartsWhenFreed (fix 2, and fix 5's stale message): a
// server quarantined for PortConflict starts once the holder lets go of the
// port, with the periodic resync off (it used to wait for the 30 s resync),
// and the quarantine's text does not stay in the healthy server's message.
func TestPortConflictStartsWhenFreed(t *testing.T) {
	f := newTestFleet(t)
	port := testserver.FreePort(t)
	l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	f.add(&testSpec{name: "api", port: port})
	f.write()
	rr := f.run(t, nil) // ResyncPeriod -1: no periodic resync
	waitStatus(t, rr.r, "PortConflict", func(st Status) bool {
		s, _ := st.Get("api")
		return s.Phase == PhaseQuarantined && s.Reason == ReasonPortConflict && strings.Contains(s.Message, "is held by")
	})
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	st := waitStatus(t, rr.r, "api started once the port is free", allReady("api"))
	if s, _ := st.Get("api"); s.Message != "" {
		t.Errorf("a Ready server keeps the quarantine's message %q", s.Message)
	}
	if n := rr.ev.count("api", ReasonQuarantined); n != 1 {
		t.Errorf("%d Quarantined events, want 1 (the re-checks say nothing new)", n)
	}
}

// TestApplyAfterUntrustedRecordConverges (fix 3): apply --wait without up
// moves an untrusted record aside, finds nothing left that it protects,
// starts the server Ready and exits 0, not "not converged" with the
// untrusted record's message.
func TestApplyAfterUntrustedRecordConverges(t *testing.T) {
	f := newTestFleet(t)
	f.add(&testSpec{name: "a", port: testserver.FreePort(t)})
	f.write()
	if err := os.WriteFile(f.state.RecordPath("a"), []byte("{garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	st, err := converge(t, f, true)
	if err != nil {
		t.Fatalf("Converge after an untrusted record with nothing behind it: %v\n%s", err, dumpStatus(st))
	}
	if !allReady("a")(st) {
		t.Errorf("a not Ready:\n%s", dumpStatus(st))
	}
	moved, _ := filepath.Glob(f.state.RecordPath("a") + ".resolved-*")
	if len(moved) != 1 {
		t.Errorf("moved-aside records, resolved: %v, want one", moved)
	}
}

// quarantineVerify is actuate.Verify, except that a process it owns is
// reported IdentityMismatch (as an exec'd server is before ownership v2):
// a quarantine on demand, around a real process.
func quarantineVerify(rec actuate.Record) actuate.Verification {
	v := actuate.Verify(rec)
	if v.Verdict != actuate.VerdictOwned {
		return v
	}
	_ = v.Handle.Close()
	return actuate.Verification{Verdict: actuate.VerdictQuarantine, Reason: actuate.IdentityMismatch, Message: "pid " + strconv.Itoa(rec.PID) + " runs another command line", Identity: v.Identity}
}

// ownRecord is the record procfleet would have written for the live
// process pid, under name, on port, with spec hash hash.
func ownRecord(tb testing.TB, name string, pid, port int, hash string) actuate.Record {
	tb.Helper()
	id, err := observe.ReadIdentity(pid)
	if err != nil {
		tb.Fatal(err)
	}
	boot, err := observe.BootID()
	if err != nil {
		tb.Fatal(err)
	}
	return actuate.Record{Version: actuate.RecordVersion, Name: name, PID: pid, PGID: pid, StartTime: id.StartTime, BootID: boot,
		UID: id.UID, Cmdline: id.Cmdline, Port: port, SpecHash: hash, StartedAt: time.Now().UTC()}
}

// recordFor writes ownRecord for pid into the fleet's state folder.
func recordFor(t *testing.T, f *testFleet, name string, pid, port int) actuate.Record {
	t.Helper()
	rec := ownRecord(t, name, pid, port, "sha256:old")
	if err := f.state.WriteRecord(rec); err != nil {
		t.Fatal(err)
	}
	return rec
}

// TestQuarantineShowsTheProcessLeftAlone (fix 5): a server whose args edit
// cannot be carried out (its process is quarantined) shows the pid and port
// of the process that still serves, not the new port and no pid; and a
// server removed from the files whose quarantined process is stopped by
// hand is forgotten at once, with the periodic resync off.
func TestQuarantineShowsTheProcessLeftAlone(t *testing.T) {
	f := newTestFleet(t)
	ports := testserver.FreePorts(t, 3)
	oldPort, newPort, removedPort := ports[0], ports[1], ports[2]
	api := startStranger(t, oldPort, filepath.Join(f.dir, "api.signals"), filepath.Join(f.dir, "api.ready"))
	removed := startStranger(t, removedPort, filepath.Join(f.dir, "old.signals"), filepath.Join(f.dir, "old.ready"))
	recordFor(t, f, "api", api.Process.Pid, oldPort)
	recordFor(t, f, "old", removed.Process.Pid, removedPort)
	f.add(&testSpec{name: "api", port: newPort})
	f.write()
	rr := f.run(t, func(c *Config) { c.Verify = quarantineVerify })

	st := waitStatus(t, rr.r, "both quarantined", func(st Status) bool {
		a, _ := st.Get("api")
		o, _ := st.Get("old")
		return a.Phase == PhaseQuarantined && o.Phase == PhaseQuarantined
	})
	if s, _ := st.Get("api"); s.PID != api.Process.Pid || s.Port != oldPort {
		t.Errorf("api: pid %d port %d; want the process left alone, pid %d on port %d", s.PID, s.Port, api.Process.Pid, oldPort)
	}

	// Stopped by hand, as the quarantine's message says.
	if err := removed.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_, _ = removed.Process.Wait()
	waitStatus(t, rr.r, "old forgotten", func(st Status) bool {
		_, listed := st.Get("old")
		return !listed
	})
	if _, err := os.Stat(f.state.RecordPath("old")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("old's record after its process was stopped: %v, want it removed", err)
	}
	if err := syscall.Kill(api.Process.Pid, 0); err != nil {
		t.Errorf("the quarantined api process was ended: %v", err)
	}
}

// TestFreshApplyCountsFromZero (fix 5): a fresh start (no process to adopt)
// does not continue the restart count of an earlier run's status.json.
func TestFreshApplyCountsFromZero(t *testing.T) {
	f := newTestFleet(t)
	f.add(&testSpec{name: "a", port: testserver.FreePort(t)})
	f.write()
	prev := Status{Servers: []ServerStatus{{Name: "a", Phase: PhaseStopped, Restarts: 7,
		LastExit: &LastExit{Code: 1, Reason: "exited with code 1"}, Conditions: []Condition{}}}, Errors: []StatusError{}}
	if err := WriteStatus(f.state.StatusPath(), prev); err != nil {
		t.Fatal(err)
	}
	st, err := converge(t, f, true)
	if err != nil {
		t.Fatalf("Converge: %v", err)
	}
	if s, _ := st.Get("a"); s.Restarts != 0 {
		t.Errorf("restarts of a fresh start = %d, want 0", s.Restarts)
	}
	// Adopting keeps the count up had (its process is the same).
	r, err := New(Config{Files: []string{f.file}, StateDir: f.state, Log: testr.New(t), OneShot: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := r.Converge(ctx, ConvergeOptions{Wait: true}); err != nil {
		t.Fatal(err)
	}
}

// TestDownOfAQuarantinedServerSaysWhyOnce (fix 7): down through up of a
// quarantined server fails naming the quarantine reason once (it used to
// read "quarantined (IdentityMismatch): IdentityMismatch: ...").
func TestDownOfAQuarantinedServerSaysWhyOnce(t *testing.T) {
	f := newTestFleet(t)
	port := testserver.FreePort(t)
	p := startStranger(t, port, filepath.Join(f.dir, "web.signals"), filepath.Join(f.dir, "web.ready"))
	f.add(&testSpec{name: "web", port: port})
	f.write()
	rec := recordFor(t, f, "web", p.Process.Pid, port)
	_ = rec
	rr := f.run(t, func(c *Config) { c.Verify = quarantineVerify })
	waitStatus(t, rr.r, "quarantined", func(st Status) bool { s, _ := st.Get("web"); return s.Phase == PhaseQuarantined })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := rr.r.DownServers(ctx, []string{"web"})
	var de *DownError
	if !errors.As(err, &de) || de.Servers["web"] == nil {
		t.Fatalf("DownServers(web) = %v, want a DownError naming web", err)
	}
	if n := strings.Count(err.Error(), "IdentityMismatch"); n != 1 {
		t.Errorf("down's error names IdentityMismatch %d times, want once:\n%v", n, err)
	}
	if _, err := rr.r.DownServers(ctx, []string{"wbe"}); err == nil || err.Error() != "no server named wbe (did you mean web?)" {
		t.Errorf("DownServers(wbe) = %v, want no server named wbe, with the nearest name", err)
	}
	if b, _ := os.ReadFile(filepath.Join(f.dir, "web.signals")); len(b) != 0 {
		t.Errorf("the quarantined process received signals: %q", b)
	}
}

// TestStopQuarantineIsOneEvent (fix 7): a stop that ends in a quarantine
// (here a server that execs after its start, which this procfleet cannot
// stop by its command line) is one Quarantined event in the events file
// that describe shows, not actuate's and the reconciler's.
func TestStopQuarantineIsOneEvent(t *testing.T) {
	f := newTestFleet(t)
	port := testserver.FreePort(t)
	write := func(extra string) {
		argv := testserver.Command("-port", strconv.Itoa(port), "-stamp", f.stamp("web"), extra)
		q := make([]string, len(argv))
		for i, a := range argv {
			q[i] = strconv.Quote(a)
		}
		yaml := "apiVersion: procfleet.dev/v1alpha1\nkind: Server\nmetadata: {name: web}\nspec:\n" +
			"  command: [sh, -c, \"sleep 0.3; exec \\\"$0\\\" \\\"$@\\\"\", " + strings.Join(q, ", ") + "]\n" +
			"  env: [{name: " + testserver.EnvVar + ", value: \"1\"}]\n  port: " + strconv.Itoa(port) + "\n  terminationGracePeriodSeconds: 5\n"
		if err := os.WriteFile(f.file+".tmp", []byte(yaml), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(f.file+".tmp", f.file); err != nil {
			t.Fatal(err)
		}
	}
	write("-print=one")
	rr := f.run(t, nil)
	waitStatus(t, rr.r, "web ready", allReady("web"))
	write("-print=two") // an args edit: replace, whose stop may be refused
	waitStatus(t, rr.r, "web replaced or quarantined", func(st Status) bool {
		s, _ := st.Get("web")
		return s.Phase == PhaseQuarantined || (s.Ready && len(f.starts("web")) == 2)
	})
	rr.stop(t)
	evs, err := os.ReadFile(f.state.EventsPath("web"))
	if err != nil {
		t.Fatal(err)
	}
	n := strings.Count(string(evs), `"reason":"Quarantined"`)
	st := rr.r.Status()
	s, _ := st.Get("web")
	t.Logf("web %s (%s), %d Quarantined event(s)", s.Phase, s.Reason, n)
	switch {
	case s.Phase == PhaseQuarantined && n != 1:
		t.Errorf("one quarantine, %d Quarantined events in the events file:\n%s", n, evs)
	case s.Phase != PhaseQuarantined && n != 0:
		t.Errorf("no quarantine, %d Quarantined events:\n%s", n, evs)
	}
}

// TestSpawnUsesTheInstance: the process gets its instance's command line
// and environment, with $(NAME) expanded as spec resolves it (PORT here).
func TestSpawnUsesTheInstance(t *testing.T) {
	f := newTestFleet(t)
	port := testserver.FreePort(t)
	f.add(&testSpec{name: "a", port: port, args: []string{"-print", "listening on $(PORT)"}})
	f.write()
	st, err := converge(t, f, true)
	if err != nil {
		t.Fatalf("Converge: %v\n%s", err, dumpStatus(st))
	}
	want := "listening on " + strconv.Itoa(port)
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, _ := os.ReadFile(f.state.LogPath("a"))
		if strings.Contains(string(b), want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("a's log does not say %q:\n%s", want, b)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
