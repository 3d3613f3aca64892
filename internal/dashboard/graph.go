package dashboard

import (
	"sort"
	"strconv"
)

// Graph geometry, in SVG user units (CSS pixels at scale 1).
const (
	nodeW   = 168 // node width: names longer than nameMax runes are cut
	nodeH   = 46
	gapX    = 28
	gapY    = 56 // room for the edges between rows
	margin  = 12
	perRow  = 6 // nodes per row before a layer wraps onto another row
	nameMax = 19
)

// graphNode is a server placed in the graph.
type graphNode struct {
	Name  string
	Label string // Name, cut to nameMax runes
	Phase string
	Ready bool
	X, Y  int // top left corner
}

// graphEdge is one dependsOn: From depends on To.
type graphEdge struct {
	From, To string
	Path     string // SVG path data, from the bottom of From to the top of To
}

// graph is a laid-out dependency graph.
type graph struct {
	Width, Height int
	Nodes         []graphNode
	Edges         []graphEdge
}

// slot is a place in a row: a server, or a waypoint of an edge that
// crosses the row (a "dummy" in Sugiyama's layering), which keeps the
// edge clear of the servers of that row.
type slot struct {
	name  string // the server; "" for a waypoint
	edge  int    // the waypoint's edge
	down  []int  // slots in the layer below this one links to
	key   float64
	x, y  int
	width int
}

// dummyW is the room a waypoint takes in a row.
const dummyW = 24

// layout places servers in rows: a server's layer is the length of its
// longest dependsOn chain, so every edge points down, from a dependent to
// a server it needs; the servers nothing depends on are at the top. An
// edge that spans several layers passes through a waypoint in each layer
// between, so it never crosses a server. Within a layer, servers and
// waypoints are ordered by the mean position of what they link to below,
// then by name; a layer wider than perRow wraps onto more rows. deps maps
// a server to the servers it depends on; names missing from nodes and the
// edges of a cycle (which spec.Validate refuses) are left out. The result
// depends only on its input.
func layout(nodes []string, deps map[string][]string) graph {
	present := make(map[string]bool, len(nodes))
	for _, n := range nodes {
		present[n] = true
	}
	// depth: longest chain of dependencies below a server (0: needs nothing).
	depth := make(map[string]int, len(nodes))
	const visiting = -1
	var visit func(n string) int
	visit = func(n string) int {
		if d, ok := depth[n]; ok {
			if d == visiting {
				return 0 // a cycle: this edge does not add depth
			}
			return d
		}
		depth[n] = visiting
		d := 0
		for _, m := range deps[n] {
			if present[m] && m != n {
				d = max(d, visit(m)+1)
			}
		}
		depth[n] = d
		return d
	}
	sorted := append([]string(nil), nodes...)
	sort.Strings(sorted)
	maxDepth := 0
	for _, n := range sorted {
		maxDepth = max(maxDepth, visit(n))
	}

	// Slots per layer: servers, then the waypoints of the long edges.
	var slots []slot
	layers := make([][]int, maxDepth+1)
	at := make(map[string]int, len(sorted))
	for _, n := range sorted {
		at[n] = len(slots)
		layers[depth[n]] = append(layers[depth[n]], len(slots))
		slots = append(slots, slot{name: n, width: nodeW})
	}
	type edge struct {
		from, to string
		via      []int // waypoints, top to bottom
	}
	var edges []edge
	for _, n := range sorted {
		for _, m := range uniq(deps[n]) {
			if !present[m] || depth[m] >= depth[n] {
				continue // unknown, itself, or an edge of a cycle
			}
			e := edge{from: n, to: m}
			prev := at[n]
			for d := depth[n] - 1; d > depth[m]; d-- {
				w := len(slots)
				slots = append(slots, slot{edge: len(edges), width: dummyW})
				layers[d] = append(layers[d], w)
				slots[prev].down = append(slots[prev].down, w)
				e.via = append(e.via, w)
				prev = w
			}
			slots[prev].down = append(slots[prev].down, at[m])
			edges = append(edges, e)
		}
	}

	// Order each layer from the bottom up by the barycentre of what its
	// slots link to below.
	pos := make([]float64, len(slots))
	for d := range layers {
		l := layers[d]
		for _, i := range l {
			s := &slots[i]
			s.key = -1 // nothing below: first, by name
			if len(s.down) > 0 {
				sum := 0.0
				for _, j := range s.down {
					sum += pos[j]
				}
				s.key = sum / float64(len(s.down))
			}
		}
		sort.SliceStable(l, func(a, b int) bool {
			sa, sb := slots[l[a]], slots[l[b]]
			if sa.key != sb.key {
				return sa.key < sb.key
			}
			if sa.name != sb.name {
				return sa.name < sb.name
			}
			return sa.edge < sb.edge
		})
		for i, j := range l {
			pos[j] = float64(i)
		}
	}

	// Rows, top to bottom: the deepest layer first, each wrapped at perRow.
	var rows [][]int
	for d := maxDepth; d >= 0; d-- {
		l := layers[d]
		for len(l) > perRow {
			rows = append(rows, l[:perRow])
			l = l[perRow:]
		}
		if len(l) > 0 {
			rows = append(rows, l)
		}
	}
	rowWidth := func(r []int) int {
		w := 0
		for _, i := range r {
			w += slots[i].width
		}
		return w + max(len(r)-1, 0)*gapX
	}
	g := graph{Height: 2*margin + len(rows)*nodeH + max(len(rows)-1, 0)*gapY}
	for _, r := range rows {
		g.Width = max(g.Width, rowWidth(r)+2*margin)
	}
	for ri, r := range rows {
		x := (g.Width - rowWidth(r)) / 2 // rows are centred
		for _, i := range r {
			s := &slots[i]
			s.x, s.y = x, margin+ri*(nodeH+gapY)
			x += s.width + gapX
			if s.name != "" {
				g.Nodes = append(g.Nodes, graphNode{Name: s.name, Label: cut(s.name, nameMax), X: s.x, Y: s.y})
			}
		}
	}
	for _, e := range edges {
		g.Edges = append(g.Edges, graphEdge{From: e.from, To: e.to, Path: edgePath(slots, at[e.from], e.via, at[e.to])})
	}
	return g
}

// edgePath goes from the bottom centre of slot from, straight down through
// each waypoint's row, to the top centre of slot to, with an S-curve
// between two rows.
func edgePath(slots []slot, from int, via []int, to int) string {
	centre := func(s slot) int { return s.x + s.width/2 }
	a := slots[from]
	x, y := centre(a), a.y+nodeH
	p := "M" + itoa(x) + " " + itoa(y)
	curve := func(x2, y2 int) {
		mid := (y + y2) / 2
		p += " C" + itoa(x) + " " + itoa(mid) + " " + itoa(x2) + " " + itoa(mid) + " " + itoa(x2) + " " + itoa(y2)
		x, y = x2, y2
	}
	for _, w := range via {
		s := slots[w]
		curve(centre(s), s.y)
		y = s.y + nodeH
		p += " L" + itoa(x) + " " + itoa(y)
	}
	b := slots[to]
	curve(centre(b), b.y-4) // leave room for the arrow head
	return p
}

var itoa = strconv.Itoa

// uniq returns s sorted without duplicates.
func uniq(s []string) []string {
	out := append([]string(nil), s...)
	sort.Strings(out)
	j := 0
	for i, v := range out {
		if i == 0 || v != out[j-1] {
			out[j] = v
			j++
		}
	}
	return out[:j]
}

// cut shortens s to n runes, ending in an ellipsis when it was longer.
func cut(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
