package main

import (
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/procfleet/procfleet/actuate"
	"github.com/procfleet/procfleet/reconciler"
	"github.com/procfleet/procfleet/spec"
)

const diffFleet = `apiVersion: procfleet.dev/v1alpha1
kind: Server
metadata: {name: same}
spec: {command: [./srv], args: [-port, "9001"], port: 9001}
---
apiVersion: procfleet.dev/v1alpha1
kind: Server
metadata: {name: changed}
spec: {command: [./srv], args: [-port, "9002", -v], port: 9002}
---
apiVersion: procfleet.dev/v1alpha1
kind: Server
metadata: {name: envonly}
spec: {command: [./srv], port: 9007, env: [{name: A, value: b}]}
---
apiVersion: procfleet.dev/v1alpha1
kind: Server
metadata: {name: crashed}
spec: {command: [./srv], port: 9003}
---
apiVersion: procfleet.dev/v1alpha1
kind: Server
metadata: {name: missing}
spec: {command: [./srv], port: 9004}
---
apiVersion: procfleet.dev/v1alpha1
kind: Server
metadata: {name: after}
spec: {command: [./srv], port: 9005, dependsOn: [missing]}
---
apiVersion: procfleet.dev/v1alpha1
kind: Server
metadata: {name: odd}
spec: {command: [./srv], port: 9006}
`

// TestPlanDiff: each kind of difference gets its mark and reason, through
// reconciler.Plan (the records' verdicts are given: the kernel side is
// actuate.Verify's and tested there).
func TestPlanDiff(t *testing.T) {
	servers, err := spec.LoadBytes("fleet.yaml", []byte(diffFleet))
	if err != nil {
		t.Fatal(err)
	}
	sort.Slice(servers, func(i, j int) bool { return servers[i].Metadata.Name < servers[j].Metadata.Name })
	fleet := &spec.Fleet{Servers: servers, Files: []string{"fleet.yaml"}}
	hash := func(name string) string { s, _ := fleet.Get(name); return s.Hash() }
	// view is a record as reconciler.Inspect gives it, from its verdict.
	view := func(rv *reconciler.RecordView) *reconciler.RecordView {
		rv.Observed = reconciler.ObservedFromRecord(rv.Record, nil, actuate.Verification{Verdict: rv.Verdict, Reason: rv.Reason, Message: rv.Message})
		return rv
	}
	owned := func(name string, cmdline []string, port int, specHash string) *reconciler.RecordView {
		return view(&reconciler.RecordView{Verdict: actuate.VerdictOwned, Record: actuate.Record{Name: name, PID: 100 + port%100, PGID: 100 + port%100,
			Cmdline: cmdline, Port: port, SpecHash: specHash}})
	}
	v := &reconciler.Snapshot{Fleet: fleet, Files: fleet.Files, Records: map[string]*reconciler.RecordView{
		"same":    owned("same", []string{"./srv", "-port", "9001"}, 9001, hash("same")),
		"changed": owned("changed", []string{"./srv", "-port", "9002"}, 9002, "sha256:old"),
		"envonly": owned("envonly", []string{"./srv"}, 9007, "sha256:old"),
		"crashed": view(&reconciler.RecordView{Verdict: actuate.VerdictStale, Message: "pid 103 has exited", Record: actuate.Record{Name: "crashed", PID: 103}}),
		"gone":    owned("gone", []string{"./old"}, 9010, "sha256:gone"),
		"odd": view(&reconciler.RecordView{Verdict: actuate.VerdictQuarantine, Reason: actuate.IdentityMismatch, Message: "command line differs",
			Record: actuate.Record{Name: "odd", PID: 106, PGID: 106, Cmdline: []string{"./other"}}}),
	}}
	holder := func(port int) string {
		if port == 9004 {
			return "pid 9 (nc -l 9004)"
		}
		return ""
	}
	lines, inSync := planDiff(v, holder)
	if inSync != 1 {
		t.Errorf("in sync = %d, want 1 (same)", inSync)
	}
	type row struct{ Name, Mark, Why, Hint string }
	var got []row
	for _, l := range lines {
		got = append(got, row{l.Name, l.Mark, l.Why, l.Hint})
	}
	want := []struct{ name, mark, why, hint string }{
		{"after", "+", "waiting for missing to be Ready", ""},
		{"changed", "~", "spec changed: args (pid", ""},
		{"crashed", "+", "crashed: pid 103 has exited", ""},
		{"envonly", "~", "spec changed: env or workingDir", ""},
		{"gone", "-", "removed from the fleet files", ""},
		{"missing", "+", "missing", "port 9004 is held by pid 9 (nc -l 9004)"},
		{"odd", "!", "IdentityMismatch", "kill -TERM -- -106"},
	}
	if len(got) != len(want) {
		t.Fatalf("lines = %+v, want %d", got, len(want))
	}
	for i, w := range want {
		g := got[i]
		if g.Name != w.name || g.Mark != w.mark || !strings.Contains(g.Why, w.why) || !strings.Contains(g.Hint, w.hint) {
			t.Errorf("line %d = %+v; want %s %s with %q (hint %q)", i, g, w.mark, w.name, w.why, w.hint)
		}
	}
}

func TestChangedFields(t *testing.T) {
	s := &spec.Instance{Command: []string{"./srv", "-x"}, Args: []string{"-port", "1"}, Port: 1}
	for _, tt := range []struct {
		name    string
		cmdline []string
		port    int
		want    []string
	}{
		{"args", []string{"./srv", "-x", "-port", "2"}, 1, []string{"args"}},
		{"command", []string{"./other", "-x", "-port", "1"}, 1, []string{"command"}},
		{"port", []string{"./srv", "-x", "-port", "1"}, 2, []string{"port"}},
		{"short cmdline", []string{"./srv"}, 1, []string{"command", "args"}},
		{"nothing recorded differs", []string{"./srv", "-x", "-port", "1"}, 1, []string{"env or workingDir (the record keeps only their hash)"}},
	} {
		got := changedFields(actuate.Record{Cmdline: tt.cmdline, Port: tt.port}, s)
		if d := cmp.Diff(tt.want, got); d != "" {
			t.Errorf("%s: (-want +got)\n%s", tt.name, d)
		}
	}
}
