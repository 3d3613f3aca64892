package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/procfleet/procfleet/internal/testserver"
	"github.com/procfleet/procfleet/reconciler"
)

// The tests of this file each reproduce one fix of issue 14 with the real
// binary (on main 74ab52f each fails).

// TestApplyAndDownThroughUp (fixes 1, 5 and 7): apply without --wait
// through a running up succeeds; down of an unknown name is an error with
// the nearest name; after down stopped everything, up does not claim to
// leave servers running.
func TestApplyAndDownThroughUp(t *testing.T) {
	f := newE2EFleet(t, "web")
	f.write(nil, nil)
	up, log := f.up()
	f.waitStatus("web ready", readyWith("web"))

	code, out := f.cmd("apply", "-f", f.file)
	if code != 0 || !strings.Contains(out, "applied through procfleet up") {
		t.Errorf("apply without --wait through up: exit %d\n%s", code, out)
	}
	code, out = f.cmd("down", "wbe", "-f", f.file)
	if code != 1 || !strings.Contains(out, "no server named wbe (did you mean web?)") {
		t.Errorf("down wbe through up: exit %d, want 1 naming web\n%s", code, out)
	}
	code, out = f.cmd("down", "-f", f.file)
	if code != 0 {
		t.Fatalf("down: exit %d\n%s", code, out)
	}
	if err := up.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := up.Wait(); err != nil {
		t.Errorf("up after SIGTERM: %v", err)
	}
	b, _ := os.ReadFile(log)
	if strings.Contains(string(b), "left running") || !strings.Contains(string(b), "no server is running") {
		t.Errorf("up's last words after down stopped everything:\n%s", b)
	}
}

// TestDownUnknownName (fix 7): down of a name that is neither declared nor
// recorded exits 1 with the nearest name, with or without a state folder.
func TestDownUnknownName(t *testing.T) {
	f := newE2EFleet(t, "web")
	f.write(nil, nil)
	code, out := f.cmd("down", "ghost", "-f", f.file)
	if code != 1 || !strings.Contains(out, "no server named ghost") {
		t.Errorf("down ghost without a state folder: exit %d\n%s", code, out)
	}
	if code, out := f.cmd("apply", "--wait", "-f", f.file); code != 0 {
		t.Fatalf("apply: exit %d\n%s", code, out)
	}
	code, out = f.cmd("down", "weeb", "-f", f.file)
	if code != 1 || !strings.Contains(out, "no server named weeb (did you mean web?)") {
		t.Errorf("down weeb: exit %d\n%s", code, out)
	}
	if code, out := f.cmd("down", "-f", f.file); code != 0 {
		t.Errorf("down: exit %d\n%s", code, out)
	}
}

// TestUpEndsOnSIGHUP (fix 6): SIGHUP (the terminal closed) ends up like
// SIGTERM: --down-on-exit honoured, socket removed, exit 0.
func TestUpEndsOnSIGHUP(t *testing.T) {
	f := newE2EFleet(t, "solo")
	f.write(nil, nil)
	up, log := f.up("--down-on-exit")
	pid := pidIn(f.waitStatus("ready", readyWith("solo")), "solo")
	waitLog(t, log, "solo: ready in")
	if err := up.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	if err := up.Wait(); err != nil {
		b, _ := os.ReadFile(log)
		t.Fatalf("up after SIGHUP: %v\n%s", err, b)
	}
	if syscall.Kill(pid, 0) == nil {
		t.Errorf("pid %d alive after up --down-on-exit got SIGHUP", pid)
	}
	if _, err := os.Lstat(filepath.Join(f.state, "procfleet.sock")); err == nil {
		t.Errorf("socket left behind after SIGHUP")
	}
}

// TestUpRefusesBeforeActing (fix 8): up with no fleet file creates no state
// folder; up on files that do not load fails without its "watching" banner.
func TestUpRefusesBeforeActing(t *testing.T) {
	dir := t.TempDir()
	f := &e2eFleet{t: t, dir: dir, file: filepath.Join(dir, "procfleet.yaml"), state: filepath.Join(dir, ".procfleet")}
	code, out := f.cmd("up", "-f", f.file)
	if code != 1 {
		t.Errorf("up with no fleet file: exit %d\n%s", code, out)
	}
	if _, err := os.Stat(f.state); err == nil {
		t.Errorf("up with no fleet file created %s", f.state)
	}
	if err := os.WriteFile(f.file, []byte("apiVersion: procfleet.dev/v1alpha1\nkind: Server\nmetadata: {name: a}\nspec: {command: [x], prot: 8080}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out = f.cmd("up", "-f", f.file)
	if code != 1 || strings.Contains(out, "watching") || !strings.Contains(out, "spec.prot") {
		t.Errorf("up on a bad file: exit %d, want 1 naming spec.prot and no banner\n%s", code, out)
	}
	if _, err := os.Stat(f.state); err == nil {
		t.Errorf("up on a bad file created %s", f.state)
	}
}

// TestUpJSONLogsOnly (fix 9): with --log-format json every line up writes
// to stderr is a JSON object, progress included.
func TestUpJSONLogsOnly(t *testing.T) {
	f := newE2EFleet(t, "a", "b")
	f.write(map[string][]string{"b": {"a"}}, nil)
	up, log := f.up("--log-format", "json")
	f.waitStatus("ready", readyWith("a", "b"))
	if err := up.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := up.Wait(); err != nil {
		t.Errorf("up after SIGTERM: %v", err)
	}
	b, _ := os.ReadFile(log)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	sawReady := false
	for _, l := range lines {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Errorf("not a JSON object: %q", l)
			continue
		}
		if m["reason"] == "Ready" && m["server"] == "b" {
			sawReady = true
		}
	}
	if !sawReady {
		t.Errorf("no JSON progress entry for b's Ready:\n%s", b)
	}
}

// TestProgramNotFound (fix 5): a server whose program does not exist is
// reported as such, by apply and by status, not as "Failed / Exited".
func TestProgramNotFound(t *testing.T) {
	dir := t.TempDir()
	f := &e2eFleet{t: t, dir: dir, file: filepath.Join(dir, "procfleet.yaml"), state: filepath.Join(dir, ".procfleet")}
	port := testserver.FreePort(t)
	fleet := "apiVersion: procfleet.dev/v1alpha1\nkind: Server\nmetadata: {name: api}\nspec: {command: [./bin/nope], port: " + itoa(port) + "}\n"
	if err := os.WriteFile(f.file, []byte(fleet), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out := f.cmd("apply", "--wait", "--timeout", "30s", "-f", f.file)
	if code != 1 || !strings.Contains(out, "program ./bin/nope not found") {
		t.Errorf("apply: exit %d, want 1 saying the program was not found\n%s", code, out)
	}
	// apply -o json: the final status document, with why it gave up.
	code, out = f.cmd("apply", "--wait", "--timeout", "30s", "-o", "json", "-f", f.file)
	var res reconciler.ApplyResult
	if i := strings.Index(out, "{"); code != 1 || i < 0 || json.NewDecoder(strings.NewReader(out[i:])).Decode(&res) != nil {
		t.Fatalf("apply -o json: exit %d, want 1 and a status document\n%s", code, out)
	}
	if s, _ := res.Get("api"); s.Phase != reconciler.PhaseFailed || !strings.Contains(s.Message+" "+s.Reason, "program ./bin/nope not found") {
		t.Errorf("apply -o json: api %s / %q / %q; want Failed saying the program was not found", s.Phase, s.Reason, s.Message)
	}
	if _, ok := res.NotConverged["api"]; !ok || len(res.NotConverged) != 1 {
		t.Errorf("apply -o json: notConverged %v, want api", res.NotConverged)
	}
	code, out = f.cmd("status", "-o", "json", "-f", f.file)
	var st reconciler.Status
	if err := json.Unmarshal([]byte(out[strings.Index(out, "{"):]), &st); err != nil {
		t.Fatalf("status -o json: exit %d: %v\n%s", code, err, out)
	}
	s, _ := st.Get("api")
	if s.Phase != reconciler.PhaseFailed || !strings.Contains(s.Reason+" "+s.Message, "program ./bin/nope not found") {
		t.Errorf("status of api: %s / %q / %q; want Failed saying the program was not found", s.Phase, s.Reason, s.Message)
	}
}

func itoa(n int) string { return jsonNumber(n) }

func jsonNumber(n int) string { b, _ := json.Marshal(n); return string(b) }
