package actuate

import (
	"os"
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
