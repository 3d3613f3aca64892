package reconciler

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/procfleet/procfleet/spec"
)

func srv(name string, policy spec.RestartPolicy, deps ...string) *spec.Server {
	return &spec.Server{
		APIVersion: spec.APIVersion, Kind: spec.Kind,
		Metadata: spec.ObjectMeta{Name: name},
		Spec: spec.ServerSpec{
			Command: []string{"./bin/" + name}, Port: 8080, RestartPolicy: policy, DependsOn: deps,
		},
	}
}

func want(name string, kind ActionKind, phase Phase, reason string) Action {
	return Action{Server: name, Kind: kind, Phase: phase, Reason: reason}
}

func TestPlanServer(t *testing.T) {
	exit1 := &LastExit{Code: 1, Reason: "exited with code 1"}
	notFound := &LastExit{Code: -1, Reason: "program ./bin/api not found in workingDir /repo"}
	exit0 := &LastExit{Code: 0, Reason: "exited with code 0"}
	killed := &LastExit{Code: -1, Signal: "SIGKILL", Reason: "killed by signal 9 (SIGKILL)"}
	daemonized := &LastExit{Code: 0, Reason: "daemonized: its first process exited with code 0 before it was ready and left pid 7 (nginx: master process nginx) running in the background"}
	running := Observed{Ownership: OwnOwned, SpecHash: "h1", Tracked: true, Ready: true, Phase: PhaseRunning}
	one := func(name string, policy spec.RestartPolicy) map[string]Desired {
		return map[string]Desired{name: {Server: srv(name, policy), Hash: "h1"}}
	}
	withRunning := func(o Observed, mut func(*Observed)) Observed { mut(&o); return o }

	tests := []struct {
		name     string
		desired  map[string]Desired
		observed map[string]Observed
		server   string
		want     Action
	}{
		{
			name:    "missing: declared, no record, no process => start",
			desired: one("api", spec.RestartAlways), server: "api",
			want: func() Action { a := want("api", ActionStart, PhaseStarting, "not running"); a.Fresh = true; return a }(),
		},
		{
			name:    "running, same hash, ready => nothing",
			desired: one("api", spec.RestartAlways), observed: map[string]Observed{"api": running}, server: "api",
			want: want("api", ActionNothing, PhaseRunning, "ready"),
		},
		{
			name:    "probe-only change: hash unchanged => nothing, no restart",
			desired: one("api", spec.RestartAlways), observed: map[string]Observed{"api": running}, server: "api",
			want: want("api", ActionNothing, PhaseRunning, "ready"),
		},
		{
			name:     "running but not ready => nothing (readiness is reported, not acted on)",
			desired:  one("api", spec.RestartAlways),
			observed: map[string]Observed{"api": withRunning(running, func(o *Observed) { o.Ready = false })},
			server:   "api",
			want:     want("api", ActionNothing, PhaseRunning, "not ready"),
		},
		{
			name:     "spec hash changed => replace",
			desired:  map[string]Desired{"api": {Server: srv("api", spec.RestartAlways), Hash: "h2"}},
			observed: map[string]Observed{"api": running}, server: "api",
			want: func() Action {
				a := want("api", ActionReplace, PhaseStopping, "spec changed")
				a.Fresh = true
				return a
			}(),
		},
		{
			name:     "liveness failed => replace (restart)",
			desired:  one("api", spec.RestartAlways),
			observed: map[string]Observed{"api": withRunning(running, func(o *Observed) { o.LivenessFailed = true })},
			server:   "api",
			want:     want("api", ActionReplace, PhaseStopping, "liveness probe failed"),
		},
		{
			name:     "owned and not tracked => adopt, never start again",
			desired:  one("api", spec.RestartAlways),
			observed: map[string]Observed{"api": {Ownership: OwnOwned, SpecHash: "h1", Phase: PhasePending}},
			server:   "api",
			want:     want("api", ActionAdopt, PhaseRunning, "adopted: record proves ownership"),
		},
		{
			name:     "owned, not tracked, hash changed => replace",
			desired:  map[string]Desired{"api": {Server: srv("api", spec.RestartAlways), Hash: "h2"}},
			observed: map[string]Observed{"api": {Ownership: OwnOwned, SpecHash: "h1"}},
			server:   "api",
			want: func() Action {
				a := want("api", ActionReplace, PhaseStopping, "spec changed")
				a.Fresh = true
				return a
			}(),
		},
		{
			name:     "starting => nothing while the readiness wait runs",
			desired:  one("api", spec.RestartAlways),
			observed: map[string]Observed{"api": {Ownership: OwnOwned, SpecHash: "h1", Tracked: true, Starting: true, Phase: PhaseStarting}},
			server:   "api",
			want:     want("api", ActionNothing, PhaseStarting, "starting"),
		},
		{
			name:     "dead, Always, exit 1 => restart",
			desired:  one("api", spec.RestartAlways),
			observed: map[string]Observed{"api": {Exit: exit1, ExitHash: "h1", Phase: PhaseRunning}},
			server:   "api",
			want:     want("api", ActionStart, PhaseStarting, "restarting after exited with code 1"),
		},
		{
			name:     "dead, Always, exit 0 => restart",
			desired:  one("api", spec.RestartAlways),
			observed: map[string]Observed{"api": {Exit: exit0, ExitHash: "h1"}},
			server:   "api",
			want:     want("api", ActionStart, PhaseStarting, "restarting after exited with code 0"),
		},
		{
			name:     "dead, OnFailure, exit 0 => stays stopped",
			desired:  one("api", spec.RestartOnFailure),
			observed: map[string]Observed{"api": {Exit: exit0, ExitHash: "h1"}},
			server:   "api",
			want:     want("api", ActionNothing, PhaseStopped, "exited with code 0"),
		},
		{
			name:     "dead, OnFailure, exit 1 => restart",
			desired:  one("api", spec.RestartOnFailure),
			observed: map[string]Observed{"api": {Exit: exit1, ExitHash: "h1"}},
			server:   "api",
			want:     want("api", ActionStart, PhaseStarting, "restarting after exited with code 1"),
		},
		{
			name:     "dead, OnFailure, killed by signal => restart",
			desired:  one("api", spec.RestartOnFailure),
			observed: map[string]Observed{"api": {Exit: killed, ExitHash: "h1"}},
			server:   "api",
			want:     want("api", ActionStart, PhaseStarting, "restarting after killed by signal 9 (SIGKILL)"),
		},
		{
			name:     "dead, Never, exit 1 => Failed, not restarted",
			desired:  one("api", spec.RestartNever),
			observed: map[string]Observed{"api": {Exit: exit1, ExitHash: "h1"}},
			server:   "api",
			want:     want("api", ActionNothing, PhaseFailed, "exited with code 1"),
		},
		{
			name:     "dead, Never, exit 0 => Stopped, not restarted",
			desired:  one("api", spec.RestartNever),
			observed: map[string]Observed{"api": {Exit: exit0, ExitHash: "h1"}},
			server:   "api",
			want:     want("api", ActionNothing, PhaseStopped, "exited with code 0"),
		},
		{
			name:     "dead, Never, but the spec changed since => fresh start",
			desired:  map[string]Desired{"api": {Server: srv("api", spec.RestartNever), Hash: "h2"}},
			observed: map[string]Observed{"api": {Exit: exit1, ExitHash: "h1", Phase: PhaseFailed}},
			server:   "api",
			want:     func() Action { a := want("api", ActionStart, PhaseStarting, "not running"); a.Fresh = true; return a }(),
		},
		{
			name:     "daemonized, Always => Failed / Daemonized, not restarted",
			desired:  one("api", spec.RestartAlways),
			observed: map[string]Observed{"api": {Exit: daemonized, ExitHash: "h1", Daemonized: true, ExitsBeforeReady: 1}},
			server:   "api",
			want: func() Action {
				a := want("api", ActionNothing, PhaseFailed, ReasonDaemonized)
				a.Message = daemonized.Reason
				return a
			}(),
		},
		{
			name:     "daemonized, then a start asked for => started again",
			desired:  map[string]Desired{"api": {Server: srv("api", spec.RestartAlways), Hash: "h1", StartNow: true}},
			observed: map[string]Observed{"api": {Exit: daemonized, ExitHash: "h1", Daemonized: true, Phase: PhaseFailed}},
			server:   "api",
			want: func() Action {
				a := want("api", ActionStart, PhaseStarting, "start requested")
				a.Fresh = true
				return a
			}(),
		},
		{
			name:     "daemonized, then the spec changed => fresh start",
			desired:  map[string]Desired{"api": {Server: srv("api", spec.RestartAlways), Hash: "h2"}},
			observed: map[string]Observed{"api": {Exit: daemonized, ExitHash: "h1", Daemonized: true, Phase: PhaseFailed}},
			server:   "api",
			want:     func() Action { a := want("api", ActionStart, PhaseStarting, "not running"); a.Fresh = true; return a }(),
		},
		{
			name:     "apply: first exit before Ready => restart at once, the rule named",
			desired:  map[string]Desired{"api": {Server: srv("api", spec.RestartAlways), Hash: "h1", OneShot: true}},
			observed: map[string]Observed{"api": {Exit: exit1, ExitHash: "h1", ExitsBeforeReady: 1, RestartRule: "exit 1 within 10s of Ready: first restart at once"}},
			server:   "api",
			want:     want("api", ActionStart, PhaseStarting, "restarting after exited with code 1 (exit 1 within 10s of Ready: first restart at once)"),
		},
		{
			name:     "apply: second exit before Ready => Failed",
			desired:  map[string]Desired{"api": {Server: srv("api", spec.RestartAlways), Hash: "h1", OneShot: true}},
			observed: map[string]Observed{"api": {Exit: exit1, ExitHash: "h1", ExitsBeforeReady: 2}},
			server:   "api",
			want:     want("api", ActionNothing, PhaseFailed, "exited with code 1; exited twice before it was Ready"),
		},
		{
			name:     "apply: program cannot be executed => Failed at once, no second try",
			desired:  map[string]Desired{"api": {Server: srv("api", spec.RestartAlways), Hash: "h1", OneShot: true}},
			observed: map[string]Observed{"api": {Exit: notFound, ExitHash: "h1", ExitsBeforeReady: 1, NotRunnable: true}},
			server:   "api",
			want:     want("api", ActionNothing, PhaseFailed, "program ./bin/api not found in workingDir /repo"),
		},
		{
			name:     "up: program cannot be executed => restart (a build may put it there)",
			desired:  one("api", spec.RestartAlways),
			observed: map[string]Observed{"api": {Exit: notFound, ExitHash: "h1", ExitsBeforeReady: 1, NotRunnable: true}},
			server:   "api",
			want:     want("api", ActionStart, PhaseStarting, "restarting after program ./bin/api not found in workingDir /repo"),
		},
		{
			name:     "apply: exit after Ready => Failed",
			desired:  map[string]Desired{"api": {Server: srv("api", spec.RestartAlways), Hash: "h1", OneShot: true}},
			observed: map[string]Observed{"api": {Exit: exit1, ExitHash: "h1", ExitAfterReady: true}},
			server:   "api",
			want:     want("api", ActionNothing, PhaseFailed, "exited with code 1; exited after it was Ready"),
		},
		{
			name:     "up: exit after Ready => restart",
			desired:  one("api", spec.RestartAlways),
			observed: map[string]Observed{"api": {Exit: exit1, ExitHash: "h1", ExitAfterReady: true, ExitsBeforeReady: 5}},
			server:   "api",
			want:     want("api", ActionStart, PhaseStarting, "restarting after exited with code 1"),
		},
		{
			name:     "untrusted record quarantine lifted => start, lifting first",
			desired:  one("api", spec.RestartAlways),
			observed: map[string]Observed{"api": {Lifted: "pid 9 is gone", Phase: PhaseQuarantined}},
			server:   "api",
			want: func() Action {
				a := want("api", ActionStart, PhaseStarting, "not running")
				a.Fresh, a.Lifted, a.Phase = true, "pid 9 is gone", PhaseStarting
				return a
			}(),
		},
		{
			name:     "backoff not expired => wait in CrashLoopBackOff",
			desired:  one("api", spec.RestartAlways),
			observed: map[string]Observed{"api": {Exit: exit1, ExitHash: "h1", BackoffRemaining: 4 * time.Second}},
			server:   "api",
			want: func() Action {
				a := want("api", ActionWait, PhaseCrashLoopBackOff, "back-off 4s restarting after exited with code 1")
				a.RequeueAfter = 4 * time.Second
				return a
			}(),
		},
		{
			name: "dependency not ready => wait in Pending",
			desired: map[string]Desired{
				"db":  {Server: srv("db", spec.RestartAlways), Hash: "d"},
				"api": {Server: srv("api", spec.RestartAlways, "db"), Hash: "h1"},
			},
			observed: map[string]Observed{"db": {Ownership: OwnOwned, SpecHash: "d", Tracked: true, Starting: true}},
			server:   "api",
			want:     want("api", ActionWait, PhasePending, "waiting for db to be Ready"),
		},
		{
			name: "dependency ready => start",
			desired: map[string]Desired{
				"db":  {Server: srv("db", spec.RestartAlways), Hash: "d"},
				"api": {Server: srv("api", spec.RestartAlways, "db"), Hash: "h1"},
			},
			observed: map[string]Observed{"db": {Ownership: OwnOwned, SpecHash: "d", Tracked: true, Ready: true}},
			server:   "api",
			want:     func() Action { a := want("api", ActionStart, PhaseStarting, "not running"); a.Fresh = true; return a }(),
		},
		{
			name:    "removed from files, running => stop (prune)",
			desired: map[string]Desired{}, observed: map[string]Observed{"api": running}, server: "api",
			want: want("api", ActionStop, PhaseStopping, "removed from the fleet files"),
		},
		{
			name:    "removed from files, not running => nothing, Stopped",
			desired: map[string]Desired{}, observed: map[string]Observed{"api": {Phase: PhaseStopped}}, server: "api",
			want: want("api", ActionNothing, PhaseStopped, "not declared"),
		},
		{
			name:    "removed from files with a pruned dependent still running => wait",
			desired: map[string]Desired{},
			observed: map[string]Observed{
				"db":  withRunning(running, func(o *Observed) {}),
				"api": withRunning(running, func(o *Observed) { o.DependsOn = []string{"db"} }),
			},
			server: "db",
			want: func() Action {
				a := want("db", ActionWait, PhaseRunning, "waiting for dependents to stop: api")
				a.Quiet = true
				return a
			}(),
		},
		{
			name:     "port held by a stranger => quarantine PortConflict",
			desired:  one("api", spec.RestartAlways),
			observed: map[string]Observed{"api": {PortHolder: "pid 77 (nc -l 8080)", Phase: PhasePending}},
			server:   "api",
			want: func() Action {
				a := want("api", ActionQuarantine, PhaseQuarantined, "PortConflict: port 8080 is held by pid 77 (nc -l 8080); it starts once the port is free")
				a.QuarantineReason = ReasonPortConflict
				a.Message = "port 8080 is held by pid 77 (nc -l 8080); it starts once the port is free"
				a.RequeueAfter = 100 * time.Millisecond
				return a
			}(),
		},
		{
			name:     "port still held at the 4th re-check => look again in 1s (the cap)",
			desired:  one("api", spec.RestartAlways),
			observed: map[string]Observed{"api": {PortHolder: "pid 77 (nc -l 8080)", PortChecks: 4, Phase: PhaseQuarantined}},
			server:   "api",
			want: func() Action {
				a := want("api", ActionQuarantine, PhaseQuarantined, "PortConflict: port 8080 is held by pid 77 (nc -l 8080); it starts once the port is free")
				a.QuarantineReason = ReasonPortConflict
				a.Message = "port 8080 is held by pid 77 (nc -l 8080); it starts once the port is free"
				a.RequeueAfter = time.Second
				return a
			}(),
		},
		{
			name:     "port still held at the 2nd re-check => look again in 400ms",
			desired:  one("api", spec.RestartAlways),
			observed: map[string]Observed{"api": {PortHolder: "pid 77 (nc -l 8080)", PortChecks: 2, Phase: PhaseQuarantined}},
			server:   "api",
			want: func() Action {
				a := want("api", ActionQuarantine, PhaseQuarantined, "PortConflict: port 8080 is held by pid 77 (nc -l 8080); it starts once the port is free")
				a.QuarantineReason = ReasonPortConflict
				a.Message = "port 8080 is held by pid 77 (nc -l 8080); it starts once the port is free"
				a.RequeueAfter = 400 * time.Millisecond
				return a
			}(),
		},
		{
			name:     "record quarantined (identity mismatch) => quarantine, signal nothing",
			desired:  one("api", spec.RestartAlways),
			observed: map[string]Observed{"api": {Ownership: OwnQuarantined, Reason: "IdentityMismatch", Message: "command line differs", Phase: PhasePending}},
			server:   "api",
			want: func() Action {
				a := want("api", ActionQuarantine, PhaseQuarantined, "IdentityMismatch: command line differs")
				a.QuarantineReason, a.Message = "IdentityMismatch", "command line differs"
				return a
			}(),
		},
		{
			name:     "already quarantined => nothing, keep",
			desired:  one("api", spec.RestartAlways),
			observed: map[string]Observed{"api": {Ownership: OwnQuarantined, Reason: "UnverifiedOwner", Phase: PhaseQuarantined}},
			server:   "api",
			want: func() Action {
				a := want("api", ActionNothing, PhaseQuarantined, "UnverifiedOwner")
				a.QuarantineReason = "UnverifiedOwner"
				return a
			}(),
		},
		{
			name:     "quarantined and removed from the files => still never stopped",
			desired:  map[string]Desired{},
			observed: map[string]Observed{"api": {Ownership: OwnQuarantined, Reason: "Unkillable", Phase: PhaseQuarantined}},
			server:   "api",
			want: func() Action {
				a := want("api", ActionNothing, PhaseQuarantined, "Unkillable")
				a.QuarantineReason = "Unkillable"
				return a
			}(),
		},
		{
			name:     "stale record => remove it, start",
			desired:  one("api", spec.RestartAlways),
			observed: map[string]Observed{"api": {Ownership: OwnStale, Reason: "process gone", SpecHash: "h1"}},
			server:   "api",
			want: func() Action {
				a := want("api", ActionStart, PhaseStarting, "not running (process gone)")
				a.RemoveRecord, a.Fresh = true, true
				return a
			}(),
		},
		{
			name:     "stranger reused the pid => remove the record, signal nothing, start",
			desired:  one("api", spec.RestartNever),
			observed: map[string]Observed{"api": {Ownership: OwnReused, Reason: "start time differs", SpecHash: "h1"}},
			server:   "api",
			want: func() Action {
				a := want("api", ActionStart, PhaseStarting, "not running (start time differs)")
				a.RemoveRecord, a.Fresh = true, true
				return a
			}(),
		},
		{
			name:     "stale record of a server no longer declared => remove it, nothing else",
			desired:  map[string]Desired{},
			observed: map[string]Observed{"api": {Ownership: OwnStale}},
			server:   "api",
			want: func() Action {
				a := want("api", ActionNothing, PhaseStopped, "not declared")
				a.RemoveRecord = true
				return a
			}(),
		},
		{
			name:     "held by down, running => stop",
			desired:  map[string]Desired{"api": {Server: srv("api", spec.RestartAlways), Hash: "h1", Held: true}},
			observed: map[string]Observed{"api": running}, server: "api",
			want: want("api", ActionStop, PhaseStopping, ReasonStoppedByUser),
		},
		{
			name: "held by down, with a held dependent still running => wait",
			desired: map[string]Desired{
				"db":  {Server: srv("db", spec.RestartAlways), Hash: "h1", Held: true},
				"api": {Server: srv("api", spec.RestartAlways, "db"), Hash: "h1", Held: true},
			},
			observed: map[string]Observed{
				"db":  running,
				"api": withRunning(running, func(o *Observed) { o.DependsOn = []string{"db"} }),
			},
			server: "db",
			want: func() Action {
				a := want("db", ActionWait, PhaseRunning, "waiting for dependents to stop: api")
				a.Quiet = true
				return a
			}(),
		},
		{
			name: "held by down, its dependent stays declared => stop",
			desired: map[string]Desired{
				"db":  {Server: srv("db", spec.RestartAlways), Hash: "h1", Held: true},
				"api": {Server: srv("api", spec.RestartAlways, "db"), Hash: "h1"},
			},
			observed: map[string]Observed{
				"db":  running,
				"api": withRunning(running, func(o *Observed) { o.DependsOn = []string{"db"} }),
			},
			server: "db",
			want:   want("db", ActionStop, PhaseStopping, ReasonStoppedByUser),
		},
		{
			name:    "held by down, stopped => nothing",
			desired: map[string]Desired{"api": {Server: srv("api", spec.RestartAlways), Hash: "h1", Held: true}},
			server:  "api",
			want:    want("api", ActionNothing, PhaseStopped, ReasonStoppedByUser),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.observed == nil {
				tt.observed = map[string]Observed{}
			}
			got := PlanServer(tt.server, tt.desired, tt.observed)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("PlanServer(%s) mismatch (-want +got):\n%s", tt.server, diff)
			}
		})
	}
}

func TestPlanCoversEveryServerSorted(t *testing.T) {
	desired := map[string]Desired{
		"web": {Server: srv("web", spec.RestartAlways, "db"), Hash: "w"},
		"db":  {Server: srv("db", spec.RestartAlways), Hash: "d"},
	}
	observed := map[string]Observed{
		"old": {Ownership: OwnOwned, SpecHash: "o", Tracked: true, Ready: true},
	}
	got := Plan(desired, observed)
	var names []string
	var kinds []ActionKind
	for _, a := range got {
		names = append(names, a.Server)
		kinds = append(kinds, a.Kind)
	}
	if diff := cmp.Diff([]string{"db", "old", "web"}, names); diff != "" {
		t.Errorf("Plan servers (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]ActionKind{ActionStart, ActionStop, ActionWait}, kinds); diff != "" {
		t.Errorf("Plan kinds (-want +got):\n%s", diff)
	}
}

func TestPhaseNames(t *testing.T) {
	for p := PhasePending; p <= PhaseQuarantined; p++ {
		var q Phase
		b, _ := p.MarshalText()
		if err := q.UnmarshalText(b); err != nil || q != p {
			t.Errorf("round trip %s: got %s, %v", p, q, err)
		}
	}
	if got := Phase(42).String(); got != "Phase(42)" {
		t.Errorf("Phase(42).String() = %q", got)
	}
}
