package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/procfleet/procfleet/reconciler"
)

// TestFreshUpLiftsUntrustedQuarantine: an UntrustedRecord quarantine left
// on disk by apply, whose process has exited since, is lifted by a fresh
// up at its first look: the moved-aside record is kept as
// .resolved-<time>, the server's events file says QuarantineLifted (the
// event DESIGN.md names), and the server starts, once.
func TestFreshUpLiftsUntrustedQuarantine(t *testing.T) {
	f := newE2EFleet(t)
	first := untrustJob(t, f)
	record := filepath.Join(f.state, "servers", "job.json")
	if aside, _ := filepath.Glob(record + ".corrupt-*"); len(aside) != 1 {
		t.Fatalf("moved-aside records %v, want one", aside)
	}
	_ = first.Signal(syscall.SIGKILL)
	waitGone(t, first)

	up, _ := f.up()
	f.waitStatus("job started by the fresh up", func(st reconciler.Status) bool {
		s, ok := st.Get("job")
		return ok && s.Ready && s.PID != 0 && s.PID != first.PID()
	})
	second := pinFor(t, waitStarts(t, f, "job", 2)[1])
	events := filepath.Join(f.state, "logs", "job.events.jsonl")
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, _ := os.ReadFile(events)
		if strings.Count(string(b), `"QuarantineLifted"`) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the fresh up lifted the quarantine without one QuarantineLifted event in %s:\n%s", events, b)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if resolved, _ := filepath.Glob(record + ".resolved-*"); len(resolved) != 1 {
		t.Errorf("resolved records %v, want one", resolved)
	}
	if n := len(f.starts("job")); n != 2 {
		t.Errorf("job started %d times, want 2", n)
	}
	if err := up.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	_ = up.Wait()
	if code, out := f.cmd("down", "-f", f.file); code != 0 {
		t.Fatalf("down: exit %d\n%s", code, out)
	}
	waitGone(t, second)
}
