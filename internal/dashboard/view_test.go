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

func TestArgvText(t *testing.T) {
	if got, want := argvText([]string{"./bin/api", "-port", "8080", "hello world", "", "$(PORT)"}), `./bin/api -port 8080 "hello world" "" "$(PORT)"`; got != want {
		t.Errorf("argvText = %s, want %s", got, want)
	}
}

func TestProbeText(t *testing.T) {
	for _, tc := range []struct {
		p    *spec.Probe
		port int
		want string
	}{
		{nil, 0, "none (running is ready)"},
		{nil, 8080, "none"},
		{&spec.Probe{HTTPGet: &spec.HTTPGetAction{Path: "/health"}}, 8080, "GET http://127.0.0.1:8080/health, every 1s (timeout 1s, delay 0s, 3 failures)"},
		{&spec.Probe{TCPSocket: &spec.TCPSocketAction{Port: 9}, PeriodSeconds: 5, FailureThreshold: 2}, 8080, "TCP connect to port 9, every 5s (timeout 1s, delay 0s, 2 failures)"},
		{&spec.Probe{Exec: &spec.ExecAction{Command: []string{"pg_isready", "-q"}}}, 0, "exec pg_isready -q, every 1s (timeout 1s, delay 0s, 3 failures)"},
	} {
		if got := probeText(tc.p, tc.port); got != tc.want {
			t.Errorf("probeText = %q, want %q", got, tc.want)
		}
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
	v := newFleetView(snap)
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
