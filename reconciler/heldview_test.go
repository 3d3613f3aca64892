package reconciler

import (
	"reflect"
	"testing"
	"time"

	"github.com/go-logr/logr"

	"github.com/procfleet/procfleet/spec"
)

// TestDesiredLockedFollowsHolds: the held view is made again whenever the
// holds (through keepLocked and liftLocked) or the desired map change,
// and only then.
func TestDesiredLockedFollowsHolds(t *testing.T) {
	r, err := New(Config{StateDir: benchStateDir(t), Log: logr.Discard()})
	if err != nil {
		t.Fatal(err)
	}
	fleet := func(names ...string) *spec.Fleet {
		f := &spec.Fleet{}
		for i, n := range names {
			s := spec.Server{APIVersion: spec.APIVersion, Kind: spec.Kind, Metadata: spec.ObjectMeta{Name: n},
				Spec: spec.ServerSpec{Command: []string{"/bin/srv"}, Port: 20000 + i}}
			spec.SetDefaults(&s)
			f.Servers = append(f.Servers, s)
		}
		return f
	}
	same := func(a, b map[string]Desired) bool {
		return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
	}
	heldOf := func(m map[string]Desired) map[string]bool {
		out := map[string]bool{}
		for n, d := range m {
			if d.Held {
				out[n] = true
			}
		}
		return out
	}
	r.setDesired(fleet("api", "web", "db"), nil)

	if got := r.desiredLocked(); !same(got, r.desired) {
		t.Fatal("nothing held: want the desired map itself")
	}
	r.keepLocked([]string{"api"}, false, time.Time{})
	v1 := r.desiredLocked()
	if got := heldOf(v1); !reflect.DeepEqual(got, map[string]bool{"api": true}) {
		t.Errorf("api held: Held on %v", got)
	}
	if same(v1, r.desired) || heldOf(r.desired)["api"] {
		t.Error("the view must be a copy: the desired map itself was changed")
	}
	if v := r.desiredLocked(); !same(v, v1) {
		t.Error("nothing changed: want the same view, not a new copy")
	}
	r.keepLocked([]string{"web"}, false, time.Time{})
	if got := heldOf(r.desiredLocked()); !reflect.DeepEqual(got, map[string]bool{"api": true, "web": true}) {
		t.Errorf("api and web held: Held on %v", got)
	}
	r.liftLocked([]string{"api"})
	if got := heldOf(r.desiredLocked()); !reflect.DeepEqual(got, map[string]bool{"web": true}) {
		t.Errorf("api released: Held on %v", got)
	}
	r.setDesired(fleet("web", "cache"), nil)
	v2 := r.desiredLocked()
	if _, ok := v2["api"]; ok || !v2["web"].Held || v2["cache"].Held || len(v2) != 2 {
		t.Errorf("new fleet, web held: view %v", heldOf(v2))
	}
	r.liftLocked([]string{"web"})
	if got := r.desiredLocked(); !same(got, r.desired) {
		t.Error("nothing held any more: want the desired map itself")
	}
}
