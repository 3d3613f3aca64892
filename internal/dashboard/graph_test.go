package dashboard

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
)

func TestLayout(t *testing.T) {
	for _, tc := range []struct {
		name  string
		nodes []string
		deps  map[string][]string
		// rows lists each row's servers, left to right (waypoints left out)
		rows  [][]string
		edges []string
	}{
		{
			name:  "quick start: a chain, dependents on top",
			nodes: []string{"api", "backend", "web"},
			deps:  map[string][]string{"api": {"backend"}, "web": {"api"}},
			rows:  [][]string{{"web"}, {"api"}, {"backend"}},
			edges: []string{"api->backend", "web->api"},
		},
		{
			name:  "independent servers share a row, by name",
			nodes: []string{"c", "a", "b"},
			rows:  [][]string{{"a", "b", "c"}},
		},
		{
			name:  "a layer wider than perRow wraps",
			nodes: []string{"a", "b", "c", "d", "e", "f", "g", "h"},
			rows:  [][]string{{"a", "b", "c", "d", "e", "f"}, {"g", "h"}},
		},
		{
			name:  "dependents sit above what they need",
			nodes: []string{"x1", "x2", "y1", "y2"},
			deps:  map[string][]string{"y1": {"x2"}, "y2": {"x1"}},
			rows:  [][]string{{"y2", "y1"}, {"x1", "x2"}},
			edges: []string{"y1->x2", "y2->x1"},
		},
		{
			name:  "unknown dependencies, duplicates and self-edges are left out",
			nodes: []string{"a", "b"},
			deps:  map[string][]string{"a": {"b", "b", "ghost", "a"}},
			rows:  [][]string{{"a"}, {"b"}},
			edges: []string{"a->b"},
		},
		{
			name:  "a cycle (refused by validation) still lays out",
			nodes: []string{"a", "b"},
			deps:  map[string][]string{"a": {"b"}, "b": {"a"}},
			rows:  [][]string{{"a"}, {"b"}},
			edges: []string{"a->b"},
		},
		{
			name:  "no servers",
			nodes: nil,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := layout(tc.nodes, tc.deps)
			if len(g.Nodes) != len(tc.nodes) {
				t.Fatalf("%d nodes, want %d", len(g.Nodes), len(tc.nodes))
			}
			byY := map[int][]string{}
			var ys []int
			for _, n := range g.Nodes {
				if _, ok := byY[n.Y]; !ok {
					ys = append(ys, n.Y)
				}
				byY[n.Y] = append(byY[n.Y], n.Name)
				if n.X < 0 || n.Y < 0 || n.X+nodeW > g.Width || n.Y+nodeH > g.Height {
					t.Errorf("node %s at (%d,%d) is outside the %dx%d graph", n.Name, n.X, n.Y, g.Width, g.Height)
				}
			}
			var rows [][]string
			for _, y := range ys {
				rows = append(rows, byY[y])
			}
			if len(tc.rows) > 0 && !reflect.DeepEqual(rows, tc.rows) {
				t.Errorf("rows = %v, want %v", rows, tc.rows)
			}
			var edges []string
			for _, e := range g.Edges {
				edges = append(edges, e.From+"->"+e.To)
				if !strings.HasPrefix(e.Path, "M") {
					t.Errorf("edge %s->%s: path %q", e.From, e.To, e.Path)
				}
			}
			if !reflect.DeepEqual(edges, tc.edges) {
				t.Errorf("edges = %v, want %v", edges, tc.edges)
			}
			if again := layout(tc.nodes, tc.deps); !reflect.DeepEqual(again, g) {
				t.Error("two layouts of the same input differ")
			}
		})
	}
}

// TestLayoutLongEdgeAvoidsServers: an edge that spans a layer passes
// beside the servers of that layer, not through them.
func TestLayoutLongEdgeAvoidsServers(t *testing.T) {
	// admin needs api and cache; api and worker need backend: admin->cache
	// crosses the row of api and worker.
	g := layout([]string{"admin", "api", "backend", "cache", "worker"}, map[string][]string{
		"admin": {"api", "cache"}, "api": {"backend"}, "worker": {"backend"},
	})
	var long graphEdge
	for _, e := range g.Edges {
		if e.From == "admin" && e.To == "cache" {
			long = e
		}
	}
	if long.Path == "" {
		t.Fatal("no edge admin->cache")
	}
	// The waypoint's vertical line ("L x y") must not lie within a server
	// of the middle row.
	var x, y int
	i := strings.Index(long.Path, " L")
	if i < 0 {
		t.Fatalf("edge admin->cache has no waypoint: %s", long.Path)
	}
	if _, err := fmt.Sscanf(long.Path[i:], " L%d %d", &x, &y); err != nil {
		t.Fatal(err)
	}
	for _, n := range g.Nodes {
		if n.Y < y && y <= n.Y+nodeH && n.X <= x && x <= n.X+nodeW {
			t.Errorf("edge admin->cache passes through %s (x %d in [%d,%d])", n.Name, x, n.X, n.X+nodeW)
		}
	}
}

func TestCut(t *testing.T) {
	if got := cut("short", 19); got != "short" {
		t.Errorf("cut(short) = %q", got)
	}
	long := strings.Repeat("a", 63)
	if got := cut(long, 19); len([]rune(got)) != 19 || !strings.HasSuffix(got, "…") {
		t.Errorf("cut(63 a) = %q, want 18 a and an ellipsis", got)
	}
}
