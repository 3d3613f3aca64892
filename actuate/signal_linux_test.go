package actuate

import (
	"path/filepath"
	"strings"
	"testing"
)

// On kernels before 6.9 the group is signalled with killpg while the pinned
// leader lives; this kernel has PIDFD_SIGNAL_PROCESS_GROUP, so the test turns
// it off to run that path.
func TestStopGroupByKillpg(t *testing.T) {
	sessionMode(t)
	pidfdGroupSignal = false
	t.Cleanup(func() { pidfdGroupSignal = true })
	a, ev := newActuator(t)
	ctx := testCtx(t)
	signals := filepath.Join(t.TempDir(), "signals")
	r, err := a.Start(ctx, withReadyFile(t, serverReq("api", 0, "-signals", signals)))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Handle.Close()
	killPinned(t, r.Record.PID)
	if err := a.Stop(ctx, r.Record, StopOptions{}); err != nil {
		t.Fatal(err)
	}
	assertGone(t, r.Handle)
	if got := readSignals(t, signals); len(got) != 1 || got[0] != itoa(r.Record.PID)+" SIGTERM" {
		t.Errorf("signals %v, want one SIGTERM", got)
	}
	sent := ev.with(EventSignal)
	if len(sent) != 1 || !strings.Contains(sent[0], "by killpg while the pinned leader is alive") {
		t.Errorf("signal events %v, want one by killpg", sent)
	}
}
