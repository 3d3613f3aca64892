package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/procfleet/procfleet/actuate"
	"github.com/procfleet/procfleet/internal/testserver"
	"github.com/procfleet/procfleet/observe"
	"github.com/procfleet/procfleet/reconciler"
)

// run runs procfleet with the fleet's state folder and returns its exit
// code, stdout and stderr apart.
func (f *e2eFleet) run(args ...string) (int, string, string) {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := exec.CommandContext(ctx, procfleetBin(f.t), append(args, "--state-dir", f.state, "--log-format", "console")...)
	var stdout, stderr bytes.Buffer
	c.Stdout, c.Stderr = &stdout, &stderr
	err := c.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		f.t.Fatalf("run procfleet %v: %v", args, err)
	}
	return code, stdout.String(), stderr.String()
}

// statusJSON runs `procfleet status -o json` and decodes it.
func (f *e2eFleet) statusJSON() reconciler.Status {
	f.t.Helper()
	code, out, errOut := f.run("status", "-f", f.file, "-o", "json")
	if code != 0 {
		f.t.Fatalf("status -o json: exit %d\n%s%s", code, out, errOut)
	}
	var st reconciler.Status
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		f.t.Fatalf("status -o json: %v\n%s", err, out)
	}
	return st
}

// summary is what `status` during up and without it must agree on.
func summary(st reconciler.Status) string {
	var b strings.Builder
	for _, s := range st.Servers {
		fmt.Fprintf(&b, "%s %s ready=%v pid=%d port=%d\n", s.Name, s.Phase, s.Ready, s.PID, s.Port)
	}
	return b.String()
}

// scrapeUntil fetches /metrics until it holds every one of want (bounded).
func scrapeUntil(t *testing.T, port int, want ...string) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	url := fmt.Sprintf("http://127.0.0.1:%d/metrics", port)
	for {
		var body string
		resp, err := http.Get(url)
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			body = string(b)
		}
		missing := ""
		for _, w := range want {
			if !strings.Contains(body, w) {
				missing = w
				break
			}
		}
		if err == nil && missing == "" {
			return body
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %q in %s (last error %v):\n%.3000s", missing, url, err, body)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestStatusWithAndWithoutUp: status during up and after up has exited
// (servers left running) agree; /metrics during up has the per-server
// series; the table names every server.
func TestStatusWithAndWithoutUp(t *testing.T) {
	f := newE2EFleet(t, "db", "api")
	f.write(map[string][]string{"api": {"db"}}, nil)
	mport := testserver.FreePort(t)
	up, upLog := f.up("--metrics-addr", fmt.Sprintf("127.0.0.1:%d", mport))
	f.waitStatus("both ready", readyWith("db", "api"))

	during := f.statusJSON()
	for _, s := range during.Servers {
		if s.Phase != reconciler.PhaseRunning || !s.Ready || s.PID == 0 || s.Port != f.ports[s.Name] {
			t.Errorf("status during up: %+v; want Running, Ready, a pid and port %d", s, f.ports[s.Name])
		}
	}
	if len(during.Servers) != 2 || during.Errors == nil {
		t.Errorf("status during up: %d servers, errors %v; want 2 and an empty list", len(during.Servers), during.Errors)
	}
	code, table, errOut := f.run("status", "-f", f.file)
	if code != 0 || !strings.Contains(table, "NAME") || !strings.Contains(table, "api") || !strings.Contains(table, "Running") {
		t.Errorf("status table: exit %d\n%s%s", code, table, errOut)
	}
	// The table names the membership mode the records say (DESIGN.md
	// "Membership"), with up and without it.
	rec, err := os.ReadFile(filepath.Join(f.state, "servers", "api.json"))
	if err != nil {
		t.Fatal(err)
	}
	mode := actuate.MembershipSession
	if strings.Contains(string(rec), `"cgroup"`) {
		mode = actuate.MembershipCgroup
	}
	wantMembership := "Membership: " + string(mode) + " ("
	if !strings.HasPrefix(errOut, wantMembership) || strings.Contains(table, "Membership") {
		t.Errorf("status during up: stderr %q, want it to start with %q (and stdout only the table):\n%s", errOut, wantMembership, table)
	}

	body := scrapeUntil(t, mport,
		`procfleet_server_up{server="api"} 1`, `procfleet_server_up{server="db"} 1`,
		`procfleet_server_ready{server="api"} 1`, `procfleet_server_ready{server="db"} 1`,
		`procfleet_server_restarts_total{server="api"} 0`,
		`procfleet_server_phase{phase="Running",server="db"} 1`,
		"procfleet_reconcile_duration_seconds_count", "procfleet_workqueue_depth", "procfleet_fleet_file_errors 0")
	if strings.Contains(body, "procfleet_server_last_exit_code") {
		t.Errorf("last exit code series before any exit:\n%s", body)
	}

	// A crash shows in the metrics as a restart and a last exit code.
	api := pidIn(during, "api")
	if err := syscall.Kill(api, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	f.waitStatus("api restarted", func(st reconciler.Status) bool { return readyWith("api")(st) && pidIn(st, "api") != api })
	scrapeUntil(t, mport, `procfleet_server_restarts_total{server="api"} 1`, `procfleet_server_last_exit_code{server="api"} -1`)
	during = f.statusJSON()

	if err := up.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := up.Wait(); err != nil {
		b, _ := os.ReadFile(upLog)
		t.Fatalf("up after SIGTERM: %v\n%s", err, b)
	}
	after := f.statusJSON()
	if summary(during) != summary(after) {
		t.Errorf("status during up and without it differ:\nduring:\n%safter:\n%s", summary(during), summary(after))
	}
	if _, _, errOut := f.run("status", "-f", f.file); !strings.HasPrefix(errOut, wantMembership) {
		t.Errorf("status without up: stderr %q, want it to start with %q", errOut, wantMembership)
	}
	if s, _ := after.Get("api"); s.Restarts != 1 || s.LastExit == nil {
		t.Errorf("api without up: restarts %d, last exit %v; want 1 and the SIGKILL (from status.json)", s.Restarts, s.LastExit)
	}

	// Named servers, and an unknown name.
	code, out, _ := f.run("status", "-f", f.file, "api", "-o", "yaml")
	if code != 0 || !strings.Contains(out, "name: api") || strings.Contains(out, "name: db") {
		t.Errorf("status api -o yaml: exit %d\n%s", code, out)
	}
	code, _, errOut = f.run("status", "-f", f.file, "nosuch")
	if code != 1 || !strings.Contains(errOut, "no server named nosuch") {
		t.Errorf("status nosuch: exit %d, stderr %q", code, errOut)
	}
	if code, out := f.cmd("down", "-f", f.file); code != 0 {
		t.Errorf("down: exit %d\n%s", code, out)
	}
	after = f.statusJSON()
	for _, s := range after.Servers {
		if s.Phase == reconciler.PhaseRunning || s.PID != 0 {
			t.Errorf("after down: %+v, want not running", s)
		}
	}
}

// TestDiffExitCodes: diff exits 2 with changes pending (missing, spec
// changed, crashed), 0 in sync, 1 when the files do not load.
func TestDiffExitCodes(t *testing.T) {
	f := newE2EFleet(t, "one", "two")
	f.write(nil, nil)
	code, out, errOut := f.run("diff", "-f", f.file)
	if code != 2 || !strings.Contains(out, "+ one: start: missing") || !strings.Contains(out, "+ two: start") {
		t.Errorf("diff before apply: exit %d\n%s%s", code, out, errOut)
	}
	if code, out := f.cmd("apply", "--wait", "-f", f.file); code != 0 {
		t.Fatalf("apply: exit %d\n%s", code, out)
	}
	code, out, errOut = f.run("diff", "-f", f.file)
	if code != 0 || !strings.Contains(out, "in sync: 2 server(s)") {
		t.Errorf("diff after apply: exit %d\n%s%s", code, out, errOut)
	}

	f.write(nil, map[string][]string{"two": {"-health-status", "200"}})
	code, out, errOut = f.run("diff", "-f", f.file)
	if code != 2 || !strings.Contains(out, "~ two: replace: spec changed: args") || strings.Contains(out, "one:") {
		t.Errorf("diff after an args change: exit %d\n%s%s", code, out, errOut)
	}

	good, err := os.ReadFile(f.file)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(f.file, append(good, []byte("\n---\nkind: [unclosed\n")...), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = f.run("diff", "-f", f.file)
	if code != 1 || !strings.Contains(errOut, "procfleet.yaml:") {
		t.Errorf("diff of a broken file: exit %d\n%s%s", code, out, errOut)
	}

	f.write(nil, nil)
	st, _ := reconciler.ReadStatus(f.state + "/status.json")
	one := pidIn(st, "one")
	if one == 0 {
		t.Fatalf("no pid for one in status.json: %+v", st)
	}
	if err := syscall.Kill(one, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for syscall.Kill(one, 0) == nil {
		if time.Now().After(deadline) {
			t.Fatalf("pid %d still exists 30s after SIGKILL", one)
		}
		time.Sleep(10 * time.Millisecond) // the zombie is reaped by init, not by us
	}
	code, out, errOut = f.run("diff", "-f", f.file)
	if code != 2 || !strings.Contains(out, "+ one: start: crashed: pid "+strconv.Itoa(one)) {
		t.Errorf("diff after a crash: exit %d\n%s%s", code, out, errOut)
	}
	if code, out := f.cmd("down", "-f", f.file); code != 0 {
		t.Errorf("down: exit %d\n%s", code, out)
	}
}

// TestDescribeCrashed: describe of a server that crashed under up shows its
// exit reason, its log tail and its events; and it works after up exits.
func TestDescribeCrashed(t *testing.T) {
	f := newE2EFleet(t, "crash")
	port := f.ports["crash"]
	yaml := fmt.Sprintf(`apiVersion: procfleet.dev/v1alpha1
kind: Server
metadata: {name: crash}
spec:
  command: [%q, -port, "%d", -stamp, %q, -print, "boom: disk full", -exit-after, 300ms, -exit-code, "3"]
  port: %d
  restartPolicy: Never
`, f.server, port, f.stamp("crash"), port)
	if err := os.WriteFile(f.file, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	up, upLog := f.up()
	f.waitStatus("crash failed", func(st reconciler.Status) bool {
		s, ok := st.Get("crash")
		return ok && s.Phase == reconciler.PhaseFailed && s.LastExit != nil
	})
	check := func(when, source string) {
		code, out, errOut := f.run("describe", "crash", "-f", f.file)
		for _, want := range []string{"Phase:", "Failed", "exited with code 3", "boom: disk full", "Exited", "Restart:", "Never", "Events", source} {
			if !strings.Contains(out, want) {
				t.Errorf("describe %s: no %q in:\n%s", when, want, out)
			}
		}
		if code != 0 {
			t.Errorf("describe %s: exit %d\n%s", when, code, errOut)
		}
	}
	check("during up", "Source:         the running procfleet up")
	if err := up.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := up.Wait(); err != nil {
		b, _ := os.ReadFile(upLog)
		t.Fatalf("up after SIGTERM: %v\n%s", err, b)
	}
	check("without up", "Source:         observed now")
	code, _, errOut := f.run("describe", "nosuch", "-f", f.file)
	if code != 1 || !strings.Contains(errOut, "no server named nosuch") {
		t.Errorf("describe nosuch: exit %d, stderr %q", code, errOut)
	}
}

// TestQuarantinedServer: a record that cannot prove ownership (no start
// time, rule 5) of a live process: status says Quarantined, diff flags it
// (exit 2), describe prints the manual-stop command with its pid and
// process group; nothing is signalled.
func TestQuarantinedServer(t *testing.T) {
	f := newE2EFleet(t, "odd")
	port := f.ports["odd"]
	argv := []string{f.server, "-port", strconv.Itoa(port), "-stamp", f.stamp("odd")}
	c := exec.Command(argv[0], argv[1:]...)
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Process.Kill(); _, _ = c.Process.Wait() })
	pid := c.Process.Pid
	waitAccepting(t, port)

	yaml := fmt.Sprintf("apiVersion: procfleet.dev/v1alpha1\nkind: Server\nmetadata: {name: odd}\nspec:\n  command: [%q, -port, \"%d\", -stamp, %q]\n  port: %d\n",
		f.server, port, f.stamp("odd"), port)
	if err := os.WriteFile(f.file, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	sd, err := actuate.OpenStateDir(f.state)
	if err != nil {
		t.Fatal(err)
	}
	// Hand-written: no start time, no boot id.
	rec := fmt.Sprintf(`{"version": 1, "name": "odd", "pid": %d, "pgid": %d, "cmdline": %s, "port": %d, "specHash": "sha256:x", "startedAt": "2026-11-30T10:00:00Z"}`,
		pid, pid, mustJSON(t, argv), port)
	if err := os.WriteFile(sd.RecordPath("odd"), []byte(rec), 0o600); err != nil {
		t.Fatal(err)
	}

	st := f.statusJSON()
	s, _ := st.Get("odd")
	if s.Phase != reconciler.PhaseQuarantined || s.Reason != "UnverifiedOwner" || !strings.Contains(s.Message, fmt.Sprintf("kill -TERM -- -%d", pid)) {
		t.Errorf("status of odd: %+v; want Quarantined/UnverifiedOwner with the manual-stop command", s)
	}
	code, out, errOut := f.run("diff", "-f", f.file)
	if code != 2 || !strings.Contains(out, "! odd: quarantined: UnverifiedOwner") {
		t.Errorf("diff: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = f.run("describe", "odd", "-f", f.file)
	for _, want := range []string{"Quarantined", fmt.Sprintf("pid %d", pid), fmt.Sprintf("kill -TERM -- -%d", pid), "process group " + strconv.Itoa(pid)} {
		if !strings.Contains(out, want) {
			t.Errorf("describe odd: no %q in:\n%s", want, out)
		}
	}
	if code != 0 {
		t.Errorf("describe odd: exit %d\n%s", code, errOut)
	}
	if err := syscall.Kill(pid, 0); err != nil {
		t.Errorf("the quarantined process is gone: %v", err)
	}
	if b, err := os.ReadFile(sd.RecordPath("odd")); err != nil || string(b) != rec {
		t.Errorf("the record changed: %q, %v", b, err)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// waitAccepting waits until something accepts TCP on 127.0.0.1:port
// (bounded).
func waitAccepting(t *testing.T, port int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !portAccepts(port) {
		if time.Now().After(deadline) {
			t.Fatalf("nothing accepts on port %d", port)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func portAccepts(port int) bool {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	return observe.PortAccepting(ctx, port)
}
