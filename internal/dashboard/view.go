package dashboard

import (
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/procfleet/procfleet/reconciler"
	"github.com/procfleet/procfleet/spec"
)

// fleetView is what the fleet page shows.
type fleetView struct {
	Rows   []reconciler.ServerStatus
	Errors []reconciler.StatusError
	Counts counts
	Graph  graph
}

// counts summarise the fleet in the page header.
type counts struct {
	Servers, Ready, Failing, Quarantined, Stopped int
}

// newFleetView builds the fleet page's view of a snapshot: one row per
// server, the load errors, and the dependency graph of the servers shown,
// laid out by lay (layout, or a cache of it).
func newFleetView(s Snapshot, lay func(names []string, f *spec.Fleet) graph) fleetView {
	v := fleetView{Rows: s.Status.Servers, Errors: s.Status.Errors}
	names := make([]string, len(v.Rows))
	byName := make(map[string]int, len(v.Rows))
	for i, st := range v.Rows {
		names[i] = st.Name
		byName[st.Name] = i
		v.Counts.Servers++
		switch {
		case st.Phase == reconciler.PhaseQuarantined:
			v.Counts.Quarantined++
		case failing(st.Phase):
			v.Counts.Failing++
		case st.Phase == reconciler.PhaseStopped:
			v.Counts.Stopped++
		}
		if st.Ready {
			v.Counts.Ready++
		}
	}
	v.Graph = lay(names, s.Fleet)
	v.Graph.Nodes = append([]graphNode(nil), v.Graph.Nodes...) // the layout may be shared
	for i := range v.Graph.Nodes {
		n := &v.Graph.Nodes[i]
		st := &v.Rows[byName[n.Name]]
		n.Phase, n.Ready = st.Phase.String(), st.Ready
	}
	return v
}

// layoutFleet is layout with the fleet's dependsOn.
func layoutFleet(names []string, f *spec.Fleet) graph { return layout(names, dependsOn(f)) }

// dependsOn maps each instance of a fleet to the instances it depends on:
// dependsOn names servers, and a server with replicas is every one of its
// instances (DESIGN.md: `dependsOn: [api]` waits for every instance).
func dependsOn(f *spec.Fleet) map[string][]string {
	deps := map[string][]string{}
	if f == nil {
		return deps
	}
	all := f.Instances()
	byServer := make(map[string][]string, len(f.Servers))
	for _, in := range all {
		byServer[in.Server.Metadata.Name] = append(byServer[in.Server.Metadata.Name], in.Name)
	}
	for _, in := range all {
		for _, d := range in.Server.Spec.DependsOn {
			deps[in.Name] = append(deps[in.Name], byServer[d]...)
		}
	}
	return deps
}

// failing reports the phases that need someone's attention.
func failing(p reconciler.Phase) bool {
	return p == reconciler.PhaseFailed || p == reconciler.PhaseCrashLoopBackOff
}

// serverView is what a server's page shows.
type serverView struct {
	Name   string
	Known  bool // the server is in the status
	Status reconciler.ServerStatus
	// Spec is the declared instance (a server, or one of its replicas); nil
	// when it is not in the fleet in force.
	Spec *spec.Instance
	// FleetLoaded is false when no fleet has loaded (Spec is then unknown).
	FleetLoaded bool
	Detail      Detail
	// DetailErr says why Detail could not be had.
	DetailErr string
	// Dependents are the servers whose dependsOn names this one.
	Dependents []string
}

// newServerView builds a server page's view.
func newServerView(name string, s Snapshot, d Detail, derr error) serverView {
	v := serverView{Name: name, Detail: d, FleetLoaded: s.Fleet != nil}
	v.Status, v.Known = s.Status.Get(name)
	if s.Fleet != nil {
		v.Spec, _ = s.Fleet.Instance(name)
		for n, deps := range dependsOn(s.Fleet) {
			if slices.Contains(deps, name) {
				v.Dependents = append(v.Dependents, n)
			}
		}
		slices.Sort(v.Dependents)
	}
	if derr != nil {
		v.DetailErr = derr.Error()
	}
	return v
}

// actions returns the buttons a server's row and page offer: nothing for a
// quarantined server (procfleet signals nothing it cannot prove it owns),
// Start for a stopped one, Restart and Stop otherwise.
func actions(st reconciler.ServerStatus) []Action {
	switch st.Phase {
	case reconciler.PhaseQuarantined:
		return nil
	case reconciler.PhaseStopped:
		return []Action{ActionStart}
	}
	return []Action{ActionRestart, ActionStop}
}

// envNames lists the names of an instance's env; values are never shown
// (SECURITY.md: environment values are not logged or displayed).
func envNames(env []spec.Var) string {
	names := make([]string, len(env))
	for i, e := range env {
		names[i] = e.Name
	}
	return strings.Join(names, ", ")
}

// ansi matches terminal escape sequences (CSI and OSC), which a log line
// may carry and a page cannot show; compiled at its first use.
var ansi = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`\x1b(\[[0-9;?]*[ -/]*[@-~]|\][^\x07\x1b]*(\x07|\x1b\\)|[@-Z\\-_])`)
})

// maxLogLine bounds one log line sent to a page; longer lines are cut.
const maxLogLine = 8 << 10

// cleanLogLine makes a log line fit to show: escape sequences removed,
// other control characters but tab dropped, invalid UTF-8 replaced, and
// at most maxLogLine bytes.
func cleanLogLine(s string) string {
	if strings.IndexByte(s, 0x1b) >= 0 {
		s = ansi().ReplaceAllString(s, "")
	}
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) > maxLogLine {
		i := maxLogLine
		for i > 0 && !utf8Start(s[i]) {
			i--
		}
		s = s[:i] + " …(cut)"
	}
	return strings.Map(func(r rune) rune {
		if r == '\t' || r >= 0x20 && r != 0x7f {
			return r
		}
		return -1
	}, s)
}

func utf8Start(b byte) bool { return b&0xC0 != 0x80 }

// clock formats an event time for the timeline.
func clock(t time.Time) string {
	return t.Local().Format("15:04:05.000")
}
