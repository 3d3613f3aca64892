package reconciler

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"

	"github.com/procfleet/procfleet/actuate"
	"github.com/procfleet/procfleet/internal/testserver"
)

// stampTimes returns the start times (ns) in a server's stamp file.
func (f *testFleet) stampTimes(name string) []int64 {
	b, err := os.ReadFile(f.stamp(name))
	if err != nil {
		return nil
	}
	var out []int64
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if fields := strings.Fields(line); len(fields) == 2 {
			ns, _ := strconv.ParseInt(fields[0], 10, 64)
			out = append(out, ns)
		}
	}
	return out
}

// TestCrashLoopBacksOff: a server that keeps exiting is restarted at once
// the first time, then after growing gaps, in CrashLoopBackOff meanwhile.
// The backoff's base is shortened to 50 ms here (its arithmetic at DESIGN.md
// scale is tested on a fake clock in backoff_test.go); the gaps are checked
// as lower bounds only, which hold by construction.
func TestCrashLoopBacksOff(t *testing.T) {
	f := newTestFleet(t)
	f.add(&testSpec{name: "crash", args: []string{"-exit-after", "20ms", "-exit-code", "3"}})
	f.add(&testSpec{name: "steady", port: testserver.FreePort(t)})
	f.write()
	sawBackOff := make(chan struct{}, 1)
	rr := f.run(t, func(c *Config) {
		c.Backoff = &Backoff{Base: 50 * time.Millisecond, Max: 400 * time.Millisecond}
		inner := c.OnEvent
		c.OnEvent = func(e Event) {
			inner(e)
			if e.Server == "crash" && e.Reason == ReasonBackOff {
				select {
				case sawBackOff <- struct{}{}:
				default:
				}
			}
		}
	})
	st := waitStatus(t, rr.r, "five starts", func(st Status) bool { return len(f.starts("crash")) >= 5 })
	times := f.stampTimes("crash")
	wantGap := []time.Duration{0, 50 * time.Millisecond, 100 * time.Millisecond, 200 * time.Millisecond}
	for i := 2; i < 5; i++ {
		gap := time.Duration(times[i] - times[i-1])
		if gap < wantGap[i-1] {
			t.Errorf("gap before start %d = %v, want at least %v", i+1, gap, wantGap[i-1])
		}
	}
	select {
	case <-sawBackOff:
	default:
		t.Errorf("no BackOff event")
	}
	s, _ := st.Get("crash")
	if s.LastExit == nil || s.LastExit.Code != 3 {
		t.Errorf("lastExit = %+v, want code 3", s.LastExit)
	}
	if s.Restarts < 4 {
		t.Errorf("restarts = %d, want >= 4", s.Restarts)
	}
	if n := len(f.starts("steady")); n != 1 {
		t.Errorf("steady started %d times, want 1", n)
	}
	// Phase shows CrashLoopBackOff while waiting (the cap is 400 ms, so it
	// is seen often).
	waitStatus(t, rr.r, "CrashLoopBackOff", func(st Status) bool {
		s, _ := st.Get("crash")
		return s.Phase == PhaseCrashLoopBackOff && strings.Contains(s.Reason, "back-off")
	})
}

// TestLivenessFailureRestarts: a server whose liveness probe fails
// failureThreshold times is replaced.
func TestLivenessFailureRestarts(t *testing.T) {
	f := newTestFleet(t)
	f.add(&testSpec{name: "sick", port: testserver.FreePort(t), args: []string{"-health-status", "500"},
		extra: "  livenessProbe:\n    httpGet: {path: /health}\n    periodSeconds: 1\n    failureThreshold: 2\n"})
	f.write()
	rr := f.run(t, nil)
	st := waitStatus(t, rr.r, "sick ready", allReady("sick"))
	first := pidOf(st, "sick")
	st = waitStatus(t, rr.r, "sick replaced after liveness failures", func(st Status) bool {
		s, _ := st.Get("sick")
		return s.Ready && s.PID != first && s.PID != 0
	})
	if rr.ev.count("sick", ReasonUnhealthy) < 1 {
		t.Errorf("no Unhealthy event")
	}
	if s, _ := st.Get("sick"); s.Restarts != 1 {
		t.Errorf("restarts = %d, want 1", s.Restarts)
	}
}

// TestBadFileKeepsServersRunning: an invalid file stops nothing, shows the
// error in status; the fixed file converges.
func TestBadFileKeepsServersRunning(t *testing.T) {
	f := newTestFleet(t)
	f.add(&testSpec{name: "a", port: testserver.FreePort(t)})
	f.add(&testSpec{name: "b"})
	f.write()
	rr := f.run(t, nil)
	st := waitStatus(t, rr.r, "ready", allReady("a", "b"))
	a1, b1 := pidOf(st, "a"), pidOf(st, "b")

	if err := os.WriteFile(f.file, []byte("apiVersion: procfleet.dev/v1alpha1\nkind: Server\nmetadata: {name: a}\nspec:\n  command: [x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	st = waitStatus(t, rr.r, "errors in status", func(st Status) bool { return len(st.Errors) > 0 })
	if e := st.Errors[0]; e.File != f.file || e.Line == 0 {
		t.Errorf("status error %+v does not name file and line", e)
	}
	if pidOf(st, "a") != a1 || pidOf(st, "b") != b1 {
		t.Errorf("a bad file changed running servers")
	}

	f.specs["b"].args = []string{"-print", "fixed"}
	f.write()
	st = waitStatus(t, rr.r, "fixed and converged", func(st Status) bool {
		s, _ := st.Get("b")
		return len(st.Errors) == 0 && s.Ready && s.PID != b1 && s.PID != 0
	})
	if pidOf(st, "a") != a1 {
		t.Errorf("fixing the file restarted a")
	}
}

func converge(t *testing.T, f *testFleet, wait bool) (Status, error) {
	t.Helper()
	r, err := New(Config{Files: []string{f.file}, StateDir: f.state, Log: testr.New(t), OneShot: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return r.Converge(ctx, ConvergeOptions{Wait: wait})
}

// TestConvergeAndDown: apply --wait converges, a second apply adopts and
// starts nothing, a failing server is named; down stops dependents first and
// leaves no record and no port held.
func TestConvergeAndDown(t *testing.T) {
	f := newTestFleet(t)
	ports := testserver.FreePorts(t, 2)
	dbPort, apiPort := ports[0], ports[1]
	f.add(&testSpec{name: "db", port: dbPort})
	f.add(&testSpec{name: "api", port: apiPort, deps: []string{"db"}})
	f.write()
	st, err := converge(t, f, true)
	if err != nil {
		t.Fatalf("Converge: %v", err)
	}
	if !allReady("db", "api")(st) {
		t.Fatalf("not all ready after Converge:\n%s", dumpStatus(st))
	}
	db1 := pidOf(st, "db")
	st, err = converge(t, f, true)
	if err != nil {
		t.Fatalf("second Converge: %v", err)
	}
	if pidOf(st, "db") != db1 || len(f.starts("db")) != 1 || len(f.starts("api")) != 1 {
		t.Errorf("second Converge started again: db pid %d (was %d), starts db %d api %d", pidOf(st, "db"), db1, len(f.starts("db")), len(f.starts("api")))
	}

	f.add(&testSpec{name: "bad", port: testserver.FreePort(t), args: []string{"-listen-delay", "10s", "-exit-after", "50ms", "-exit-code", "2"}})
	f.write()
	_, err = converge(t, f, true)
	var nc *NotConvergedError
	if !errors.As(err, &nc) || !strings.Contains(nc.Servers["bad"], "exited with code 2") || len(nc.Servers) != 1 {
		t.Fatalf("Converge with a failing server: %v; want NotConvergedError naming only bad with its exit code", err)
	}
	// DESIGN.md: apply gives its first crash an immediate restart and
	// gives up at the second exit before Ready.
	if len(f.starts("bad")) != 2 {
		t.Errorf("apply started bad %d times, want 2 (one restart)", len(f.starts("bad")))
	}

	var ev events
	err = Down(context.Background(), DownConfig{Files: []string{f.file}, StateDir: f.state, Log: testr.New(t), OnEvent: ev.add}, nil)
	if err != nil {
		t.Fatalf("Down: %v", err)
	}
	apiStopped, dbStopping := ev.index("api", ReasonStopped), ev.index("db", ReasonStopping)
	if apiStopped < 0 || dbStopping < 0 || dbStopping < apiStopped {
		t.Errorf("db began stopping (event %d) before api had stopped (event %d)", dbStopping, apiStopped)
	}
	recs, _ := f.state.Records()
	if len(recs) != 0 {
		t.Errorf("%d records left after down", len(recs))
	}
	if !testserver.PortFree(dbPort) || !testserver.PortFree(apiPort) {
		t.Errorf("ports still held after down")
	}
}

// TestRecordsThatProveNothing: a stale record (its process gone) and a
// record whose pid now belongs to a stranger (this test process, with
// another start time) are removed without a signal and their servers
// started; an unparsable record quarantines its server (UntrustedRecord),
// and the quarantine is lifted (and the server started) only because the
// record names no process, the port is free and no process runs the
// declared command line (TestUntrustedQuarantineLiftedWhenProcessGone
// checks that a live process keeps it).
func TestRecordsThatProveNothing(t *testing.T) {
	f := newTestFleet(t)
	ports := testserver.FreePorts(t, 3)
	f.add(&testSpec{name: "stale", port: ports[0]})
	f.add(&testSpec{name: "reused", port: ports[1]})
	f.add(&testSpec{name: "corrupt", port: ports[2]})
	f.write()

	// A pid that is gone: a process that ran and was reaped.
	gone := exec.Command("/bin/true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	base := actuate.Record{Version: actuate.RecordVersion, PGID: 1, StartTime: 1, BootID: "x", UID: os.Getuid(),
		Cmdline: []string{"/bin/srv"}, SpecHash: "sha256:old", StartedAt: time.Now().UTC()}
	rec := base
	rec.Name, rec.PID, rec.PGID = "stale", gone.ProcessState.Pid(), gone.ProcessState.Pid()
	if err := f.state.WriteRecord(rec); err != nil {
		t.Fatal(err)
	}
	rec = base
	rec.Name, rec.PID, rec.PGID = "reused", os.Getpid(), os.Getpid()
	if err := f.state.WriteRecord(rec); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(f.state.RecordPath("corrupt"), []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}

	rr := f.run(t, nil)
	waitStatus(t, rr.r, "stale, reused and corrupt started", allReady("stale", "reused", "corrupt"))
	if q, l := rr.ev.count("corrupt", ReasonQuarantined), rr.ev.count("corrupt", ReasonQuarantineLifted); q < 1 || l != 1 {
		t.Errorf("corrupt: %d Quarantined and %d QuarantineLifted events, want at least 1 and 1", q, l)
	}
	for _, n := range []string{"stale", "reused"} {
		if rr.ev.count(n, actuate.EventRecordRemoved) != 1 {
			t.Errorf("%s: no RecordRemoved event", n)
		}
	}
	// The record was moved aside when first read, kept for a person to
	// see; renamed .resolved-<time> when the quarantine was lifted.
	if moved, _ := filepath.Glob(f.state.RecordPath("corrupt") + ".resolved-*"); len(moved) != 1 {
		t.Errorf("the corrupt record was not moved aside and resolved: %v", moved)
	}
}
