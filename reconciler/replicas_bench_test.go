package reconciler

import (
	"testing"

	"github.com/go-logr/logr"

	"github.com/procfleet/procfleet/spec"
)

// BenchmarkRollingPlan1000 is what one resync costs a server of 1,000
// replicas about to be replaced, all Ready: for each replica, its
// observed map and Rollout (observedFor) and the plan (a wait for its
// turn, or the one replace). It is the worst case of the rolling rule:
// with every other replica Ready, each reads all of them.
func BenchmarkRollingPlan1000(b *testing.B) {
	r, err := New(Config{StateDir: benchStateDir(b), Log: logr.Discard()})
	if err != nil {
		b.Fatal(err)
	}
	n := benchServers
	s := spec.Server{APIVersion: spec.APIVersion, Kind: spec.Kind, Metadata: spec.ObjectMeta{Name: "api"},
		Spec: spec.ServerSpec{Command: []string{"/bin/srv"}, Args: []string{"-port", "$(PORT)"}, Port: 20000, Replicas: &n}}
	spec.SetDefaults(&s)
	r.setDesired(&spec.Fleet{Servers: []spec.Server{s}}, nil)
	names := r.instances["api"]
	for _, name := range names {
		st := &r.serverLocked(name).st
		st.phase, st.reason, st.isReady, st.pid, st.hash = PhaseRunning, "ready", true, 1, "sha256:old"
		st.ready.Status = ConditionTrue
	}
	self := Observed{Ownership: OwnOwned, Tracked: true, SpecHash: "sha256:old", Ready: true, Phase: PhaseRunning}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		replaces := 0
		for _, name := range names {
			a := PlanServer(name, r.desired, r.observedFor(name, self, r.desired, true))
			if a.Kind == ActionReplace {
				replaces++
			}
		}
		if replaces != 1 {
			b.Fatalf("%d replicas would be replaced at once, want 1", replaces)
		}
	}
}
