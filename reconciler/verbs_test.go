package reconciler

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/procfleet/procfleet/spec"
)

// TestPlanRequests: what start and restart ask of Plan, server by server.
func TestPlanRequests(t *testing.T) {
	exit1 := &LastExit{Code: 1, Reason: "exited with code 1"}
	exit0 := &LastExit{Code: 0, Reason: "exited with code 0"}
	running := Observed{Ownership: OwnOwned, SpecHash: "h1", Tracked: true, Ready: true, Phase: PhaseRunning}
	decl := func(policy spec.RestartPolicy, startNow, restart bool, deps ...string) map[string]Desired {
		return map[string]Desired{"api": {Server: srv("api", policy, deps...), Hash: "h1", StartNow: startNow, Restart: restart}}
	}
	fresh := func(a Action) Action { a.Fresh = true; return a }
	tests := []struct {
		name     string
		desired  map[string]Desired
		observed map[string]Observed
		want     Action
	}{
		{
			name:    "restart of a running server => replace now, afresh",
			desired: decl(spec.RestartAlways, true, true), observed: map[string]Observed{"api": running},
			want: fresh(want("api", ActionReplace, PhaseStopping, "restart requested")),
		},
		{
			name:     "restart while it starts => replace",
			desired:  decl(spec.RestartAlways, true, true),
			observed: map[string]Observed{"api": {Ownership: OwnOwned, Tracked: true, Starting: true, SpecHash: "h1", Phase: PhaseStarting}},
			want:     fresh(want("api", ActionReplace, PhaseStopping, "restart requested")),
		},
		{
			name:    "restart of an adoptable process => replace it, not adopt it",
			desired: decl(spec.RestartAlways, true, true), observed: map[string]Observed{"api": {Ownership: OwnOwned, SpecHash: "h1", Phase: PhasePending}},
			want: fresh(want("api", ActionReplace, PhaseStopping, "restart requested")),
		},
		{
			name:    "start of a running server => nothing",
			desired: decl(spec.RestartAlways, true, false), observed: map[string]Observed{"api": running},
			want: want("api", ActionNothing, PhaseRunning, "ready"),
		},
		{
			name:     "restart in CrashLoopBackOff => start now, the backoff skipped",
			desired:  decl(spec.RestartAlways, true, true),
			observed: map[string]Observed{"api": {Exit: exit1, ExitHash: "h1", BackoffRemaining: 8 * time.Second, RestartRule: "exit 3 in a row", Phase: PhaseCrashLoopBackOff}},
			want:     fresh(want("api", ActionStart, PhaseStarting, "restart requested")),
		},
		{
			name:     "start of a Failed server (restartPolicy Never) => start",
			desired:  decl(spec.RestartNever, true, false),
			observed: map[string]Observed{"api": {Exit: exit1, ExitHash: "h1", Phase: PhaseFailed}},
			want:     fresh(want("api", ActionStart, PhaseStarting, "start requested")),
		},
		{
			name:     "start of a completed server (OnFailure, exit 0) => start",
			desired:  decl(spec.RestartOnFailure, true, false),
			observed: map[string]Observed{"api": {Exit: exit0, ExitHash: "h1", Phase: PhaseStopped}},
			want:     fresh(want("api", ActionStart, PhaseStarting, "start requested")),
		},
		{
			name: "start given up on by apply (two exits before Ready) => start",
			desired: func() map[string]Desired {
				d := decl(spec.RestartAlways, true, false)
				dd := d["api"]
				dd.OneShot = true
				d["api"] = dd
				return d
			}(),
			observed: map[string]Observed{"api": {Exit: exit1, ExitHash: "h1", ExitsBeforeReady: 2, Phase: PhaseFailed}},
			want:     fresh(want("api", ActionStart, PhaseStarting, "start requested")),
		},
		{
			name:     "start whose dependency is not Ready => wait for it",
			desired:  decl(spec.RestartAlways, true, false, "db"),
			observed: map[string]Observed{"db": {Ready: false}},
			want:     want("api", ActionWait, PhasePending, "waiting for db to be Ready"),
		},
		{
			name:     "restart of a quarantined server => still quarantined, nothing signalled",
			desired:  decl(spec.RestartAlways, true, true),
			observed: map[string]Observed{"api": {Ownership: OwnQuarantined, Reason: "IdentityMismatch", Message: "command line differs", Phase: PhaseQuarantined}},
			want: func() Action {
				a := want("api", ActionNothing, PhaseQuarantined, "IdentityMismatch: command line differs")
				a.QuarantineReason, a.Message = "IdentityMismatch", "command line differs"
				return a
			}(),
		},
		{
			name: "held (stop) wins over an older request => stop",
			desired: func() map[string]Desired {
				d := decl(spec.RestartAlways, true, true)
				dd := d["api"]
				dd.Held = true
				d["api"] = dd
				return d
			}(),
			observed: map[string]Observed{"api": running},
			want:     want("api", ActionStop, PhaseStopping, ReasonStoppedByUser),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := PlanServer("api", tt.desired, tt.observed)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("PlanServer (-want +got):\n%s", diff)
			}
		})
	}
}

// TestRequestTaken: a request is carried out by the pass that starts,
// replaces or adopts the server, or finds it running; it stays pending
// while the server waits or is quarantined.
func TestRequestTaken(t *testing.T) {
	running := Observed{Ownership: OwnOwned, Tracked: true}
	tests := []struct {
		kind ActionKind
		o    Observed
		want bool
	}{
		{ActionStart, Observed{}, true},
		{ActionReplace, running, true},
		{ActionAdopt, Observed{Ownership: OwnOwned}, true},
		{ActionNothing, running, true},
		{ActionNothing, Observed{Phase: PhaseQuarantined, Ownership: OwnQuarantined}, false},
		{ActionWait, Observed{}, false},
		{ActionQuarantine, Observed{}, false},
		{ActionStop, running, false},
	}
	for _, tt := range tests {
		if got := requestTaken(Action{Kind: tt.kind}, tt.o); got != tt.want {
			t.Errorf("requestTaken(%s, ownership %s) = %v, want %v", tt.kind, tt.o.Ownership, got, tt.want)
		}
	}
}

// TestSettledRequested: a start or restart not carried out yet is never
// settled by what the server showed before it, except a quarantine.
func TestSettledRequested(t *testing.T) {
	readyRunning := settleView{declared: true, passed: true, phase: PhaseRunning, running: true, ready: true, requested: true}
	tests := []struct {
		name string
		v    settleView
		mode settleMode
		want settleVerdict
	}{
		{"ready, restart not taken yet", readyRunning, settleWait, pending},
		{"running, start not taken yet (no wait)", readyRunning, settleApply, pending},
		{"quarantined: the request cannot be taken", settleView{declared: true, passed: true, phase: PhaseQuarantined, requested: true}, settleWait, failedBecause("")},
		{"not looked at yet", settleView{declared: true, phase: PhaseQuarantined, requested: true}, settleWait, pending},
		{"held since (a stop came after): down decides", settleView{declared: true, held: true, passed: true, phase: PhaseStopped, requested: true}, settleWait, ok},
		{"no longer declared: down decides", settleView{passed: true, phase: PhaseStopped, requested: true}, settleWait, ok},
	}
	for _, tt := range tests {
		if got := settled(tt.v, tt.mode); got != tt.want {
			t.Errorf("%s: settled = %+v, want %+v", tt.name, got, tt.want)
		}
	}
}

func TestWithDependencies(t *testing.T) {
	desired := map[string]Desired{
		"web":   {Server: srv("web", spec.RestartAlways, "api")},
		"api":   {Server: srv("api", spec.RestartAlways, "db", "cache")},
		"db":    {Server: srv("db", spec.RestartAlways)},
		"cache": {Server: srv("cache", spec.RestartAlways, "db")},
		"other": {Server: srv("other", spec.RestartAlways)},
	}
	got := withDependencies([]string{"web"}, desired, nil)
	if diff := cmp.Diff([]string{"api", "cache", "db", "web"}, got); diff != "" {
		t.Errorf("withDependencies(web) (-want +got):\n%s", diff)
	}
	got = withDependencies([]string{"db", "gone"}, desired, nil)
	if diff := cmp.Diff([]string{"db", "gone"}, got); diff != "" {
		t.Errorf("withDependencies(db, gone) (-want +got):\n%s", diff)
	}
}

func TestParseVerb(t *testing.T) {
	for _, v := range []Verb{VerbStop, VerbStart, VerbRestart} {
		got, err := ParseVerb(v.String())
		if err != nil || got != v {
			t.Errorf("ParseVerb(%q) = %v, %v", v.String(), got, err)
		}
	}
	if _, err := ParseVerb("kill"); err == nil {
		t.Error("ParseVerb(kill): no error")
	}
}
