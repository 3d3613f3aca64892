package reconciler

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"github.com/google/go-cmp/cmp"

	"github.com/procfleet/procfleet/spec"
)

// replicated returns the desired state of a server api with n replicas on
// ports 8080.. (every instance with spec hash "new"), and web, which
// depends on it.
func replicated(n int) map[string]Desired {
	api := srv("api", spec.RestartAlways)
	api.Spec.Replicas = &n
	f := &spec.Fleet{Servers: []spec.Server{*api, *srv("web", spec.RestartAlways, "api")}}
	d := desiredOf(f, false)
	for k, v := range d {
		v.Hash = "new"
		d[k] = v
	}
	return d
}

// replicaState is one replica in TestRollingReplace's world.
type replicaState uint8

const (
	oldReady     replicaState = iota // runs the old spec, Ready
	oldNotReady                      // runs the old spec, its probe fails
	oldUnknown                       // runs the old spec, adopted, not checked yet
	oldUntracked                     // runs the old spec, found from its record
	newReady                         // replaced, Ready
	newStarting                      // replaced, starting
	replacing                        // being stopped (Stopping)
	gone                             // not running
)

// planReplica plans replica name as a pass does: its Rollout, when it
// takes a rolling turn, from the others' readiness and spec hashes in
// observed (rolloutOf, as observedFor computes it from the reconciler's
// memory).
func planReplica(name string, desired map[string]Desired, observed map[string]Observed) Action {
	d, self := desired[name], observed[name]
	if rollingTurn(d, self) {
		names := d.Server.InstanceNames()
		ro := rolloutOf(d, names, desired, func(n string) (bool, string, bool) {
			o := observed[n]
			return o.Ready && o.Phase == PhaseRunning, o.SpecHash, desired[n].Restart
		})
		self.Rollout = &ro
	}
	m := map[string]Observed{}
	for k, v := range observed {
		m[k] = v
	}
	m[name] = self
	return PlanServer(name, desired, m)
}

func (s replicaState) observed() Observed {
	switch s {
	case oldReady:
		return Observed{Ownership: OwnOwned, Tracked: true, SpecHash: "old", Ready: true, Phase: PhaseRunning}
	case oldNotReady:
		return Observed{Ownership: OwnOwned, Tracked: true, SpecHash: "old", Phase: PhaseRunning}
	case oldUnknown:
		return Observed{Ownership: OwnOwned, Tracked: true, SpecHash: "old", ReadyUnknown: true, Phase: PhaseRunning}
	case oldUntracked:
		return Observed{Ownership: OwnOwned, SpecHash: "old", Phase: PhasePending}
	case newReady:
		return Observed{Ownership: OwnOwned, Tracked: true, SpecHash: "new", Ready: true, Phase: PhaseRunning}
	case newStarting:
		return Observed{Ownership: OwnOwned, Tracked: true, Starting: true, SpecHash: "new", Phase: PhaseStarting}
	case replacing:
		return Observed{Ownership: OwnOwned, Tracked: true, SpecHash: "old", Phase: PhaseStopping}
	}
	return Observed{Phase: PhasePending}
}

// TestRollingReplace holds the rolling replace to DESIGN.md: one replica
// at a time, in index order, the next only once the replaced one is Ready
// again; a replica that is down already goes at once; one whose readiness
// is not known yet neither goes nor lets the others go.
func TestRollingReplace(t *testing.T) {
	replace := func(n string) Action {
		a := want(n, ActionReplace, PhaseStopping, "spec changed")
		a.Fresh = true
		return a
	}
	wait := func(n string, phase Phase, why string) Action {
		a := want(n, ActionWait, phase, "rolling replace: waits for "+why)
		a.Rolling = true
		return a
	}
	tests := []struct {
		name    string
		states  []replicaState
		held    string
		server  string
		want    Action
		replica int
	}{
		{"all Ready: the first goes", []replicaState{oldReady, oldReady, oldReady}, "", "api-0", replace("api-0"), 3},
		{"all Ready: the second waits for the first", []replicaState{oldReady, oldReady, oldReady}, "", "api-1",
			wait("api-1", PhaseRunning, "api-0 to be replaced first"), 3},
		{"all Ready: the third waits for the first", []replicaState{oldReady, oldReady, oldReady}, "", "api-2",
			wait("api-2", PhaseRunning, "api-0 to be replaced first"), 3},
		{"the first stopping: the second waits for it to be Ready", []replicaState{replacing, oldReady, oldReady}, "", "api-1",
			wait("api-1", PhaseRunning, "api-0 to be Ready"), 3},
		{"the first starting again: the third waits for it", []replicaState{newStarting, oldReady, oldReady}, "", "api-2",
			wait("api-2", PhaseRunning, "api-0 to be Ready"), 3},
		{"the first Ready again: the second goes", []replicaState{newReady, oldReady, oldReady}, "", "api-1", replace("api-1"), 3},
		{"the first Ready again: the third waits for the second", []replicaState{newReady, oldReady, oldReady}, "", "api-2",
			wait("api-2", PhaseRunning, "api-1 to be replaced first"), 3},
		{"two replaced: the last goes", []replicaState{newReady, newReady, oldReady}, "", "api-2", replace("api-2"), 3},
		{"a replica down already goes at once", []replicaState{oldReady, oldNotReady, oldReady}, "", "api-1", replace("api-1"), 3},
		{"the others wait while one is down", []replicaState{oldReady, oldNotReady, oldReady}, "", "api-0",
			wait("api-0", PhaseRunning, "api-1 to be Ready"), 3},
		{"two down: each goes, neither counts against the other", []replicaState{oldReady, oldNotReady, oldNotReady}, "", "api-2", replace("api-2"), 3},
		{"a crashed replica: the others wait for it to be back", []replicaState{oldReady, gone, oldReady}, "", "api-0",
			wait("api-0", PhaseRunning, "api-1 to be Ready"), 3},
		{"readiness not known yet: it waits for its turn", []replicaState{oldReady, oldUnknown, oldReady}, "", "api-1",
			wait("api-1", PhaseRunning, "api-0 to be replaced first"), 3},
		{"readiness not known yet, the others Ready: its turn", []replicaState{newReady, oldUnknown, oldReady}, "", "api-1", replace("api-1"), 3},
		{"readiness not known yet: nor do the others", []replicaState{oldReady, oldUnknown, oldReady}, "", "api-0",
			wait("api-0", PhaseRunning, "api-1 to be Ready"), 3},
		{"found from its record: adopted before its turn", []replicaState{oldUntracked, oldReady, oldReady}, "", "api-0",
			want("api-0", ActionAdopt, PhaseRunning, "adopted: record proves ownership; a rolling replace follows"), 3},
		{"a replica held stopped is not waited for", []replicaState{gone, oldReady, oldReady}, "api-0", "api-1", replace("api-1"), 3},
		{"one replica: replaced at once", []replicaState{oldReady}, "", "api-0", replace("api-0"), 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			desired := replicated(tt.replica)
			observed := map[string]Observed{}
			for i, s := range tt.states {
				name := spec.InstanceName("api", i)
				observed[name] = s.observed()
				if name == tt.held {
					d := desired[name]
					d.Held = true
					desired[name] = d
				}
			}
			got := planReplica(tt.server, desired, observed)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("PlanServer(%s) mismatch (-want +got):\n%s", tt.server, diff)
			}
		})
	}
	// An adopted replica whose readiness has held long enough is counted
	// Ready while it waits for its turn: the others' turns wait for it.
	held := oldUnknown.observed()
	held.ReadinessHeld, held.ReadyFor = true, time.Hour
	obs := map[string]Observed{"api-0": oldReady.observed(), "api-1": held, "api-2": oldReady.observed()}
	if got := planReplica("api-1", replicated(3), obs); got.Kind != ActionWait || !got.Rolling || !got.CountReady {
		t.Errorf("an adopted replica whose readiness held, waiting for its turn: %s (%s), CountReady %v; want a rolling wait that counts it",
			got.Kind, got.Reason, got.CountReady)
	}

	// restart api with replicas this reconciler does not track yet (no up
	// ran it): each is adopted first, and the adoption keeps the restart
	// asked of it pending (its readiness then decides its turn).
	restart := replicated(3)
	for n, rd := range restart {
		rd.Restart = true
		restart[n] = rd
	}
	untracked := oldUnknown.observed()
	untracked.Tracked, untracked.SpecHash = false, restart["api-1"].Hash
	if got := planReplica("api-1", restart, map[string]Observed{"api-0": untracked, "api-1": untracked, "api-2": untracked}); got.Kind != ActionAdopt || !got.Rolling || requestTaken(got, untracked) {
		t.Errorf("restart api, replica not tracked: %s (%s), Rolling %v, taken %v; want an adoption that leaves the restart pending",
			got.Kind, got.Reason, got.Rolling, requestTaken(got, untracked))
	}

	// Without its Rollout (not computed), a Ready replica never goes.
	d := replicated(3)
	o := oldReady.observed()
	if got := PlanServer("api-0", d, map[string]Observed{"api-0": o}); got.Kind != ActionWait || !got.Rolling {
		t.Errorf("a replica planned without its Rollout: %s (%s), want a rolling wait", got.Kind, got.Reason)
	}
}

// TestRollingReplaceOneAtATime plays a rolling replace of five replicas
// through PlanServer alone: at every step at most one replica is not
// Ready, and the replicas are replaced in index order.
func TestRollingReplaceOneAtATime(t *testing.T) {
	const n = 5
	desired := replicated(n)
	states := make([]replicaState, n)
	var order []string
	for step := 0; step < 4*n; step++ {
		observed := map[string]Observed{}
		for i, s := range states {
			observed[spec.InstanceName("api", i)] = s.observed()
		}
		moved := false
		for i := range states {
			name := spec.InstanceName("api", i)
			switch {
			case states[i] == replacing:
				states[i], moved = newStarting, true
			case states[i] == newStarting:
				states[i], moved = newReady, true
			case planReplica(name, desired, observed).Kind == ActionReplace:
				states[i], moved = replacing, true
				order = append(order, name)
			}
			down := 0
			for _, s := range states {
				if s != oldReady && s != newReady {
					down++
				}
			}
			if down > 1 {
				t.Fatalf("step %d: %d replicas down at once: %v", step, down, states)
			}
			// The next replica plans against the world as it is now.
			observed[name] = states[i].observed()
		}
		if !moved {
			break
		}
	}
	want := []string{"api-0", "api-1", "api-2", "api-3", "api-4"}
	if diff := cmp.Diff(want, order); diff != "" {
		t.Errorf("replace order (-want +got):\n%s", diff)
	}
	for i, s := range states {
		if s != newReady {
			t.Errorf("api-%d ends %d, want replaced and Ready", i, s)
		}
	}
}

// TestRollingRestart: restart api (a restart asked of every instance)
// rolls as a spec change does: in index order, the next only once the
// one before is Ready again; restart api-1 alone goes at once; a replica
// that is down is restarted at once.
func TestRollingRestart(t *testing.T) {
	restart := func(n string) Action {
		a := want(n, ActionReplace, PhaseStopping, reasonRestartRequested)
		a.Fresh = true
		return a
	}
	wait := func(n string, why string) Action {
		a := want(n, ActionWait, PhaseRunning, "rolling replace: waits for "+why)
		a.Rolling = true
		return a
	}
	tests := []struct {
		name      string
		states    []replicaState
		restarted []int // the instances a restart is asked of, not yet carried out
		server    string
		want      Action
	}{
		{"restart api: the first goes", []replicaState{newReady, newReady, newReady}, []int{0, 1, 2}, "api-0", restart("api-0")},
		{"restart api: the second waits for the first", []replicaState{newReady, newReady, newReady}, []int{0, 1, 2}, "api-1", wait("api-1", "api-0 to be replaced first")},
		{"restart api: the third waits for the first", []replicaState{newReady, newReady, newReady}, []int{0, 1, 2}, "api-2", wait("api-2", "api-0 to be replaced first")},
		{"the first restarting: the second waits for it to be Ready", []replicaState{newStarting, newReady, newReady}, []int{1, 2}, "api-1", wait("api-1", "api-0 to be Ready")},
		{"the first Ready again: the second goes", []replicaState{newReady, newReady, newReady}, []int{1, 2}, "api-1", restart("api-1")},
		{"the first Ready again: the third waits for the second", []replicaState{newReady, newReady, newReady}, []int{1, 2}, "api-2", wait("api-2", "api-1 to be replaced first")},
		{"restart api-1 alone: it goes", []replicaState{newReady, newReady, newReady}, []int{1}, "api-1", restart("api-1")},
		{"restart api-2 while api-1 is down: it waits", []replicaState{newReady, gone, newReady}, []int{2}, "api-2", wait("api-2", "api-1 to be Ready")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			desired := replicated(len(tt.states))
			observed := map[string]Observed{}
			for i, s := range tt.states {
				observed[spec.InstanceName("api", i)] = s.observed()
			}
			for _, i := range tt.restarted {
				name := spec.InstanceName("api", i)
				d := desired[name]
				d.StartNow, d.Restart = true, true
				desired[name] = d
			}
			got := planReplica(tt.server, desired, observed)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("PlanServer(%s) mismatch (-want +got):\n%s", tt.server, diff)
			}
		})
	}
}

// TestScaledDownStops: an instance beyond the declared replicas is stopped
// (with the reason saying so), the others are left alone, and a replica of
// a server that depends on nothing waits for no one.
func TestScaledDownStops(t *testing.T) {
	desired := replicated(2)
	running := newReady.observed()
	observed := map[string]Observed{"api-0": running, "api-1": running, "api-2": running, "api-3": running}
	for _, name := range []string{"api-2", "api-3"} {
		got := PlanServer(name, desired, observed)
		if w := want(name, ActionStop, PhaseStopping, "scaled down: api declares 2 replicas"); !cmp.Equal(w, got) {
			t.Errorf("PlanServer(%s) = %+v, want %+v", name, got, w)
		}
	}
	for _, name := range []string{"api-0", "api-1"} {
		if got := PlanServer(name, desired, observed); got.Kind != ActionNothing {
			t.Errorf("PlanServer(%s) = %s (%s), want Nothing", name, got.Kind, got.Reason)
		}
	}
	// A pruned dependent of api stops before any replica of api does.
	web := running
	web.DependsOn = []string{"api"}
	observed["web"] = web
	delete(desired, "web")
	for name := range desired {
		d := desired[name]
		d.Held = true
		desired[name] = d
	}
	if got := PlanServer("api-0", desired, observed); got.Kind != ActionWait || got.Reason != "waiting for dependents to stop: web" {
		t.Errorf("PlanServer(api-0) held with web stopping = %s (%s), want a wait for web", got.Kind, got.Reason)
	}
}

func TestExpandNames(t *testing.T) {
	known := []string{"api-0", "api-1", "api-2", "api-10", "db", "web-0"}
	replicated := map[string][]string{"api": {"api-0", "api-1"}, "cache": {}}
	tests := []struct {
		names   []string
		want    []string
		wantErr string
	}{
		{[]string{"db"}, []string{"db"}, ""},
		{[]string{"api-1"}, []string{"api-1"}, ""},
		// The declared instances first, then the ones scaled away that
		// are still known, by index.
		{[]string{"api"}, []string{"api-0", "api-1", "api-2", "api-10"}, ""},
		{[]string{"api-1", "api", "db"}, []string{"api-1", "api-0", "api-2", "api-10", "db"}, ""},
		{[]string{"cache"}, nil, ""},
		// web declares no replicas (here): web-0 is only itself.
		{[]string{"web"}, nil, "no server named web (did you mean"},
		{[]string{"apj"}, nil, "no server named apj (did you mean api?)"},
		{[]string{"api-7"}, nil, "no server named api-7 (did you mean api-0?)"},
	}
	for _, tt := range tests {
		got, err := ExpandNames(tt.names, known, replicated)
		gotErr := ""
		if err != nil {
			gotErr = err.Error()
			if !errors.As(err, new(*UnknownNameError)) {
				t.Errorf("ExpandNames(%q) error %T, want *UnknownNameError", tt.names, err)
			}
		}
		if !strings.HasPrefix(gotErr, tt.wantErr) || (gotErr == "") != (tt.wantErr == "") || !cmp.Equal(got, tt.want) {
			t.Errorf("ExpandNames(%q) = %q, %q; want %q, %q", tt.names, got, gotErr, tt.want, tt.wantErr)
		}
	}
}

func TestSplitInstance(t *testing.T) {
	tests := []struct {
		name   string
		server string
		index  int
		ok     bool
	}{
		{"api-0", "api", 0, true},
		{"api-12", "api", 12, true},
		{"my-api-3", "my-api", 3, true},
		{"api", "", 0, false},
		{"api-", "", 0, false},
		{"-3", "", 0, false},
		{"api-01", "", 0, false},
		{"api-x", "", 0, false},
		{"api--1", "api-", 1, true},
	}
	for _, tt := range tests {
		s, i, ok := SplitInstance(tt.name)
		if s != tt.server || i != tt.index || ok != tt.ok {
			t.Errorf("SplitInstance(%q) = %q, %d, %v; want %q, %d, %v", tt.name, s, i, ok, tt.server, tt.index, tt.ok)
		}
	}
}

// TestReadinessProbe: a replica's default readiness (no probe declared) is
// a TCP connect to its own port; a declared probe is spec's as resolved
// (a port left out is the instance's, a port written is used as written).
func TestReadinessProbe(t *testing.T) {
	n := 3
	api := srv("api", spec.RestartAlways)
	api.Spec.Replicas = &n
	declared := srv("web", spec.RestartAlways)
	declared.Spec.Port, declared.Spec.Replicas = 9000, &n
	declared.Spec.ReadinessProbe = &spec.Probe{TCPSocket: &spec.TCPSocketAction{Port: 7000}}
	plain := srv("db", spec.RestartAlways)
	plain.Spec.Port = 5432
	f := &spec.Fleet{Servers: []spec.Server{*api, *plain, *declared}}
	want := map[string]int{"api-0": 8080, "api-1": 8081, "api-2": 8082, "db": 5432, "web-0": 7000, "web-1": 7000, "web-2": 7000}
	for _, in := range f.Instances() {
		p := ReadinessProbe(&in)
		if p == nil || p.TCPSocket == nil || p.TCPSocket.Port != want[in.Name] {
			t.Errorf("ReadinessProbe(%s) = %+v, want a TCP connect to %d", in.Name, p, want[in.Name])
		}
	}
}

// TestStartRequestReadiness: without a declared readinessProbe the start
// leaves Ready nil, so that actuate checks the port itself (one listener
// table query for every starting server); a declared probe is run as
// declared.
func TestStartRequestReadiness(t *testing.T) {
	n := 2
	api := srv("api", spec.RestartAlways)
	api.Spec.Replicas = &n
	declared := srv("web", spec.RestartAlways)
	declared.Spec.Port = 9000
	declared.Spec.ReadinessProbe = &spec.Probe{TCPSocket: &spec.TCPSocketAction{Port: 7000}}
	portless := srv("job", spec.RestartAlways)
	portless.Spec.Port = 0
	f := &spec.Fleet{Servers: []spec.Server{*api, *declared, *portless}}
	want := map[string]struct {
		port  int
		check bool
	}{"api-0": {8080, false}, "api-1": {8081, false}, "web": {9000, true}, "job": {0, false}}
	got := desiredOf(f, false)
	if len(got) != len(want) {
		t.Fatalf("desiredOf gave %d instances, want %d", len(got), len(want))
	}
	for name, d := range got {
		req := startRequest(d)
		if w := want[name]; req.Port != w.port || (req.Ready != nil) != w.check {
			t.Errorf("startRequest(%s): port %d, check %t; want port %d, check %t", name, req.Port, req.Ready != nil, w.port, w.check)
		}
	}
}

// TestEnqueueDependents: a Ready marks dirty the instances of every server
// that depends on its server, as the fleet in force declares them (the
// index of dependents is rebuilt after each new fleet).
func TestEnqueueDependents(t *testing.T) {
	r, err := New(Config{StateDir: benchStateDir(t), Log: testr.New(t)})
	if err != nil {
		t.Fatal(err)
	}
	r.queue = newQueue(nil)
	n := 2
	db := srv("db", spec.RestartAlways)
	api := srv("api", spec.RestartAlways, "db")
	api.Spec.Replicas = &n
	web := srv("web", spec.RestartAlways, "api", "db")
	r.setDesired(&spec.Fleet{Servers: []spec.Server{*db, *api, *web}}, nil)
	for _, c := range []struct {
		ready string
		want  []string
	}{{"db", []string{"api-0", "api-1", "web"}}, {"api-1", []string{"web"}}, {"web", nil}} {
		r.enqueueDependents(c.ready)
		got := drain(r.queue)
		slices.Sort(got)
		if !slices.Equal(got, c.want) {
			t.Errorf("after %s Ready: dirty %v, want %v", c.ready, got, c.want)
		}
	}
	web.Spec.DependsOn = nil
	r.setDesiredChanged(&spec.Fleet{Servers: []spec.Server{*db, *api, *web}}, nil, []string{"web"})
	r.enqueueDependents("db")
	got := drain(r.queue)
	slices.Sort(got)
	if !slices.Equal(got, []string{"api-0", "api-1"}) {
		t.Errorf("after db Ready in the new fleet: dirty %v, want [api-0 api-1]", got)
	}
}
