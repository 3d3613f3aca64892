package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/procfleet/procfleet/observe"
	"github.com/procfleet/procfleet/reconciler"
)

// untrustJob has apply start the port-less job, makes its record
// group-writable and has a second apply move it aside (exit 1): an
// UntrustedRecord quarantine on disk. It returns the job's process, pinned.
func untrustJob(t *testing.T, f *e2eFleet) *observe.Handle {
	t.Helper()
	writeJob(t, f)
	if code, out := f.cmd("apply", "--wait", "-f", f.file); code != 0 {
		t.Fatalf("apply: exit %d\n%s", code, out)
	}
	first := pinFor(t, waitStarts(t, f, "job", 1)[0])
	if err := os.Chmod(filepath.Join(f.state, "servers", "job.json"), 0o664); err != nil {
		t.Fatal(err)
	}
	if code, out := f.cmd("apply", "-f", f.file); code == 0 {
		t.Fatalf("apply over an untrusted record: exit 0, want 1\n%s", out)
	}
	return first
}

// writeJob saves a fleet of one port-less test server, "job".
func writeJob(t *testing.T, f *e2eFleet) {
	t.Helper()
	doc := fmt.Sprintf("apiVersion: procfleet.dev/v1alpha1\nkind: Server\nmetadata: {name: job}\nspec:\n  command: [%q]\n  args: [\"-stamp\", %q]\n  terminationGracePeriodSeconds: 5\n",
		f.server, f.stamp("job"))
	if err := os.WriteFile(f.file, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
}

// waitStarts waits (bounded) until name has been started n times.
func waitStarts(t *testing.T, f *e2eFleet, name string, n int) []int {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if s := f.starts(name); len(s) >= n {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s started %d times, want %d", name, len(f.starts(name)), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestUntrustedQuarantineOnDisk is issue 13 item 2 through the CLI: a
// port-less server's record made group-writable is moved aside by the
// next apply; then neither another apply nor a new up starts a second
// instance beside the first (the quarantine is read from the state
// folder, not kept in one process's memory), and status shows it. Once
// the first process is gone, apply lifts it (the moved-aside record is
// kept as .resolved-<time>) and starts the server.
func TestUntrustedQuarantineOnDisk(t *testing.T) {
	f := newE2EFleet(t)
	first := untrustJob(t, f)
	code, out := f.cmd("apply", "-f", f.file)
	if len(f.starts("job")) != 1 {
		t.Fatalf("apply after the record was moved aside started a second instance (exit %d)\n%s", code, out)
	}
	if _, out := f.cmd("status", "-f", f.file); !strings.Contains(out, "UntrustedRecord") {
		t.Errorf("status does not show the quarantine:\n%s", out)
	}
	up, _ := f.up()
	f.waitStatus("job quarantined under up", func(st reconciler.Status) bool {
		s, ok := st.Get("job")
		return ok && s.Reason == "UntrustedRecord"
	})
	_ = up.Process.Signal(syscall.SIGTERM)
	_ = up.Wait()
	if len(f.starts("job")) != 1 || first.Exited() {
		t.Fatalf("up started %d instances; first exited: %v", len(f.starts("job")), first.Exited())
	}

	// The first process gone (by hand, as the quarantine says): lifted.
	_ = first.Signal(syscall.SIGKILL)
	waitGone(t, first)
	if code, out := f.cmd("apply", "--wait", "-f", f.file); code != 0 {
		t.Fatalf("apply once the first process is gone: exit %d\n%s", code, out)
	}
	waitStarts(t, f, "job", 2)
	resolved, _ := filepath.Glob(filepath.Join(f.state, "servers", "job.json.resolved-*"))
	if len(resolved) != 1 {
		t.Errorf("resolved records %v, want one", resolved)
	}
	second := pinFor(t, f.starts("job")[1])
	if code, out := f.cmd("down", "-f", f.file); code != 0 {
		t.Fatalf("down: exit %d\n%s", code, out)
	}
	waitGone(t, second)
}

// TestTamperedPGIDUntrusted is issue 13 item 3 through the CLI: a valid
// record whose pgid was edited to name a stranger's process group is not
// trusted (rule 7: procfleet's servers lead their own group): down moves
// it aside and signals nothing, the stranger's group is untouched, and the
// server is reported UntrustedRecord.
func TestTamperedPGIDUntrusted(t *testing.T) {
	f := newE2EFleet(t)
	writeJob(t, f)
	if code, out := f.cmd("apply", "--wait", "-f", f.file); code != 0 {
		t.Fatalf("apply: exit %d\n%s", code, out)
	}
	job := pinFor(t, waitStarts(t, f, "job", 1)[0])

	// The stranger leads its own group, with a member.
	signals := filepath.Join(f.dir, "stranger.signals")
	gcFile := filepath.Join(f.dir, "stranger.grandchild")
	ready := filepath.Join(f.dir, "stranger.ready")
	stranger := exec.Command(f.server, "-signals", signals, "-grandchild", gcFile, "-ready-file", ready)
	stranger.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := stranger.Start(); err != nil {
		t.Fatal(err)
	}
	sp := pinFor(t, stranger.Process.Pid)
	go func() { _ = stranger.Wait() }()
	waitFile(t, ready)
	var gc int
	if b, err := os.ReadFile(gcFile); err == nil {
		_, _ = fmt.Sscan(string(b), &gc)
	}
	gh := pinFor(t, gc)

	record := filepath.Join(f.state, "servers", "job.json")
	b, err := os.ReadFile(record)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	m["pgid"] = stranger.Process.Pid
	b, _ = json.Marshal(m)
	if err := os.WriteFile(record, b, 0o600); err != nil {
		t.Fatal(err)
	}
	code, out := f.cmd("down", "-f", f.file)
	if code == 0 || !strings.Contains(out, "UntrustedRecord") && !strings.Contains(out, "not trusted") {
		t.Errorf("down over a tampered pgid: exit %d, want 1 naming the untrusted record\n%s", code, out)
	}
	if sp.Exited() || gh.Exited() || job.Exited() {
		t.Errorf("a process was signalled on a tampered record's word: stranger exited %v, its member %v, job %v", sp.Exited(), gh.Exited(), job.Exited())
	}
	if s, _ := os.ReadFile(signals); len(s) > 0 {
		t.Errorf("the stranger's group received signals:\n%s", s)
	}
	if aside, _ := filepath.Glob(record + ".corrupt-*"); len(aside) != 1 {
		t.Errorf("moved-aside records %v, want one", aside)
	}
}

func waitFile(t *testing.T, path string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if b, err := os.ReadFile(path); err == nil && len(b) > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not written", path)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitGone waits (bounded) until the pinned process has exited.
func waitGone(t *testing.T, h *observe.Handle) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := h.Wait(ctx); err != nil {
		t.Fatalf("pid %d still running: %v", h.PID(), err)
	}
}
