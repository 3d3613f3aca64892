package actuate

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"

	"github.com/procfleet/procfleet/observe"
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

// siblingCgroup makes a cgroup named name beside r's server cgroup,
// removed at the end of the test, and returns both folders.
func siblingCgroup(t *testing.T, r *Running, name string) (dir, sibling string) {
	t.Helper()
	dir, err := cgroupDir(r.Record.Cgroup)
	if err != nil {
		t.Fatal(err)
	}
	sibling = filepath.Join(filepath.Dir(dir), name)
	if err := os.Mkdir(sibling, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rmdir(sibling) })
	return dir, sibling
}

// A server whose leader lives but whose cgroup is gone (moved out by hand,
// the cgroup removed) is stopped through its session: the stop's first
// listing of the cgroup finds it missing.
func TestStopCgroupGone(t *testing.T) {
	a, r := startInCgroup(t)
	ctx := testCtx(t)
	dir, moved := siblingCgroup(t, r, "moved")
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

// The sweep at Lock leaves the cgroup of a server that has a record (its
// stop or start deals with it) and removes the empty one of a server that
// has none.
func TestSweepCgroupsLeavesRecorded(t *testing.T) {
	a, r := startInCgroup(t)
	ctx := testCtx(t)
	dir, other := siblingCgroup(t, r, "other")
	h, err := observe.Pin(r.Record.PID)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if err := h.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := observe.WaitCgroupEmpty(ctx, dir); err != nil {
		t.Fatal(err)
	}
	a.Dir.sweepCgroups()
	if _, err := os.Stat(other); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("empty cgroup of a server without a record after the sweep: %v, want it removed", err)
	}
	if _, err := os.Stat(dir); err != nil {
		t.Errorf("cgroup of a recorded server after the sweep: %v, want it left", err)
	}
	if err := a.Stop(ctx, r.Record, StopOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("cgroup after the stop of its exited server: %v, want it removed", err)
	}
}
