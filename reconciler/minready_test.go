package reconciler

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/procfleet/procfleet/actuate"
	"github.com/procfleet/procfleet/spec"
)

// TestMinReadyTransitions: readiness that holds starts the window (Running,
// not Ready, reason MinReadySeconds, one event); an exit inside it is an
// exit before Ready; readiness lost inside it ends it; counted makes the
// server Ready.
func TestMinReadyTransitions(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	rec := actuate.Record{PID: 42, Port: 8080, StartedAt: now}
	msg := minReadyMessage(time.Second)

	s := &state{phase: PhasePending}
	_, _ = s.start("api", startInput{hash: "h1", fresh: true, reason: "not running", now: now})
	_, _ = s.becameReady("api", readyInput{rec: rec, since: now.Add(10 * time.Millisecond)})
	evs, err := s.minReadyWait("api", msg, now.Add(20*time.Millisecond))
	if err != nil || s.isReady || s.phase != PhaseRunning || s.reason != ReasonMinReadySeconds ||
		s.ready.Status != ConditionFalse || s.ready.Reason != ReasonMinReadySeconds || s.ready.Message != msg {
		t.Fatalf("inside the window: %+v (%v); want Running, not Ready, MinReadySeconds", s, err)
	}
	if len(evs) != 1 || evs[0].Reason != ReasonMinReadySeconds || evs[0].Message != "running (pid 42); "+msg {
		t.Errorf("window events = %+v", evs)
	}
	if evs, _ := s.minReadyWait("api", msg, now.Add(500*time.Millisecond)); len(evs) != 0 {
		t.Errorf("a second pass inside the window sends %+v, want nothing", evs)
	}

	// A start whose window is not over shows it at once, announced once.
	s = &state{phase: PhasePending}
	_, _ = s.start("api", startInput{hash: "h1", fresh: true, reason: "not running", now: now})
	evs, _ = s.becameReady("api", readyInput{rec: rec, since: now, window: time.Second, windowMsg: msg, now: now.Add(10 * time.Millisecond)})
	if s.isReady || s.phase != PhaseRunning || s.reason != ReasonMinReadySeconds || s.ready.Reason != ReasonMinReadySeconds || len(evs) != 1 {
		t.Errorf("started inside its window: %+v, events %+v; want Running, not Ready, MinReadySeconds at once", s, evs)
	}
	if evs, _ := s.minReadyWait("api", msg, now.Add(20*time.Millisecond)); len(evs) != 0 {
		t.Errorf("the pass after the start sends %+v, want nothing", evs)
	}
	// One whose window is over (or 0) waits for the plan to count it.
	s = &state{phase: PhasePending}
	_, _ = s.start("api", startInput{hash: "h1", fresh: true, reason: "not running", now: now})
	if evs, _ := s.becameReady("api", readyInput{rec: rec, since: now, window: time.Second, windowMsg: msg, now: now.Add(time.Second)}); len(evs) != 0 || s.reason == ReasonMinReadySeconds {
		t.Errorf("started after its window: %+v, events %+v; want no window shown", s, evs)
	}

	// An exit inside the window is an exit before Ready.
	exit := exitInput{exit: &LastExit{Code: 1, Reason: "exited with code 1", At: now.Add(600 * time.Millisecond)}, hash: "h1", pid: 42, logTail: "migrating\nfatal: no db"}
	_, _ = s.exited("api", exit)
	if s.exitsBeforeReady != 1 || s.lastExitAfterReady || s.isReady || !s.readySince.IsZero() || s.message != "migrating\nfatal: no db" {
		t.Errorf("exit inside the window: %+v; want an exit before Ready with its log tail", s)
	}

	// Readiness lost inside the window ends it; held again, it starts anew.
	s = &state{phase: PhaseRunning, pid: 42}
	_, _ = s.readiness("api", readinessInput{ok: true, msg: "readiness probe passed", now: now})
	if s.readySince != now || s.isReady || s.readyNote != "readiness probe passed" {
		t.Errorf("readiness held: %+v", s)
	}
	evs, _ = s.readiness("api", readinessInput{reason: "ReadinessProbeFailed", msg: "failed 3 times", now: now.Add(time.Second)})
	if !s.readySince.IsZero() || s.isReady || s.reason != "not ready" || len(evs) != 1 || evs[0].Reason != ReasonNotReady {
		t.Errorf("readiness lost inside the window: %+v, events %+v", s, evs)
	}
	_, _ = s.readiness("api", readinessInput{ok: true, msg: "readiness probe passed", now: now.Add(2 * time.Second)})
	if evs, _ := s.counted("api", now.Add(3*time.Second)); !s.isReady || len(evs) != 1 || evs[0].Message != "readiness probe passed" {
		t.Errorf("counted after the probe passed again: %+v, events %+v", s, evs)
	}
	if evs, _ := s.readiness("api", readinessInput{ok: true, now: now.Add(4 * time.Second)}); len(evs) != 0 || s.readySince != now.Add(2*time.Second) {
		t.Errorf("a pass of a Ready server moved its window: %+v, events %+v", s, evs)
	}

	// An adopted process counts from its spawn: its record's second, ended.
	s = &state{phase: PhasePending}
	_, _ = s.adopt("api", rec, now.Add(time.Hour))
	since := adoptedReadySince(rec.StartedAt, now.Add(time.Hour))
	_, _ = s.readiness("api", readinessInput{ok: true, msg: "adopted process is ready", since: since, now: now.Add(time.Hour)})
	if s.readySince != now.Add(time.Second) {
		t.Errorf("adopted: ready since %v, want the end of its record's second %v", s.readySince, now.Add(time.Second))
	}
}

func TestAdoptedReadySince(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	for _, tt := range []struct {
		started, want time.Time
	}{
		{time.Time{}, now},
		{now.Add(-time.Hour), now.Add(-time.Hour + time.Second)},
		{now.Add(-300 * time.Millisecond), now}, // the second has not ended: never later than now
	} {
		if got := adoptedReadySince(tt.started, now); !got.Equal(tt.want) {
			t.Errorf("adoptedReadySince(%v) = %v, want %v", tt.started, got, tt.want)
		}
	}
}

// TestPlanReadiness: the minReadySeconds rows of the plan.
func TestPlanReadiness(t *testing.T) {
	running := func(name string) *spec.Server { // readiness "running": default window 1 s
		s := srv(name, spec.RestartAlways)
		s.Spec.Port = 0
		return s
	}
	seconds := func(n int) *int { return &n }
	explicit := srv("api", spec.RestartAlways)
	explicit.Spec.MinReadySeconds = seconds(5)
	tracked := Observed{Ownership: OwnOwned, SpecHash: "h1", Tracked: true, Phase: PhaseRunning}
	held := func(d time.Duration) Observed { o := tracked; o.ReadinessHeld, o.ReadyFor = true, d; return o }
	tests := []struct {
		name string
		srv  *spec.Server
		o    Observed
		want Action
	}{
		{"running, held 0.3s of 1s => wait out the window", running("api"), held(300 * time.Millisecond),
			Action{Server: "api", Kind: ActionNothing, Phase: PhaseRunning, Reason: ReasonMinReadySeconds, RequeueAfter: 700 * time.Millisecond, Message: minReadyMessage(time.Second)}},
		{"running, held 1s => counts as Ready", running("api"), held(time.Second),
			Action{Server: "api", Kind: ActionNothing, Phase: PhaseRunning, Reason: "ready", CountReady: true}},
		{"a probe (TCP on the port), held just now => Ready at once", srv("api", spec.RestartAlways), held(0),
			Action{Server: "api", Kind: ActionNothing, Phase: PhaseRunning, Reason: "ready", CountReady: true}},
		{"minReadySeconds 5, held 4s => 1s to go", explicit, held(4 * time.Second),
			Action{Server: "api", Kind: ActionNothing, Phase: PhaseRunning, Reason: ReasonMinReadySeconds, RequeueAfter: time.Second, Message: minReadyMessage(5 * time.Second)}},
		{"not held => not ready", running("api"), tracked,
			Action{Server: "api", Kind: ActionNothing, Phase: PhaseRunning, Reason: "not ready"}},
		{"counted already => ready, nothing more", running("api"), func() Observed { o := held(time.Minute); o.Ready = true; return o }(),
			Action{Server: "api", Kind: ActionNothing, Phase: PhaseRunning, Reason: "ready"}},
	}
	for _, tt := range tests {
		desired := map[string]Desired{"api": {Server: tt.srv, Hash: "h1"}}
		got := PlanServer("api", desired, map[string]Observed{"api": tt.o})
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tt.name, diff)
		}
	}
	// The instance's value wins over the server's (replicas).
	in := &spec.Instance{Name: "api", MinReady: 3 * time.Second}
	d := map[string]Desired{"api": {Server: running("api"), Instance: in, Hash: "h1"}}
	if got := PlanServer("api", d, map[string]Observed{"api": held(time.Second)}); got.RequeueAfter != 2*time.Second {
		t.Errorf("instance minReady 3s, held 1s: requeue after %s, want 2s", got.RequeueAfter)
	}
}

// TestLogTail: only what the process wrote after the offset, at most
// actuate.LogTailLines lines; a rotated log is taken from its start.
func TestLogTail(t *testing.T) {
	dir := t.TempDir()
	sd, err := actuate.OpenStateDir(filepath.Join(dir, "state"))
	if err != nil {
		t.Fatal(err)
	}
	r := &Reconciler{cfg: Config{StateDir: sd}}
	path := sd.LogPath("api")
	write := func(s string) {
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.WriteString(s); err != nil {
			t.Fatal(err)
		}
	}
	if got := r.logTail("api", 0); got != "" {
		t.Errorf("no log: %q, want empty", got)
	}
	write("earlier run\nits last words\n")
	off := r.logSize("api")
	if got := r.logTail("api", off); got != "" {
		t.Errorf("nothing written since the spawn: %q, want empty (not the earlier run's lines)", got)
	}
	write("migrating\nfatal: no db")
	if got := r.logTail("api", off); got != "migrating\nfatal: no db" {
		t.Errorf("tail since the spawn = %q", got)
	}
	write("\n")
	if got := r.logTail("api", off); got != "migrating\nfatal: no db" {
		t.Errorf("tail since the spawn, line feed at the end = %q", got)
	}
	var many strings.Builder
	for i := range 3 * actuate.LogTailLines {
		many.WriteString("line " + strings.Repeat("x", i) + "\n")
	}
	write(many.String())
	if got := strings.Split(r.logTail("api", off), "\n"); len(got) != actuate.LogTailLines {
		t.Errorf("a long log gives %d lines, want %d", len(got), actuate.LogTailLines)
	}
	if got := r.logTail("api", 1<<40); got == "" {
		t.Errorf("an offset past the end (a rotated log): empty, want its tail")
	}
}
