package dashboard

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/procfleet/procfleet/actuate"
	"github.com/procfleet/procfleet/reconciler"
	"github.com/procfleet/procfleet/spec"
)

func TestCleanLogLine(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"plain line", "plain line"},
		{"\x1b[31mred\x1b[0m and \x1b[1;32mbold green\x1b[m", "red and bold green"},
		{"title\x1b]0;window title\x07 after", "title after"},
		{"tab\tkept, bell\x07 and nul\x00 dropped", "tab\tkept, bell and nul dropped"},
		{"bad utf8 \xff\xfe end", "bad utf8 \uFFFD end"},
		{"<script>alert(1)</script>", "<script>alert(1)</script>"}, // text, shown with textContent
	} {
		if got := cleanLogLine(tc.in); got != tc.want {
			t.Errorf("cleanLogLine(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	long := strings.Repeat("é", maxLogLine) // 2 bytes each
	got := cleanLogLine(long)
	if len(got) > maxLogLine+len(" …(cut)") || !strings.HasSuffix(got, " …(cut)") || strings.ContainsRune(got, '\uFFFD') {
		t.Errorf("a long line: %d bytes, suffix %q; want it cut at a rune boundary", len(got), got[len(got)-12:])
	}
}

func TestActions(t *testing.T) {
	for _, tc := range []struct {
		phase reconciler.Phase
		want  []Action
	}{
		{reconciler.PhaseRunning, []Action{ActionRestart, ActionStop}},
		{reconciler.PhaseCrashLoopBackOff, []Action{ActionRestart, ActionStop}},
		{reconciler.PhaseFailed, []Action{ActionRestart, ActionStop}},
		{reconciler.PhaseStopped, []Action{ActionStart}},
		{reconciler.PhaseQuarantined, nil}, // never signalled: no button offers it
	} {
		if got := actions(reconciler.ServerStatus{Phase: tc.phase}); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("actions(%s) = %v, want %v", tc.phase, got, tc.want)
		}
	}
	for _, s := range []string{"stop", "start", "restart"} {
		if a, err := ParseAction(s); err != nil || string(a) != s {
			t.Errorf("ParseAction(%q) = %q, %v", s, a, err)
		}
	}
	if _, err := ParseAction("exec"); err == nil {
		t.Error("ParseAction(exec) accepted")
	}
}

func TestFleetViewCounts(t *testing.T) {
	snap := syntheticFleet(5)
	snap.Status.Servers[1].Phase, snap.Status.Servers[1].Ready = reconciler.PhaseCrashLoopBackOff, false
	snap.Status.Servers[2].Phase, snap.Status.Servers[2].Ready = reconciler.PhaseQuarantined, false
	snap.Status.Servers[3].Phase, snap.Status.Servers[3].Ready = reconciler.PhaseStopped, false
	v := newFleetView(snap, layoutFleet)
	if want := (counts{Servers: 5, Ready: 2, Failing: 1, Quarantined: 1, Stopped: 1}); v.Counts != want {
		t.Errorf("counts = %+v, want %+v", v.Counts, want)
	}
	phases := map[string]string{}
	for _, n := range v.Graph.Nodes {
		phases[n.Name] = n.Phase
	}
	if phases["s001"] != "CrashLoopBackOff" || phases["s002"] != "Quarantined" || len(phases) != 5 {
		t.Errorf("graph phases = %v", phases)
	}
}

// TestPagesShowNoSecret renders every fragment of a server whose spec has
// env values and whose events mention nothing secret: the values never
// reach the page (SECURITY.md: environment values are not shown).
func TestPagesShowNoSecret(t *testing.T) {
	snap := syntheticFleet(2)
	snap.Fleet.Servers[0].Spec.Env = []spec.EnvVar{{Name: "DB_PASSWORD", Value: "hunter2-value"}, {Name: "LOG", Value: "debug-value"}}
	now := time.Now()
	det := Detail{
		Record:    &actuate.Record{Name: "s000", PID: 10000, PGID: 10000, StartTime: 42, BootID: "b00t", Cmdline: []string{"./bin/srv"}},
		Ownership: Ownership{Verdict: "owned", Held: true, Evidence: "pid 10000, start time 42"},
		Events:    []reconciler.Event{{Time: now, Server: "s000", Type: "Normal", Reason: "Started", Message: "pid 10000"}},
		LogPath:   "/state/logs/s000.log",
	}
	v := newServerView("s000", snap, det, nil)
	var all strings.Builder
	for id, html := range serverFrames(v).Parts {
		all.WriteString(html)
		if strings.Contains(html, "render ") && strings.Contains(html, "warn") {
			t.Errorf("fragment %s failed to render: %s", id, html)
		}
	}
	out := all.String()
	for _, secret := range []string{"hunter2-value", "debug-value"} {
		if strings.Contains(out, secret) {
			t.Fatalf("the server page shows the env value %q", secret)
		}
	}
	for _, want := range []string{"DB_PASSWORD, LOG", "(values not shown)", "pid 10000, start time 42", "b00t", "Started"} {
		if !strings.Contains(out, want) {
			t.Errorf("the server page lacks %q", want)
		}
	}
}

// TestSameRowCoversTheRow: a change to any field of a server's status
// that changes its row makes sameRow false, so a cached row is never
// stale. Every field of reconciler.ServerStatus has a mutation here; a new
// field fails the test until it has one.
func TestSameRowCoversTheRow(t *testing.T) {
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	later := at.Add(time.Minute)
	base := reconciler.ServerStatus{
		Name: "api", Phase: reconciler.PhaseFailed, Ready: false, PID: 10, Port: 8080, Restarts: 2,
		StartedAt: &at, Reason: "Failed", Message: "exited", LastExit: &reconciler.LastExit{Code: 1, Reason: "exited with code 1", At: at},
		Conditions: []reconciler.Condition{{Type: "Ready", Status: "False"}},
	}
	mutations := map[string]func(*reconciler.ServerStatus){
		"Name":      func(s *reconciler.ServerStatus) { s.Name = "web" },
		"Phase":     func(s *reconciler.ServerStatus) { s.Phase = reconciler.PhaseRunning },
		"Ready":     func(s *reconciler.ServerStatus) { s.Ready = true },
		"PID":       func(s *reconciler.ServerStatus) { s.PID = 11 },
		"Port":      func(s *reconciler.ServerStatus) { s.Port = 8081 },
		"Restarts":  func(s *reconciler.ServerStatus) { s.Restarts = 3 },
		"StartedAt": func(s *reconciler.ServerStatus) { s.StartedAt = &later },
		"Reason":    func(s *reconciler.ServerStatus) { s.Reason = "BackOff" },
		"Message":   func(s *reconciler.ServerStatus) { s.Message = "other" },
		"LastExit": func(s *reconciler.ServerStatus) {
			s.LastExit = &reconciler.LastExit{Code: -1, Signal: "SIGKILL", Reason: "killed"}
		},
		"Conditions": func(s *reconciler.ServerStatus) { s.Conditions = nil },
		"Events":     func(s *reconciler.ServerStatus) { s.Events = []reconciler.Event{{Reason: "Started"}} },
		"ReplicaOf":  func(s *reconciler.ServerStatus) { s.ReplicaOf = "api" },
		"Index":      func(s *reconciler.ServerStatus) { i := 1; s.Index = &i },
		"Membership": func(s *reconciler.ServerStatus) { s.Membership = actuate.MembershipSession },
	}
	typ := reflect.TypeOf(base)
	for i := range typ.NumField() {
		if _, ok := mutations[typ.Field(i).Name]; !ok {
			t.Errorf("no mutation of ServerStatus.%s: add one, and to sameRow if the row shows it", typ.Field(i).Name)
		}
	}
	extra := []func(*reconciler.ServerStatus){
		func(s *reconciler.ServerStatus) { s.StartedAt = nil },
		func(s *reconciler.ServerStatus) { s.LastExit = nil },
		func(s *reconciler.ServerStatus) { s.Phase, s.Ready = reconciler.PhaseStopped, false },
	}
	all := extra
	for _, m := range mutations {
		all = append(all, m)
	}
	for i, m := range all {
		mut := base
		m(&mut)
		if rowHTML(mut) != rowHTML(base) && sameRow(base, mut) {
			t.Errorf("mutation %d changes the row but sameRow says it is the same: %+v", i, mut)
		}
	}
	same := base
	copied := at
	same.StartedAt = &copied // another pointer to the same time
	if !sameRow(base, same) {
		t.Error("sameRow: equal statuses differ")
	}
}

// TestFragmentsEscape: text that reaches a row or the graph from the
// reconciler (reasons, messages, exits) is shown as text, never markup.
func TestFragmentsEscape(t *testing.T) {
	evil := `"><script>alert(1)</script><x y='`
	st := reconciler.ServerStatus{Name: "api", Phase: reconciler.PhaseFailed, Reason: evil, Message: evil, LastExit: &reconciler.LastExit{Reason: evil}}
	g := graph{Width: 10, Height: 10, Nodes: []graphNode{{Name: "api", Label: evil, Phase: evil}}, Edges: []graphEdge{{From: "api", To: "x", Path: evil}}}
	for what, html := range map[string]string{"row": rowHTML(st), "graph": graphSVG(g), "node": nodeSVG(g.Nodes[0])} {
		if strings.Contains(html, "<script") || strings.Contains(html, "<x y") || strings.Contains(html, `="">`) {
			t.Errorf("%s lets markup through: %s", what, html)
		}
		if !strings.Contains(html, "&lt;script&gt;") {
			t.Errorf("%s lost the text: %s", what, html)
		}
	}
}

// TestDependsOnReplicas: dependsOn names servers, and a replicated
// server is each of its instances, in the graph and in "needed by".
func TestDependsOnReplicas(t *testing.T) {
	two := 2
	f := &spec.Fleet{Servers: []spec.Server{
		{Metadata: spec.ObjectMeta{Name: "api"}, Spec: spec.ServerSpec{Command: []string{"./api"}, Port: 8080, Replicas: &two, DependsOn: []string{"db"}}},
		{Metadata: spec.ObjectMeta{Name: "db"}, Spec: spec.ServerSpec{Command: []string{"./db"}}},
		{Metadata: spec.ObjectMeta{Name: "web"}, Spec: spec.ServerSpec{Command: []string{"./web"}, DependsOn: []string{"api"}}},
	}}
	want := map[string][]string{"api-0": {"db"}, "api-1": {"db"}, "web": {"api-0", "api-1"}}
	if got := dependsOn(f); !reflect.DeepEqual(got, want) {
		t.Fatalf("dependsOn = %v, want %v", got, want)
	}
	snap := Snapshot{Fleet: f}
	for _, n := range []string{"api-0", "api-1", "db", "web"} {
		snap.Status.Servers = append(snap.Status.Servers, reconciler.ServerStatus{Name: n, Phase: reconciler.PhaseRunning})
	}
	var edges []string
	for _, e := range newFleetView(snap, layoutFleet).Graph.Edges {
		edges = append(edges, e.From+"->"+e.To)
	}
	if want := []string{"api-0->db", "api-1->db", "web->api-0", "web->api-1"}; !reflect.DeepEqual(edges, want) {
		t.Errorf("graph edges = %v, want %v", edges, want)
	}
	v := newServerView("api-1", snap, Detail{}, nil)
	if v.Spec == nil || v.Spec.Port != 8081 || !reflect.DeepEqual(v.Dependents, []string{"web"}) {
		t.Fatalf("api-1's page: spec %+v, needed by %v; want port 8081, needed by web", v.Spec, v.Dependents)
	}
	if html := serverFrames(v).Parts["s-spec"]; !strings.Contains(html, "Replica") || !strings.Contains(html, "8081") {
		t.Errorf("api-1's spec does not say it is replica 1 on port 8081: %s", html)
	}
}
