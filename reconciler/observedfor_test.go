package reconciler

import (
	"maps"
	"slices"
	"testing"

	"github.com/go-logr/logr"

	"github.com/procfleet/procfleet/spec"
)

// TestObservedForStoppedDependents: the plan of a server being stopped
// sees the running servers that depend on it, by the fleet or by the
// down's list, and none when nothing declares a dependency, however the
// fleet and the list change.
func TestObservedForStoppedDependents(t *testing.T) {
	r, err := New(Config{StateDir: benchStateDir(t), Log: logr.Discard()})
	if err != nil {
		t.Fatal(err)
	}
	fleet := func(webDeps ...string) *spec.Fleet {
		f := &spec.Fleet{}
		for i, n := range []string{"api", "web"} {
			s := spec.Server{APIVersion: spec.APIVersion, Kind: spec.Kind, Metadata: spec.ObjectMeta{Name: n},
				Spec: spec.ServerSpec{Command: []string{"/bin/srv"}, Port: 20000 + i}}
			if n == "web" {
				s.Spec.DependsOn = webDeps
			}
			spec.SetDefaults(&s)
			f.Servers = append(f.Servers, s)
		}
		return f
	}
	seen := func() []string {
		t.Helper()
		r.mu.Lock()
		desired := r.desiredLocked()
		r.mu.Unlock()
		return slices.Sorted(maps.Keys(r.observedFor("api", Observed{}, desired, false)))
	}
	r.setDesired(fleet(), nil)
	r.mu.Lock()
	for _, n := range []string{"api", "web"} {
		r.serverLocked(n).st.pid = 100 // running
		r.held[n] = true
	}
	r.stopping = map[string][]string{}
	r.setStoppingLocked("web", nil)
	r.mu.Unlock()
	if got := seen(); !slices.Equal(got, []string{"api"}) {
		t.Errorf("no dependencies: api's plan sees %v, want [api]", got)
	}

	r.setDesired(fleet("api"), nil)
	if got := seen(); !slices.Equal(got, []string{"api", "web"}) {
		t.Errorf("web depends on api in the fleet: api's plan sees %v, want [api web]", got)
	}

	// The down listed web with its dependency; the fleet then dropped it.
	r.mu.Lock()
	r.setStoppingLocked("web", []string{"api"})
	r.mu.Unlock()
	r.setDesired(fleet(), nil)
	if got := seen(); !slices.Equal(got, []string{"api", "web"}) {
		t.Errorf("web depends on api in the down's list: api's plan sees %v, want [api web]", got)
	}
	r.mu.Lock()
	r.unstopLocked("web")
	n := r.stoppingDeps
	r.mu.Unlock()
	if got := seen(); n != 0 || !slices.Equal(got, []string{"api"}) {
		t.Errorf("web stopped: api's plan sees %v (%d listed with dependencies), want [api]", got, n)
	}
}
