package actuate

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// removeEmptyCgroup removes a server's cgroup only when the kernel finds
// it empty: it refuses while the server runs in it, so that a stop may
// take a removal for proof that nothing is left.
func TestRemoveEmptyCgroupRefusesPopulated(t *testing.T) {
	a, r := startInCgroup(t)
	ctx := testCtx(t)
	dir, err := cgroupDir(r.Record.Cgroup)
	if err != nil {
		t.Fatal(err)
	}
	if removeEmptyCgroup(dir) {
		t.Fatalf("cgroup %s removed while pid %d runs in it", r.Record.Cgroup, r.Record.PID)
	}
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("cgroup %s after a refused removal: %v", r.Record.Cgroup, err)
	}
	if err := a.Stop(ctx, r.Record, StopOptions{}); err != nil {
		t.Fatal(err)
	}
	assertNothingLeft(t, r.Record)
}

// A server whose leader lives but whose cgroup is gone (moved out by hand,
// the cgroup removed) is stopped through its session: the stop's first
// listing of the cgroup finds it missing.
func TestStopCgroupGone(t *testing.T) {
	a, r := startInCgroup(t)
	ctx := testCtx(t)
	dir, err := cgroupDir(r.Record.Cgroup)
	if err != nil {
		t.Fatal(err)
	}
	moved := filepath.Join(filepath.Dir(dir), "moved")
	if err := os.Mkdir(moved, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rmdir(moved) })
	if err := os.WriteFile(filepath.Join(moved, "cgroup.procs"), []byte(strconv.Itoa(r.Record.PID)), 0); err != nil {
		t.Skipf("cannot move pid %d out of its cgroup: %v", r.Record.PID, err)
	}
	if err := rmdir(dir); err != nil {
		t.Fatal(err)
	}
	if err := a.Stop(ctx, r.Record, StopOptions{}); err != nil {
		t.Fatal(err)
	}
	assertNothingLeft(t, r.Record)
}
