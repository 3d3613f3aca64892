//go:build linux || darwin

package observe

import (
	"testing"
	"time"
)

// TestExitedAll: over more handles than one poll asks about, ExitedAll
// finds exactly the processes that have exited (reaped or still zombies),
// says false for a closed handle, as Exited does, and remembers what it
// found for Exited.
func TestExitedAll(t *testing.T) {
	const n = 2*exitPollBatchForTest + 5
	hs := make([]*Handle, n)
	want := make([]bool, n)
	ctx := testCtx(t, 30*time.Second)
	for i := range n {
		cmd := startSleep(t)
		h, err := Pin(cmd.Process.Pid)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = h.Close() })
		hs[i] = h
		if i%3 != 1 {
			continue
		}
		// A second pin waits for the exit, so hs[i] learns of it only
		// through ExitedAll. Every sixth is reaped, the others are left
		// zombies until Cleanup.
		w, err := Pin(cmd.Process.Pid)
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		if err := w.Wait(ctx); err != nil {
			t.Fatalf("wait for the exit of pid %d: %v", cmd.Process.Pid, err)
		}
		_ = w.Close()
		if i%6 == 1 {
			_ = cmd.Wait()
		}
		want[i] = true
	}
	closed := 3 // alive, closed: false
	if err := hs[closed].Close(); err != nil {
		t.Fatal(err)
	}
	got := make([]bool, n)
	ExitedAll(hs, got)
	for i := range n {
		if got[i] != want[i] {
			t.Errorf("handle %d (pid %d): ExitedAll says %v, want %v", i, hs[i].PID(), got[i], want[i])
		}
		if i != closed && hs[i].Exited() != want[i] {
			t.Errorf("handle %d (pid %d): Exited() = %v after ExitedAll, want %v", i, hs[i].PID(), !want[i], want[i])
		}
	}
}
