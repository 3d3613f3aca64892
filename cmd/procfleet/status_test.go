package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/procfleet/procfleet/actuate"
	"github.com/procfleet/procfleet/reconciler"
)

// goldenNow is the "now" of the golden files.
var goldenNow = time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)

func ago(d time.Duration) *time.Time {
	t := goldenNow.Add(-d)
	return &t
}

func readyCond(status reconciler.ConditionStatus, reason, msg string, d time.Duration) []reconciler.Condition {
	return []reconciler.Condition{{Type: reconciler.ConditionReady, Status: status, Reason: reason, Message: msg, LastTransitionTime: goldenNow.Add(-d)}}
}

// everyPhase is a fleet with a server in each phase, and a fleet-file error.
func everyPhase() reconciler.Status {
	return reconciler.Status{
		Servers: []reconciler.ServerStatus{
			{Name: "api", Phase: reconciler.PhaseRunning, Ready: true, PID: 4242, Port: 8080, Restarts: 1, StartedAt: ago(3 * time.Hour), Membership: actuate.MembershipCgroup,
				Reason: "ready", LastExit: &reconciler.LastExit{Code: 1, Reason: "exited with code 1", At: goldenNow.Add(-3*time.Hour - time.Second)},
				Conditions: readyCond(reconciler.ConditionTrue, "", "", 3*time.Hour)},
			{Name: "backup", Phase: reconciler.PhaseStopped, Reason: "exited with code 0", Port: 0,
				LastExit:   &reconciler.LastExit{Code: 0, Reason: "exited with code 0", At: goldenNow.Add(-50 * time.Minute)},
				Conditions: readyCond(reconciler.ConditionFalse, "Exited", "exited with code 0", 50*time.Minute)},
			{Name: "cache", Phase: reconciler.PhasePending, Port: 6379, Reason: "waiting for db to be Ready",
				Conditions: readyCond(reconciler.ConditionUnknown, "", "", 0)},
			{Name: "db", Phase: reconciler.PhaseStarting, Port: 5432, Reason: "not running",
				Conditions: readyCond(reconciler.ConditionFalse, "", "", 2*time.Second)},
			{Name: "legacy", Phase: reconciler.PhaseQuarantined, PID: 777, Port: 9000, Reason: "UnverifiedOwner", Membership: actuate.MembershipSession,
				Message:    "the record has no start time and cannot prove ownership of pid 777; nothing was signalled; if pid 777 ([\"./legacy\"]) is yours, stop its process group by hand with: kill -TERM -- -777, then remove legacy.json from the state folder's servers/",
				Conditions: readyCond(reconciler.ConditionFalse, "Quarantined", "", 20*time.Minute)},
			{Name: "old", Phase: reconciler.PhaseStopping, PID: 5150, Port: 8081, StartedAt: ago(26 * time.Hour), Reason: "removed from the fleet files", Membership: actuate.MembershipCgroup,
				Conditions: readyCond(reconciler.ConditionFalse, "Stopped", "removed from the fleet files", time.Second)},
			{Name: "web", Phase: reconciler.PhaseCrashLoopBackOff, Port: 3000, Restarts: 7,
				Reason:     "back-off 32s restarting after killed by signal 9 (SIGKILL) (the out-of-memory killer may have ended it)",
				LastExit:   &reconciler.LastExit{Code: -1, Signal: "SIGKILL", Reason: "killed by signal 9 (SIGKILL) (the out-of-memory killer may have ended it)", At: goldenNow.Add(-5 * time.Second)},
				Conditions: readyCond(reconciler.ConditionFalse, "Exited", "killed by signal 9 (SIGKILL)", 5*time.Second)},
			{Name: "worker", Phase: reconciler.PhaseFailed, Port: 0, Reason: "not ready after 30s",
				Message:    "listening on :0\nstill warming up",
				LastExit:   &reconciler.LastExit{Code: -1, Signal: "SIGTERM", Reason: "not ready after 30s", At: goldenNow.Add(-90 * time.Second)},
				Conditions: readyCond(reconciler.ConditionFalse, "Failed", "not ready after 30s", 90*time.Second)},
		},
		Errors: []reconciler.StatusError{
			{File: "procfleet.yaml", Line: 7, Field: "spec.port", Message: "must be between 1 and 65535, got 70000"},
		},
	}
}

// TestStatusGolden: the table, JSON and YAML of a fleet with every phase.
func TestStatusGolden(t *testing.T) {
	for _, tt := range []struct{ format, golden string }{
		{outputTable, "status-every-phase.txt"},
		{outputJSON, "status-every-phase.json"},
		{outputYAML, "status-every-phase.yaml"},
	} {
		t.Run(tt.format, func(t *testing.T) {
			var b bytes.Buffer
			if err := writeStatus(&b, tt.format, everyPhase(), goldenNow); err != nil {
				t.Fatal(err)
			}
			golden(t, tt.golden, b.String())
		})
	}
	phases := map[string]bool{}
	for _, s := range everyPhase().Servers {
		phases[s.Phase.String()] = true
	}
	for _, p := range []string{"Pending", "Starting", "Running", "Stopping", "Stopped", "Failed", "CrashLoopBackOff", "Quarantined"} {
		if !phases[p] {
			t.Errorf("the golden fleet has no server in phase %s", p)
		}
	}
}

// DESIGN.md "status -o json", field by field.
var (
	designTop       = []string{"errors", "servers"}
	designServer    = []string{"conditions", "lastExit", "message", "name", "phase", "pid", "port", "ready", "reason", "restarts", "startedAt"}
	designLastExit  = []string{"at", "code", "reason", "signal"}
	designCondition = []string{"lastTransitionTime", "message", "reason", "status", "type"}
	designError     = []string{"field", "file", "line", "message"}
)

func keys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// TestStatusJSONFields decodes status -o json of the golden fleet and holds
// it to DESIGN.md's field list: no field missing, none extra, at every
// level.
func TestStatusJSONFields(t *testing.T) {
	var b bytes.Buffer
	if err := writeStatus(&b, outputJSON, everyPhase(), goldenNow); err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(b.Bytes(), &doc); err != nil {
		t.Fatalf("status -o json is not a JSON object: %v", err)
	}
	if d := cmp.Diff(designTop, keys(doc)); d != "" {
		t.Errorf("top-level fields (-DESIGN.md +got):\n%s", d)
	}
	servers, _ := doc["servers"].([]any)
	if len(servers) != len(everyPhase().Servers) {
		t.Fatalf("got %d servers, want %d", len(servers), len(everyPhase().Servers))
	}
	seen := map[string]bool{}
	for _, s := range servers {
		srv := s.(map[string]any)
		for _, k := range keys(srv) {
			seen[k] = true
			if !contains(designServer, k) {
				t.Errorf("server %v: field %q is not in DESIGN.md", srv["name"], k)
			}
		}
		for _, k := range designServer {
			if _, ok := srv[k]; !ok {
				t.Errorf("server %v: field %q missing", srv["name"], k)
			}
		}
		if le, ok := srv["lastExit"].(map[string]any); ok {
			if d := cmp.Diff(designLastExit, keys(le)); d != "" {
				t.Errorf("server %v lastExit fields (-DESIGN.md +got):\n%s", srv["name"], d)
			}
		}
		conds, _ := srv["conditions"].([]any)
		if len(conds) == 0 {
			t.Errorf("server %v: no conditions", srv["name"])
		}
		for _, c := range conds {
			if d := cmp.Diff(designCondition, keys(c.(map[string]any))); d != "" {
				t.Errorf("server %v condition fields (-DESIGN.md +got):\n%s", srv["name"], d)
			}
		}
		if _, ok := srv["ready"].(bool); !ok {
			t.Errorf("server %v: ready is %T, want a boolean", srv["name"], srv["ready"])
		}
	}
	// Across the fleet every DESIGN.md field appears.
	if d := cmp.Diff(designServer, keys(toAny(seen))); d != "" {
		t.Errorf("server fields across the fleet (-DESIGN.md +got):\n%s", d)
	}
	errs, _ := doc["errors"].([]any)
	if len(errs) != 1 {
		t.Fatalf("errors = %v, want the one file error", doc["errors"])
	}
	if d := cmp.Diff(designError, keys(errs[0].(map[string]any))); d != "" {
		t.Errorf("error fields (-DESIGN.md +got):\n%s", d)
	}

	// With good files, errors is an empty list, never null.
	b.Reset()
	if err := writeStatus(&b, outputJSON, reconciler.Status{Servers: []reconciler.ServerStatus{}, Errors: []reconciler.StatusError{}}, goldenNow); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), `"errors": []`) || !strings.Contains(b.String(), `"servers": []`) {
		t.Errorf("empty status = %s, want empty lists", b.String())
	}
}

// TestMembershipLine: the line under the table names the membership mode
// of the servers that run (DESIGN.md: status names the mode), and none
// when nothing runs.
func TestMembershipLine(t *testing.T) {
	run := func(name string, pid int, m actuate.MembershipMode) reconciler.ServerStatus {
		return reconciler.ServerStatus{Name: name, PID: pid, Membership: m}
	}
	for _, tt := range []struct {
		name    string
		servers []reconciler.ServerStatus
		want    string
	}{
		{"nothing runs", []reconciler.ServerStatus{run("api", 0, "")}, ""},
		{"all in cgroups", []reconciler.ServerStatus{run("api", 10, actuate.MembershipCgroup), run("db", 11, actuate.MembershipCgroup), run("web", 0, "")},
			"Membership: cgroup (each server's processes are the members of its own cgroup)"},
		{"all by session", []reconciler.ServerStatus{run("api", 10, actuate.MembershipSession)},
			"Membership: session (each server's session and process group, and the processes carrying its instance token; cgroups are not available)"},
		{"mixed, names sorted", []reconciler.ServerStatus{run("web", 12, actuate.MembershipCgroup), run("db", 11, actuate.MembershipSession), run("api", 10, actuate.MembershipCgroup)},
			"Membership: cgroup for api, web; session for db"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := membershipLine(tt.servers); got != tt.want {
				t.Errorf("membershipLine = %q, want %q", got, tt.want)
			}
		})
	}
}

func toAny(m map[string]bool) map[string]any {
	out := map[string]any{}
	for k := range m {
		out[k] = true
	}
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// TestComposeServer: status without a running up's word, from the record's
// verdict, the readiness check and status.json.

func TestShortAge(t *testing.T) {
	for _, tt := range []struct {
		d    time.Duration
		want string
	}{
		{-time.Second, "0s"}, {0, "0s"}, {59 * time.Second, "59s"}, {119 * time.Second, "119s"},
		{2 * time.Minute, "2m"}, {119 * time.Minute, "119m"}, {2 * time.Hour, "2h"}, {47 * time.Hour, "47h"}, {72 * time.Hour, "3d"},
	} {
		if got := shortAge(tt.d); got != tt.want {
			t.Errorf("shortAge(%s) = %q, want %q", tt.d, got, tt.want)
		}
	}
}

// TestWatchChanges: piped --watch prints the rows that changed (AGE aside)
// and the servers that went away.
func TestWatchChanges(t *testing.T) {
	st := everyPhase()
	first := rowKeys(st, goldenNow)
	if got := changedRows(first, st, goldenNow.Add(time.Hour)); len(got) != 0 {
		t.Errorf("only time passed: changed %v, want none", got)
	}
	st2 := everyPhase()
	st2.Servers[3].Phase = reconciler.PhaseRunning // db
	st2.Servers[3].Ready = true
	st2.Servers = append(st2.Servers[:1], st2.Servers[2:]...) // backup gone
	got := changedRows(first, st2, goldenNow)
	if d := cmp.Diff([]string{"db", "-backup"}, got); d != "" {
		t.Errorf("changed rows (-want +got):\n%s", d)
	}
	var b bytes.Buffer
	if err := writeRowsOnly(&b, got, st2, goldenNow); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(b.String(), "db") || !strings.Contains(b.String(), "Running") || !strings.Contains(b.String(), "backup") {
		t.Errorf("rows printed:\n%s", b.String())
	}
}

func TestCheckMetricsAddr(t *testing.T) {
	for _, tt := range []struct {
		addr, want, errPart string
	}{
		{"127.0.0.1:9464", "127.0.0.1:9464", ""},
		{"[::1]:9464", "[::1]:9464", ""},
		{"localhost:9464", "127.0.0.1:9464", ""},
		{"127.0.0.2:0", "127.0.0.2:0", ""},
		{":9464", "", "every interface"},
		{"0.0.0.0:9464", "", "not a loopback"},
		{"192.168.1.10:9464", "", "not a loopback"},
		{"[::]:9464", "", "not a loopback"},
		{"example.com:9464", "", "not an IP address"},
		{"127.0.0.1", "", "invalid --metrics-addr"},
		{"127.0.0.1:http", "", "not a number"},
		{"127.0.0.1:70000", "", "not a number"},
	} {
		got, err := checkMetricsAddr(tt.addr)
		switch {
		case tt.errPart == "" && (err != nil || got != tt.want):
			t.Errorf("checkMetricsAddr(%q) = %q, %v; want %q", tt.addr, got, err, tt.want)
		case tt.errPart != "" && (err == nil || !strings.Contains(err.Error(), tt.errPart)):
			t.Errorf("checkMetricsAddr(%q) = %q, %v; want an error with %q", tt.addr, got, err, tt.errPart)
		}
	}
	// up refuses before it starts anything.
	r := procfleet(t, "up", "-f", "testdata/good.yaml", "--state-dir", filepath.Join(t.TempDir(), "state"), "--metrics-addr", "0.0.0.0:9464")
	if r.code != 1 || !strings.Contains(r.stderr, "refusing --metrics-addr") || !strings.Contains(r.stderr, "use 127.0.0.1:9464") {
		t.Errorf("up --metrics-addr 0.0.0.0:9464: exit %d, stderr %q", r.code, r.stderr)
	}
}

// TestStatusWatchPiped: --watch into a pipe prints the table once, then
// changes only; it ends with its context (Ctrl-C) and exits 0. The context
// is cancelled up front so the first drawing is the only one.
func TestStatusWatchPiped(t *testing.T) {
	state := filepath.Join(t.TempDir(), "state")
	for _, tt := range []struct {
		format string
		check  func(string) bool
	}{
		{outputTable, func(out string) bool {
			return strings.Count(out, "NAME") == 1 && strings.Contains(out, "NotStarted")
		}},
		{outputJSON, func(out string) bool {
			var st reconciler.Status
			return strings.Count(out, "\n") == 1 && json.Unmarshal([]byte(out), &st) == nil && len(st.Servers) == 2
		}},
	} {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		var stdout, stderr bytes.Buffer
		code := run(ctx, []string{"status", "--watch", "-o", tt.format, "-f", "testdata/good.yaml", "--state-dir", state}, &stdout, &stderr)
		if code != 0 || !tt.check(stdout.String()) {
			t.Errorf("status --watch -o %s: exit %d\nstdout:\n%s\nstderr:\n%s", tt.format, code, stdout.String(), stderr.String())
		}
	}
	if _, err := os.Stat(state); !os.IsNotExist(err) {
		t.Errorf("status created the state folder %s (err %v); it must change nothing", state, err)
	}
}

// TestCompleteServerNames: shell completion of NAME for status and describe
// offers the fleet's servers (describe takes one).
func TestCompleteServerNames(t *testing.T) {
	state := filepath.Join(t.TempDir(), "state")
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"__complete", "describe", "-f", "testdata/good.yaml", "--state-dir", state, ""}, "api\ndb\n:4\n"},
		{[]string{"__complete", "status", "-f", "testdata/good.yaml", "--state-dir", state, "api", ""}, "db\n:4\n"},
		{[]string{"__complete", "describe", "-f", "testdata/good.yaml", "--state-dir", state, "api", ""}, ":4\n"},
	} {
		r := procfleet(t, tt.args...)
		if r.code != 0 || r.stdout != tt.want {
			t.Errorf("%v: exit %d, stdout %q; want %q", tt.args, r.code, r.stdout, tt.want)
		}
	}
}
