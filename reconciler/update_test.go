package reconciler

import (
	"maps"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/procfleet/procfleet/spec"
)

// fleetOfServers is a fleet of copies of servers, sorted by name as Load
// sorts them, with its instances computed.
func fleetOfServers(servers ...*spec.Server) *spec.Fleet {
	f := &spec.Fleet{}
	for _, s := range servers {
		f.Servers = append(f.Servers, *s)
	}
	slices.SortFunc(f.Servers, func(a, b spec.Server) int {
		switch {
		case a.Metadata.Name < b.Metadata.Name:
			return -1
		case a.Metadata.Name > b.Metadata.Name:
			return 1
		}
		return 0
	})
	return f
}

func withReplicas(s *spec.Server, n int) *spec.Server {
	s.Spec.Replicas = &n
	return s
}

func withArgs(s *spec.Server, args ...string) *spec.Server {
	s.Spec.Args = args
	return s
}

func TestTouchedBy(t *testing.T) {
	base := func() []*spec.Server {
		return []*spec.Server{
			srv("api", spec.RestartAlways),
			srv("db", spec.RestartAlways),
			srv("web", spec.RestartAlways, "api"),
			srv("worker", spec.RestartAlways, "db"),
		}
	}
	before := desiredOf(fleetOfServers(base()...), false)
	cases := []struct {
		name    string
		after   []*spec.Server
		changed []string
		present []string
		want    []string
	}{
		{
			name:  "nothing changed",
			after: base(),
			want:  nil,
		},
		{
			name:    "one server changed: it, then its dependents",
			after:   append(base()[1:], withArgs(srv("api", spec.RestartAlways), "-v")),
			changed: []string{"api"},
			present: []string{"api", "db", "web", "worker"},
			want:    []string{"api", "web"},
		},
		{
			name:    "a leaf changed: no one else",
			after:   append(base()[:3], withArgs(srv("worker", spec.RestartAlways, "db"), "-v")),
			changed: []string{"worker"},
			present: []string{"api", "db", "web", "worker"},
			want:    []string{"worker"},
		},
		{
			name:    "a server removed",
			after:   []*spec.Server{srv("api", spec.RestartAlways), srv("web", spec.RestartAlways, "api"), srv("worker", spec.RestartAlways)},
			changed: []string{"db", "worker"},
			present: []string{"api", "db", "web", "worker"},
			want:    []string{"db", "worker"},
		},
		{
			name:    "a server added",
			after:   append(base(), srv("cache", spec.RestartAlways)),
			changed: []string{"cache"},
			present: []string{"api", "db", "web", "worker"},
			want:    []string{"cache"},
		},
		{
			name:    "replicated: every instance now, and one only still known (scaled away earlier, stopping)",
			after:   append(base()[1:], withReplicas(srv("api", spec.RestartAlways), 2)),
			changed: []string{"api"},
			present: []string{"api", "api-7", "db", "db-1x", "web", "worker"},
			want:    []string{"api", "api-0", "api-1", "api-7", "web"},
		},
		{
			name:    "a recorded name that is no instance of a changed server",
			after:   append(base()[1:], withArgs(srv("api", spec.RestartAlways), "-v")),
			changed: []string{"api"},
			present: []string{"apix", "api-", "api-01", "other-api-1"},
			want:    []string{"api", "web"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cur := desiredOf(fleetOfServers(tc.after...), false)
			got := touchedBy(tc.changed, before, cur, tc.present)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("touchedBy(%v) (-want +got):\n%s", tc.changed, diff)
			}
		})
	}
}

// TestDesiredUpdated checks that an update keeps the entries of unchanged
// servers as they were (pointers included), gives changed ones entries of
// their own (not pointing into the new fleet), and otherwise agrees with
// desiredOf and instanceNamesOf of the new fleet.
func TestDesiredUpdated(t *testing.T) {
	f0 := fleetOfServers(srv("api", spec.RestartAlways), withReplicas(srv("web", spec.RestartAlways, "api"), 2), srv("db", spec.RestartAlways))
	old, oldInsts := desiredOf(f0, false), instanceNamesOf(f0)
	f1 := fleetOfServers(withArgs(srv("api", spec.RestartAlways), "-v"), withReplicas(srv("web", spec.RestartAlways, "api"), 3), srv("cache", spec.RestartAlways))
	changed := []string{"api", "cache", "db", "web"}

	for _, tc := range []struct {
		name    string
		f       *spec.Fleet
		changed []string
		kept    []string // entries that must be old's, pointers included
	}{
		{name: "changed servers", f: f1, changed: changed},
		{name: "nothing changed", f: fleetOfServers(srv("api", spec.RestartAlways), withReplicas(srv("web", spec.RestartAlways, "api"), 2), srv("db", spec.RestartAlways)),
			kept: []string{"api", "db", "web-0", "web-1"}},
		{name: "one of three changed", f: fleetOfServers(withArgs(srv("api", spec.RestartAlways), "-v"), withReplicas(srv("web", spec.RestartAlways, "api"), 2), srv("db", spec.RestartAlways)),
			changed: []string{"api"}, kept: []string{"db", "web-0", "web-1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, insts := desiredUpdated(old, oldInsts, tc.f, tc.changed, false)
			want, wantInsts := desiredOf(tc.f, false), instanceNamesOf(tc.f)
			if diff := cmp.Diff(wantInsts, insts); diff != "" {
				t.Errorf("instances (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(slices.Sorted(maps.Keys(want)), slices.Sorted(maps.Keys(d))); diff != "" {
				t.Fatalf("names (-want +got):\n%s", diff)
			}
			for name, w := range want {
				g := d[name]
				if g.Hash != w.Hash || g.OneShot != w.OneShot || !cmp.Equal(g.Server.Spec, w.Server.Spec) || g.Instance.Name != w.Instance.Name ||
					!slices.Equal(g.Instance.Args, w.Instance.Args) || g.Instance.Port != w.Instance.Port {
					t.Errorf("%s: got %+v, want %+v", name, g, w)
				}
				if g.Instance.Server != g.Server {
					t.Errorf("%s: its Instance's Server is not its Server", name)
				}
				if slices.Contains(tc.kept, name) {
					if g.Server != old[name].Server || g.Instance != old[name].Instance {
						t.Errorf("%s: unchanged, but its entry is not the one in force", name)
					}
					continue
				}
				for i := range tc.f.Servers {
					if g.Server == &tc.f.Servers[i] {
						t.Errorf("%s: its entry points into the new fleet's servers", name)
					}
				}
			}
		})
	}
}
