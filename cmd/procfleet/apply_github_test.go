package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/procfleet/procfleet/reconciler"
	"github.com/procfleet/procfleet/spec"
)

// applyResultFixture is an apply that gave up on two servers of three: api
// crashed twice before it was Ready (its log tail has a pipe, backticks and
// a percent sign, which the outputs must escape), web-1 waits for it, db is
// Ready.
func applyResultFixture() reconciler.ApplyResult {
	start := time.Date(2026, 12, 2, 2, 0, 0, 0, time.UTC)
	readyAt := start.Add(1234567 * time.Microsecond)
	idx := 1
	return reconciler.ApplyResult{
		Status: reconciler.Status{Servers: []reconciler.ServerStatus{
			{Name: "api", Phase: reconciler.PhaseFailed, Restarts: 1, Reason: "exited with code 3 before it was ready; exited twice before it was Ready",
				Message:  "listening on :8080\nconfig | ```yaml``` 100% broken\npanic: pool 100% used",
				LastExit: &reconciler.LastExit{Code: 3, Reason: "exited with code 3 before it was ready", At: start.Add(2 * time.Second)}},
			{Name: "db", Phase: reconciler.PhaseRunning, Ready: true, PID: 4242, Port: 5432, StartedAt: &start,
				Conditions: []reconciler.Condition{{Type: reconciler.ConditionReady, Status: reconciler.ConditionTrue, LastTransitionTime: readyAt}}},
			{Name: "web-1", Phase: reconciler.PhasePending, Reason: "WaitingForDependency", Message: "waits for api", ReplicaOf: "web", Index: &idx},
		}},
		NotConverged: map[string]string{"api": "", "web-1": "its dependency api failed"},
	}
}

func same(s string) string { return s }

func TestApplyGitHubGolden(t *testing.T) {
	res := applyResultFixture()
	sources := map[string]spec.Source{
		"api": {File: "deploy/fleet,main.yaml", Line: 7},
		"web": {File: "deploy/web.yaml", Line: 1},
	}
	golden(t, "apply-failed.github", applyAnnotations(res, sources, same))
	golden(t, "apply-failed.summary.md", applyStepSummary(res))

	ok := applyResultFixture()
	ok.Servers, ok.NotConverged = ok.Servers[1:2], nil
	if got := applyAnnotations(ok, sources, same); got != "" {
		t.Errorf("annotations of a converged fleet: %q, want none", got)
	}
	golden(t, "apply-ok.summary.md", applyStepSummary(ok))

	bad := reconciler.ApplyResult{Status: reconciler.Status{Errors: []reconciler.StatusError{{File: "procfleet.yaml", Line: 4, Field: "spec.port", Message: "must be 1..65535, got 0"}}}}
	golden(t, "apply-bad.github", applyAnnotations(bad, nil, same))
	golden(t, "apply-bad.summary.md", applyStepSummary(bad))
}

// TestApplyGitHubEndToEnd: a server that exits at once fails apply --wait
// -o github (the real binary, a real server): exit 1, an annotation at the
// fleet file and line of its document, and a step summary with the table
// and its log tail.
func TestApplyGitHubEndToEnd(t *testing.T) {
	f := newCrashFleet(t)
	checkApplyGitHub(t, f, "applied: ", "Failed")
}

// TestApplyGitHubThroughUp: the same through a running up, which keeps
// restarting the crashing server with a back-off (apply has given up on
// it; its phase is CrashLoopBackOff, or Starting when the back-off ended
// first on a slow machine); apply locates it in the files it was given.
func TestApplyGitHubThroughUp(t *testing.T) {
	f := newCrashFleet(t)
	f.up()
	f.waitStatus("db ready", readyWith("db"))
	checkApplyGitHub(t, f, "applied through procfleet up", "(CrashLoopBackOff|Starting)")
}

// newCrashFleet is db, which comes up, and crash, which prints a line and
// exits with code 3 before it listens.
func newCrashFleet(t *testing.T) *e2eFleet {
	f := newE2EFleet(t, "db", "crash")
	f.write(nil, map[string][]string{"crash": {"-listen-delay", "1m", "-print", "boom: no config", "-exit-after", "1ms", "-exit-code", "3"}})
	return f
}

// checkApplyGitHub runs apply --wait -o github on f (crash fails, db is
// Ready) and checks its exit, annotation and step summary; success is what
// it must not print, phase a pattern of crash's phase in the summary.
func checkApplyGitHub(t *testing.T, f *e2eFleet, success, phase string) {
	t.Helper()
	summary := filepath.Join(t.TempDir(), "summary.md")
	if err := os.WriteFile(summary, []byte("earlier step\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv(envStepSummary, summary)
	code, out := f.cmd("apply", "--wait", "--timeout", "2m", "-o", "github", "-f", f.file)
	t.Logf("apply --wait -o github: exit %d\n%s", code, out)
	if code != 1 || strings.Contains(out, success) || !strings.Contains(out, "1 server(s) not converged\n  crash: ") ||
		!strings.Contains(out, "procfleet describe crash") || strings.Contains(out, "operation failed") {
		t.Errorf("apply: exit %d, want 1 and no %q, saying crash did not converge and how to see why", code, success)
	}
	// The document's first line: two above its metadata.
	yaml, err := os.ReadFile(f.file)
	if err != nil {
		t.Fatal(err)
	}
	line := -1
	for i, l := range strings.Split(string(yaml), "\n") {
		if l == "metadata: {name: crash}" {
			line = i + 1 - 2
		}
	}
	want := "::error file=" + escapeGitHubProperty(f.file) + ",line=" + itoa(line) + ",title=procfleet%3A crash::"
	var annotation string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "::error") {
			if annotation != "" {
				t.Errorf("more than one annotation:\n%s\n%s", annotation, l)
			}
			annotation = l
		}
	}
	if !strings.HasPrefix(annotation, want) || !strings.Contains(annotation, "exited with code 3") || !strings.Contains(annotation, "boom: no config") {
		t.Errorf("annotation %q\nwant it to start with %q and name the exit code and the last log line", annotation, want)
	}
	b, err := os.ReadFile(summary)
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	t.Logf("step summary:\n%s", s)
	if row := regexp.MustCompile(`(?m)^\| crash \| ` + phase + ` \| no \| +\| [1-9][0-9]* \|$`); !row.MatchString(s) {
		t.Errorf("step summary lacks a row %s", row)
	}
	for _, w := range []string{"earlier step\n### procfleet apply: 1 of 2 server(s) not as declared", "| db | Running | yes |", "#### crash", "```text\n", "boom: no config\n```"} {
		if !strings.Contains(s, w) {
			t.Errorf("step summary lacks %q", w)
		}
	}
}

// TestApplyThroughUpTimeout: apply --wait through up that runs out of
// --timeout says so, once, with the server it waited for.
func TestApplyThroughUpTimeout(t *testing.T) {
	f := newE2EFleet(t, "db", "slow")
	f.write(nil, map[string][]string{"slow": {"-listen-delay", "1m"}})
	f.up()
	f.waitStatus("db ready", readyWith("db"))
	code, out := f.cmd("apply", "--wait", "--timeout", "1s", "-f", f.file)
	t.Logf("apply --wait --timeout 1s: exit %d\n%s", code, out)
	if code != 1 || !strings.Contains(out, "apply (through procfleet up): timed out after 1s: 1 server(s) not converged\n  slow: Starting") ||
		strings.Contains(out, "operation failed") || strings.Count(out, "slow: ") != 1 {
		t.Errorf("apply: exit %d, want 1 saying it timed out waiting for slow, once", code)
	}
}

// TestApplyGitHubSummaryUnwritable: a step summary that cannot be written
// is said on stderr and changes nothing else: a healthy fleet still
// passes (a real server), a failed one still fails with its annotation
// and reason (a program that does not exist: no process is started).
func TestApplyGitHubSummaryUnwritable(t *testing.T) {
	f := newE2EFleet(t, "db")
	f.write(nil, nil)
	t.Setenv(envStepSummary, f.dir) // a folder: cannot be opened for writing
	code, out := f.cmd("apply", "--wait", "--timeout", "2m", "-o", "github", "-f", f.file)
	t.Logf("healthy: exit %d\n%s", code, out)
	if code != 0 || !strings.Contains(out, "applied: 1 server(s), 1 ready") || !strings.Contains(out, "apply: cannot write the step summary ($GITHUB_STEP_SUMMARY)") {
		t.Errorf("healthy fleet: exit %d, want 0, applied, and the summary error on stderr", code)
	}

	dir := t.TempDir()
	file := filepath.Join(dir, "procfleet.yaml")
	fleet := "apiVersion: procfleet.dev/v1alpha1\nkind: Server\nmetadata: {name: api}\nspec: {command: [./bin/nope]}\n"
	if err := os.WriteFile(file, []byte(fleet), 0o644); err != nil {
		t.Fatal(err)
	}
	r := procfleet(t, "apply", "--wait", "--timeout", "30s", "-o", "github", "-f", file, "--state-dir", filepath.Join(dir, ".procfleet"))
	t.Logf("missing program: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	if r.code != 1 || !strings.Contains(r.stderr, "program ./bin/nope not found") || !strings.Contains(r.stderr, "apply: cannot write the step summary") ||
		!strings.Contains(r.stdout, "::error file="+escapeGitHubProperty(file)+",line=1,title=procfleet%3A api::Failed: program ./bin/nope not found") {
		t.Errorf("missing program: exit %d, want 1 with the annotation, the start failure and the summary error", r.code)
	}
}

func TestAnnotationPath(t *testing.T) {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	ws := filepath.Dir(filepath.Dir(wd)) // the repository: cmd/procfleet is two below
	for _, c := range []struct{ workspace, file, want string }{
		{"", "procfleet.yaml", "procfleet.yaml"},
		{"", "/abs/fleet.yaml", "/abs/fleet.yaml"},
		{ws, "procfleet.yaml", "cmd/procfleet/procfleet.yaml"},
		{ws, filepath.Join(ws, "examples/quickstart/procfleet.yaml"), "examples/quickstart/procfleet.yaml"},
		{ws, "../../examples/quickstart/procfleet.yaml", "examples/quickstart/procfleet.yaml"},
		{ws, "/elsewhere/fleet.yaml", "/elsewhere/fleet.yaml"},
		{ws, "../../..x/f.yaml", "..x/f.yaml"}, // inside, though it starts with ".."
		{filepath.Join(ws, "cmd"), "../../..x/f.yaml", "../../..x/f.yaml"},
		{ws, "", ""},
	} {
		t.Setenv(envWorkspace, c.workspace)
		if got := annotationPath(c.file); got != c.want {
			t.Errorf("annotationPath(%q) under GITHUB_WORKSPACE=%q = %q, want %q", c.file, c.workspace, got, c.want)
		}
	}
}
