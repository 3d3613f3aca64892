package reconciler

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/testr"

	"github.com/procfleet/procfleet/actuate"
	"github.com/procfleet/procfleet/internal/testserver"
)

// The tests of this file hold apply --wait (Converge, and Reload through a
// running up) to DESIGN.md's exit-code paragraph, and minReadySeconds to
// "Fleet files", with real processes.

// convergeEv is converge with the events collected and the timeout given.
func convergeEv(t *testing.T, f *testFleet, timeout time.Duration) (Status, *events, error) {
	t.Helper()
	ev := &events{}
	r, err := New(Config{Files: []string{f.file}, StateDir: f.state, Log: testr.New(t), OneShot: true, OnEvent: ev.add})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	st, err := r.Converge(ctx, ConvergeOptions{Wait: true})
	return st, ev, err
}

// notConverged checks that err names exactly the servers of want, each
// with every substring given, and that the wait did not run out.
func notConverged(t *testing.T, err error, want map[string][]string) *NotConvergedError {
	t.Helper()
	var nc *NotConvergedError
	if !errors.As(err, &nc) {
		t.Fatalf("Converge: %v, want a NotConvergedError", err)
	}
	if nc.Cause != nil {
		t.Errorf("the wait ran out (%v): apply must give up without waiting for --timeout", nc.Cause)
	}
	if len(nc.Servers) != len(want) {
		t.Errorf("not converged: %v, want exactly %d server(s)", nc.Servers, len(want))
	}
	for name, subs := range want {
		got, ok := nc.Servers[name]
		if !ok {
			t.Errorf("%s is not named: %v", name, nc.Servers)
			continue
		}
		for _, s := range subs {
			if !strings.Contains(got, s) {
				t.Errorf("%s: %q, want it to say %q", name, got, s)
			}
		}
	}
	return nc
}

// TestMinReadySecondsWindow: a server whose readiness is "running" (no
// port, no probe) shows Running, not Ready, reason MinReadySeconds for its
// first second; its dependent starts only once it counts as Ready, which
// is never before a second after it started.
func TestMinReadySecondsWindow(t *testing.T) {
	f := newTestFleet(t)
	f.add(&testSpec{name: "worker"}) // no port: readiness "running", minReadySeconds 1
	f.add(&testSpec{name: "api", port: testserver.FreePort(t), deps: []string{"worker"}})
	f.write()
	rr := f.run(t, nil)

	st := waitStatus(t, rr.r, "worker running", func(st Status) bool {
		s, _ := st.Get("worker")
		return s.Phase == PhaseRunning && s.PID != 0
	})
	switch s, _ := st.Get("worker"); {
	case s.Ready:
		t.Logf("the first look at worker came after its window: %s", PhaseSummary(s))
	case s.Reason != ReasonMinReadySeconds || s.Conditions[0].Reason != ReasonMinReadySeconds || !strings.Contains(s.Conditions[0].Message, "Ready once ready for 1s"):
		t.Errorf("worker running, not Ready: reason %q, condition %+v; want MinReadySeconds", s.Reason, s.Conditions[0])
	}
	waitStatus(t, rr.r, "both Ready", allReady("worker", "api"))

	starting, window, ready := rr.ev.index("worker", ReasonStarting), rr.ev.index("worker", ReasonMinReadySeconds), rr.ev.index("worker", ReasonReady)
	if starting < 0 || window < starting || ready < window {
		t.Fatalf("worker's events out of order: starting %d, window %d, ready %d", starting, window, ready)
	}
	evs := rr.ev.all()
	if took := evs[ready].Time.Sub(evs[starting].Time); took < time.Second {
		t.Errorf("worker counted Ready %s after it began to start, before its minReadySeconds (1s)", took)
	}
	if apiStart := rr.ev.index("api", ReasonStarting); apiStart < ready {
		t.Errorf("api started (event %d) before worker counted as Ready (event %d)", apiStart, ready)
	}
}

// shServer is a fleet document for a server run by sh -c script.
func shServer(name, script string) string {
	return fmt.Sprintf("apiVersion: procfleet.dev/v1alpha1\nkind: Server\nmetadata: {name: %s}\nspec:\n  command: [sh, -c, %q]\n", name, script)
}

// TestApplyWaitExitInsideWindow: a server that exits within its first
// second (its readiness "running", so minReadySeconds 1) is never Ready:
// apply restarts it once and gives up at the second exit, with its exit
// code and last log lines, without waiting for the timeout. (A shell that
// exits at once: a program that exits later, as its own clock says, may
// be slower to start than the window on a loaded machine.)
func TestApplyWaitExitInsideWindow(t *testing.T) {
	f := newTestFleet(t)
	f.add(&testSpec{name: "web", port: testserver.FreePort(t)})
	f.write()
	fleet, err := os.ReadFile(f.file)
	if err != nil {
		t.Fatal(err)
	}
	doc := shServer("migrate", `echo migrating; echo "fatal: no database" >&2; exit 3`)
	if err := os.WriteFile(f.file, append(fleet, []byte("---\n"+doc)...), 0o644); err != nil {
		t.Fatal(err)
	}
	st, ev, err := convergeEv(t, f, 2*time.Minute)
	notConverged(t, err, map[string][]string{"migrate": {"exited with code 3", "exited twice before it was Ready"}})
	s, _ := st.Get("migrate")
	if s.Phase != PhaseFailed || !strings.Contains(s.Message, "fatal: no database") {
		t.Errorf("migrate: %s / %q / %q; want Failed with its log tail", s.Phase, s.Reason, s.Message)
	}
	if n := ev.count("migrate", ReasonReady); n != 0 {
		t.Errorf("migrate was reported Ready %d time(s); it never ran for its minReadySeconds", n)
	}
	if s.Restarts != 1 {
		t.Errorf("migrate restarted %d times, want 1 (one immediate restart)", s.Restarts)
	}
	if w, _ := st.Get("web"); !w.Ready {
		t.Errorf("web: %s, want Ready (the others settle before apply exits)", PhaseSummary(w))
	}
}

// TestApplyWaitReadyThenExits: a server that counted as Ready and exits
// while another is still starting fails apply, which still waits for the
// other to settle, and not for the timeout.
func TestApplyWaitReadyThenExits(t *testing.T) {
	f := newTestFleet(t)
	ports := testserver.FreePorts(t, 2)
	f.add(&testSpec{name: "flaky", port: ports[0], args: []string{"-exit-after", "500ms", "-exit-code", "4"}})
	f.add(&testSpec{name: "slow", port: ports[1], args: []string{"-listen-delay", "3s"}})
	f.write()
	st, ev, err := convergeEv(t, f, 2*time.Minute)
	notConverged(t, err, map[string][]string{"flaky": {"exited with code 4", "exited after it was Ready"}})
	if ev.index("flaky", ReasonReady) < 0 {
		t.Errorf("flaky was never Ready; this test wants an exit after Ready")
	}
	if s, _ := st.Get("slow"); !s.Ready {
		t.Errorf("slow: %s, want Ready: apply waits for the others to settle", PhaseSummary(s))
	}
	if len(f.starts("flaky")) != 1 {
		t.Errorf("flaky started %d times; apply gives up at an exit after Ready, restarting nothing", len(f.starts("flaky")))
	}
}

// TestApplyWaitDependentOfAFailure: a server that waits for a dependency
// that failed is given up on too: apply does not wait out the timeout for
// it.
func TestApplyWaitDependentOfAFailure(t *testing.T) {
	f := newTestFleet(t)
	f.add(&testSpec{name: "db", port: testserver.FreePort(t), args: []string{"-listen-delay", "10s", "-exit-after", "100ms", "-exit-code", "2"}})
	f.add(&testSpec{name: "api", port: testserver.FreePort(t), deps: []string{"db"}})
	f.write()
	_, _, err := convergeEv(t, f, 2*time.Minute)
	notConverged(t, err, map[string][]string{
		"db":  {"exited with code 2"},
		"api": {"its dependency db failed", "waiting for db"},
	})
	if n := len(f.starts("api")); n != 0 {
		t.Errorf("api started %d times while db never was Ready", n)
	}
}

// TestApplyWaitProgramCannotRun: a program that cannot be executed fails
// apply at once, in plain words, whatever the reason.
func TestApplyWaitProgramCannotRun(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "noshebang.sh")
	if err := os.WriteFile(script, []byte("echo hi\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	plain := filepath.Join(dir, "plain")
	if err := os.WriteFile(plain, []byte("#!/bin/sh\necho hi\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	interp := filepath.Join(dir, "interp")
	if err := os.WriteFile(interp, []byte("#!/no/such/interpreter\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, command, workingDir, want string
	}{
		{"not found, relative", "./bin/api", "", "program ./bin/api not found in workingDir " + dir},
		{"not found, bare", "procfleet-no-such-program", "", "program procfleet-no-such-program not found in $PATH"},
		{"not executable", plain, "", "program " + plain + ": is not executable"},
		{"missing workingDir", "./bin/api", "gone", "workingDir " + filepath.Join(dir, "gone") + " does not exist"},
		{"no #! line", script, "", "not a program for this system, or a script without a #! line"},
		{"missing interpreter", interp, "", "the interpreter its #! line names was not found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			file := filepath.Join(dir, "procfleet.yaml")
			yaml := fmt.Sprintf("apiVersion: procfleet.dev/v1alpha1\nkind: Server\nmetadata: {name: api}\nspec:\n  command: [%q]\n", tt.command)
			if tt.workingDir != "" {
				yaml += "  workingDir: " + tt.workingDir + "\n"
			}
			if err := os.WriteFile(file, []byte(yaml), 0o644); err != nil {
				t.Fatal(err)
			}
			f := &testFleet{t: t, dir: dir, file: file, state: newTestFleet(t).state}
			st, _, err := convergeEv(t, f, 2*time.Minute)
			notConverged(t, err, map[string][]string{"api": {tt.want}})
			s, _ := st.Get("api")
			if s.Phase != PhaseFailed || s.LastExit == nil || !strings.Contains(s.LastExit.Reason, tt.want) || strings.Contains(s.Reason, "fork/exec") {
				t.Errorf("api: %s, last exit %+v; want Failed saying %q, not fork/exec", PhaseSummary(s), s.LastExit, tt.want)
			}
			// A program that cannot run is tried once: a second try
			// would find it the same, and it never "exited".
			if s.Restarts != 0 || strings.Contains(s.Reason, "exited") {
				t.Errorf("api: restarts %d, reason %q; want one try, no exit named", s.Restarts, s.Reason)
			}
		})
	}
}

// TestApplyWaitThroughUp: apply --wait through a running up gives up on a
// crash-looping server (two exits before Ready) and on its dependent as
// soon as the others settle, never waiting out the timeout; the healthy
// server is Ready.
func TestApplyWaitThroughUp(t *testing.T) {
	f := newTestFleet(t)
	ports := testserver.FreePorts(t, 2)
	// Exits 100 ms after its start, well inside its window of 5 s.
	f.add(&testSpec{name: "loop", args: []string{"-print", "fatal: bad config", "-exit-after", "100ms", "-exit-code", "5"},
		extra: "  minReadySeconds: 5\n"})
	f.add(&testSpec{name: "api", port: ports[0], deps: []string{"loop"}})
	f.add(&testSpec{name: "web", port: ports[1]})
	f.write()
	rr := f.run(t, nil)
	waitStatus(t, rr.r, "web Ready", allReady("web"))

	st, err := rr.r.Reload(context.Background(), true, 2*time.Minute)
	nc := notConverged(t, err, map[string][]string{
		"loop": {"exited twice before it was Ready", "exited with code 5"},
		"api":  {"its dependency loop failed"},
	})
	if nc.Why["loop"] != "exited twice before it was Ready" {
		t.Errorf("why loop: %q", nc.Why["loop"])
	}
	res := NewApplyResult(st, err)
	if res.NotConverged["api"] != "its dependency loop failed" || len(res.NotConverged) != 2 {
		t.Errorf("apply result: %+v", res.NotConverged)
	}
	if s, _ := st.Get("loop"); !strings.Contains(s.Message, "fatal: bad config") {
		t.Errorf("loop's status message %q, want its last log lines", s.Message)
	}
}

// TestApplyWaitThroughUpAfterCrashLoop: a server that crash-looped under
// up and then came up Ready (its spec unchanged) passes apply --wait: its
// exits before Ready are forgotten once it counts as Ready.
func TestApplyWaitThroughUpAfterCrashLoop(t *testing.T) {
	f := newTestFleet(t)
	count := filepath.Join(f.dir, "runs")
	// Exits at once on its first two runs, then runs as the test server.
	f.add(&testSpec{name: "flappy", noStamp: true, extra: ""})
	f.write()
	yaml := fmt.Sprintf(`apiVersion: procfleet.dev/v1alpha1
kind: Server
metadata: {name: flappy}
spec:
  command: [sh, -c, 'n=$$(cat %[1]q 2>/dev/null || echo 0); echo $$((n+1)) > %[1]q; [ "$$n" -ge 2 ] && exec "$$0" -stamp %[2]q; echo "run $$n: cannot start"; exit 1', %[3]q]
  env: [{name: %[4]s, value: "1"}]
  terminationGracePeriodSeconds: 5
`, count, f.stamp("flappy"), testserver.Command()[0], testserver.EnvVar)
	if err := os.WriteFile(f.file, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	rr := f.run(t, nil)
	st := waitStatus(t, rr.r, "flappy Ready after two exits", allReady("flappy"))
	if s, _ := st.Get("flappy"); s.Restarts != 2 {
		t.Errorf("flappy: %d restarts, want 2 (two exits before it ran)", s.Restarts)
	}
	if _, err := rr.r.Reload(context.Background(), true, 2*time.Minute); err != nil {
		t.Errorf("apply --wait through up of a server Ready after a crash loop: %v", err)
	}
}

// BenchmarkApplyGivesUp measures how soon apply --wait gives up on a server
// that crashes twice while it starts: from the second crash (its last exit
// as the reconciler saw it) to Converge's return, reported as
// ms-after-2nd-exit; a healthy server (Ready once its port accepts)
// starts beside it. DESIGN.md: apply
// exits once the other servers have settled, never waiting out --timeout.
func BenchmarkApplyGivesUp(b *testing.B) {
	var total time.Duration
	n := 0
	for b.Loop() {
		b.StopTimer()
		dir := b.TempDir()
		sd, err := actuate.OpenStateDir(filepath.Join(dir, ".procfleet"))
		if err != nil {
			b.Fatal(err)
		}
		file := filepath.Join(dir, "procfleet.yaml")
		port := testserver.FreePort(b)
		calm := fmt.Sprintf("apiVersion: procfleet.dev/v1alpha1\nkind: Server\nmetadata: {name: calm}\nspec:\n  command: [%q, -port, \"%d\"]\n  port: %d\n  env: [{name: %s, value: \"1\"}]\n",
			testserver.Command()[0], port, port, testserver.EnvVar)
		fleet := shServer("crash", `echo "fatal: no database" >&2; exit 3`) + "---\n" + calm
		if err := os.WriteFile(file, []byte(fleet), 0o644); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() {
			_ = Down(context.Background(), DownConfig{Files: []string{file}, StateDir: sd, Log: logr.Discard()}, nil)
		})
		r, err := New(Config{Files: []string{file}, StateDir: sd, Log: logr.Discard(), OneShot: true})
		if err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		b.StartTimer()
		st, err := r.Converge(ctx, ConvergeOptions{Wait: true})
		returned := time.Now()
		b.StopTimer()
		cancel()
		var nc *NotConvergedError
		s, _ := st.Get("crash")
		if !errors.As(err, &nc) || nc.Cause != nil || s.LastExit == nil {
			b.Fatalf("Converge: %v, crash %s; want it given up on", err, PhaseSummary(s))
		}
		total += returned.Sub(s.LastExit.At)
		n++
		if err := Down(context.Background(), DownConfig{Files: []string{file}, StateDir: sd, Log: logr.Discard()}, nil); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(total.Milliseconds())/float64(n), "ms-after-2nd-exit")
}
