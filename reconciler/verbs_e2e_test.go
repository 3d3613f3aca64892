package reconciler

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"

	"github.com/procfleet/procfleet/actuate"
	"github.com/procfleet/procfleet/internal/testserver"
)

// verb takes a verb on a running reconciler and waits for it (bounded).
func verb(t *testing.T, r *Reconciler, v Verb, names ...string) (Status, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var q *Request
	var err error
	switch v {
	case VerbStop:
		q, err = r.Stop(ctx, names)
	case VerbStart:
		q, err = r.Start(ctx, names)
	case VerbRestart:
		q, err = r.Restart(ctx, names)
	}
	if err != nil {
		return Status{}, err
	}
	return q.Wait(ctx)
}

// heldNames reads held.json's server names.
func heldNames(t *testing.T, sd *actuate.StateDir) []string {
	t.Helper()
	m, err := readHolds(filepath.Join(sd.Path, holdsFile))
	if err != nil {
		t.Fatalf("held.json: %v", err)
	}
	var out []string
	for n := range m {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// waitPasses waits until the reconciler has made n more passes (bounded).
func waitPasses(t *testing.T, r *Reconciler, n uint64) {
	t.Helper()
	waitOnChanges(t, r, 30*time.Second, fmt.Sprintf("%d reconcile passes", n), counted(r, &r.passes, n))
}

// TestStopStartRestartUnderRun: stop keeps a server stopped through
// resyncs, a crash of a sibling and a restart of up (held.json); start
// lifts it; restart replaces only the named server, dependents and
// siblings untouched, its restart count reset.
func TestStopStartRestartUnderRun(t *testing.T) {
	f := newTestFleet(t)
	ports := testserver.FreePorts(t, 3)
	f.add(&testSpec{name: "db", port: ports[0]})
	f.add(&testSpec{name: "api", port: ports[1], deps: []string{"db"}})
	f.add(&testSpec{name: "web", port: ports[2]})
	f.write()
	rr := f.run(t, func(c *Config) { c.ResyncPeriod = 20 * time.Millisecond })
	st := waitStatus(t, rr.r, "all ready", allReady("db", "api", "web"))
	db, web := pidOf(st, "db"), pidOf(st, "web")

	st, err := verb(t, rr.r, VerbStop, "api")
	if err != nil {
		t.Fatalf("Stop(api): %v", err)
	}
	if s, _ := st.Get("api"); s.Phase != PhaseStopped || s.Reason != ReasonStoppedByUser || s.PID != 0 {
		t.Errorf("api after stop: %s/%s pid %d, want Stopped/StoppedByUser", s.Phase, s.Reason, s.PID)
	}
	if !testserver.PortFree(ports[1]) {
		t.Errorf("api's port still held after stop")
	}
	if got := heldNames(t, f.state); !slices.Equal(got, []string{"api"}) {
		t.Errorf("held.json = %v, want [api]", got)
	}

	// A crash of a sibling, and resyncs: api stays stopped.
	if err := syscall.Kill(web, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, rr.r, "web restarted", func(st Status) bool { return allReady("web")(st) && pidOf(st, "web") != web })
	waitPasses(t, rr.r, 20)
	if n := len(f.starts("api")); n != 1 {
		t.Errorf("api started %d times, want 1: the stop did not hold", n)
	}

	// A new up keeps it stopped.
	rr.stop(t)
	rr = f.run(t, nil)
	waitStatus(t, rr.r, "db, web adopted; api kept stopped", func(st Status) bool {
		s, _ := st.Get("api")
		return allReady("db", "web")(st) && s.Phase == PhaseStopped && s.Reason == ReasonStoppedByUser
	})
	if n := len(f.starts("api")); n != 1 {
		t.Errorf("a new up started api (%d starts)", n)
	}

	st, err = verb(t, rr.r, VerbStart, "api")
	if err != nil {
		t.Fatalf("Start(api): %v", err)
	}
	if !allReady("api")(st) || len(heldNames(t, f.state)) != 0 {
		t.Errorf("after start: api %+v, held.json %v", st.Servers, heldNames(t, f.state))
	}
	api := pidOf(st, "api")

	st, err = verb(t, rr.r, VerbRestart, "db")
	if err != nil {
		t.Fatalf("Restart(db): %v", err)
	}
	s, _ := st.Get("db")
	if s.PID == db || s.PID == 0 || !s.Ready || s.Restarts != 0 {
		t.Errorf("db after restart: pid %d (was %d), ready %v, restarts %d; want a new Ready pid, count 0", s.PID, db, s.Ready, s.Restarts)
	}
	if pidOf(st, "api") != api {
		t.Errorf("restart of db restarted its dependent api (pid %d -> %d)", api, pidOf(st, "api"))
	}
	if rr.ev.count("db", ReasonReplacing) != 1 {
		t.Errorf("db replaced %d times, want 1", rr.ev.count("db", ReasonReplacing))
	}

	// Unknown names and undeclared servers are refused before anything.
	var une *UnknownNameError
	if _, err := verb(t, rr.r, VerbRestart, "dbb"); !errors.As(err, &une) || une.Nearest != "db" {
		t.Errorf("Restart(dbb) = %v, want an UnknownNameError suggesting db", err)
	}
}

// TestRestartEscalates: a server that ignores SIGTERM is killed after its
// grace period and comes back Ready.
func TestRestartEscalates(t *testing.T) {
	f := newTestFleet(t)
	f.add(&testSpec{name: "stubborn", port: testserver.FreePort(t), args: []string{"-ignore-term"}, grace: 1})
	f.write()
	rr := f.run(t, nil)
	old := pidOf(waitStatus(t, rr.r, "ready", allReady("stubborn")), "stubborn")
	st, err := verb(t, rr.r, VerbRestart, "stubborn")
	if err != nil {
		t.Fatalf("Restart: %v", err)
	}
	if s, _ := st.Get("stubborn"); s.PID == old || !s.Ready {
		t.Errorf("after restart: pid %d (was %d), ready %v", s.PID, old, s.Ready)
	}
	var kill bool
	for _, e := range rr.ev.all() {
		if e.Server == "stubborn" && strings.Contains(e.Message, "SIGKILL") {
			kill = true
		}
	}
	if !kill {
		t.Errorf("no SIGKILL event: the stop did not escalate")
	}
}

// TestRestartQuarantinedRefused: a server kept from its port by a stranger
// refuses restart, naming the quarantine; the stranger gets no signal.
func TestRestartQuarantinedRefused(t *testing.T) {
	f := newTestFleet(t)
	port := testserver.FreePort(t)
	sigFile := filepath.Join(f.dir, "stranger.signals")
	stranger := startStranger(t, port, sigFile, filepath.Join(f.dir, "stranger.ready"))
	f.add(&testSpec{name: "api", port: port})
	f.write()
	rr := f.run(t, nil)
	waitStatus(t, rr.r, "quarantined", func(st Status) bool { s, _ := st.Get("api"); return s.Phase == PhaseQuarantined })
	_, err := rr.r.Restart(context.Background(), []string{"api"})
	var re *RefusedError
	if !errors.As(err, &re) || !strings.Contains(err.Error(), "PortConflict") || !strings.Contains(err.Error(), "procfleet describe api") {
		t.Fatalf("Restart of a quarantined server = %v; want a RefusedError naming PortConflict", err)
	}
	if b, _ := os.ReadFile(sigFile); len(b) != 0 {
		t.Errorf("the stranger got signals: %q", b)
	}
	_ = stranger
}

// TestActWithoutUp: stop, restart and start carried out by the command
// itself (no up): the hold saved by stop is kept by a later up, restart
// replaces only its server, start lifts the hold; apply lifts every hold.
func TestActWithoutUp(t *testing.T) {
	f := newTestFleet(t)
	ports := testserver.FreePorts(t, 2)
	f.add(&testSpec{name: "db", port: ports[0]})
	f.add(&testSpec{name: "api", port: ports[1], deps: []string{"db"}})
	f.write()
	if _, err := converge(t, f, true); err != nil {
		t.Fatalf("Converge: %v", err)
	}
	act := func(v Verb, names ...string) (Status, error) {
		t.Helper()
		r, err := New(Config{Files: []string{f.file}, StateDir: f.state, Log: testr.New(t), OneShot: true, ResyncPeriod: -1})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		return r.Act(ctx, v, names, true)
	}
	st, err := act(VerbStop, "api")
	if err != nil {
		t.Fatalf("Act(stop api): %v", err)
	}
	if s, _ := st.Get("api"); s.Phase != PhaseStopped || s.Reason != ReasonStoppedByUser {
		t.Errorf("api after stop: %s/%s", s.Phase, s.Reason)
	}
	saved, _ := ReadStatus(f.state.StatusPath())
	if s, _ := saved.Get("api"); s.Reason != ReasonStoppedByUser {
		t.Errorf("status.json says api is %s/%s", s.Phase, s.Reason)
	}

	rr := f.run(t, nil)
	waitStatus(t, rr.r, "up keeps api stopped", func(st Status) bool {
		s, _ := st.Get("api")
		return allReady("db")(st) && s.Phase == PhaseStopped && s.Reason == ReasonStoppedByUser
	})
	rr.stop(t)
	db := len(f.starts("db"))

	st, err = act(VerbRestart, "db")
	if err != nil {
		t.Fatalf("Act(restart db): %v", err)
	}
	if !allReady("db")(st) || len(f.starts("db")) != db+1 || len(f.starts("api")) != 1 {
		t.Errorf("restart db: db starts %d (was %d), api starts %d; status:\n%s", len(f.starts("db")), db, len(f.starts("api")), dumpStatus(st))
	}
	if _, err := act(VerbStart, "api"); err != nil {
		t.Fatalf("Act(start api): %v", err)
	}
	if len(f.starts("api")) != 2 || len(heldNames(t, f.state)) != 0 {
		t.Errorf("start api: %d starts, held.json %v", len(f.starts("api")), heldNames(t, f.state))
	}

	// apply lifts every hold.
	if _, err := act(VerbStop, "api"); err != nil {
		t.Fatal(err)
	}
	if _, err := converge(t, f, true); err != nil {
		t.Fatalf("Converge: %v", err)
	}
	if len(f.starts("api")) != 3 || len(heldNames(t, f.state)) != 0 {
		t.Errorf("apply after stop: api starts %d, held.json %v", len(f.starts("api")), heldNames(t, f.state))
	}
	if err := Down(context.Background(), DownConfig{Files: []string{f.file}, StateDir: f.state, Log: testr.New(t)}, nil); err != nil {
		t.Fatal(err)
	}
}

// TestStopLiftedByFileChange: an edit of a stopped server's declaration
// lifts its stop, under up and while no up ran (held.json's fingerprint);
// an edit of another server does not.
func TestStopLiftedByFileChange(t *testing.T) {
	f := newTestFleet(t)
	ports := testserver.FreePorts(t, 2)
	f.add(&testSpec{name: "api", port: ports[0]})
	f.add(&testSpec{name: "web", port: ports[1]})
	f.write()
	rr := f.run(t, nil)
	waitStatus(t, rr.r, "ready", allReady("api", "web"))
	if _, err := verb(t, rr.r, VerbStop, "api", "web"); err != nil {
		t.Fatal(err)
	}
	f.specs["api"].args = []string{"-print", "edited"}
	f.write()
	waitStatus(t, rr.r, "api started by the edit", allReady("api"))
	if got := heldNames(t, f.state); !slices.Equal(got, []string{"web"}) {
		t.Errorf("held.json after api's edit = %v, want [web]", got)
	}
	if rr.ev.index("api", ReasonStopLifted) < 0 {
		t.Errorf("no StopLifted event for api")
	}
	rr.stop(t)

	// Edited while no up runs: the next up starts it.
	f.specs["web"].args = []string{"-print", "edited"}
	f.write()
	rr = f.run(t, nil)
	waitStatus(t, rr.r, "web started by the edit made without up", allReady("api", "web"))
	if len(heldNames(t, f.state)) != 0 {
		t.Errorf("held.json = %v, want none", heldNames(t, f.state))
	}
}

// TestExecProbeGetsInstanceEnv: an exec readiness probe runs with the
// server's resolved environment (its env file's variables and PORT), not
// only spec.env: the probe passes only if it sees them.
func TestExecProbeGetsInstanceEnv(t *testing.T) {
	f := newTestFleet(t)
	if err := os.WriteFile(filepath.Join(f.dir, ".env"), []byte("PROBE_WANTS=from-env-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	port := testserver.FreePort(t)
	f.add(&testSpec{name: "api", port: port, extra: "  envFile: [.env]\n" +
		"  startupTimeoutSeconds: 20\n" +
		"  readinessProbe:\n    exec: {command: [sh, -c, 'test \"$PROBE_WANTS\" = from-env-file && test \"$PORT\" = " + strconv.Itoa(port) + "']}\n    periodSeconds: 1\n"})
	f.write()
	st, err := converge(t, f, true)
	if err != nil {
		t.Fatalf("Converge: %v (the exec probe did not see the instance's environment)\n%s", err, dumpStatus(st))
	}
	if !allReady("api")(st) {
		t.Errorf("api not Ready:\n%s", dumpStatus(st))
	}
}
