package observe

import (
	"net"
	"os"
	"slices"
	"sync"
	"testing"
)

func ownerScanCount() uint64 {
	ownerScans.mu.Lock()
	defer ownerScans.mu.Unlock()
	return ownerScans.seq
}

// TestListenersShareOneScan: twenty callers asking at once who holds
// twenty ports cost one scan of every process's descriptors, and asking
// again costs none (each holder is checked on its own); a port whose
// listener changed is scanned for anew and names its new holder.
func TestListenersShareOneScan(t *testing.T) {
	const n = 20
	ports := make([]int, n)
	lns := make([]net.Listener, n)
	for i := range lns {
		l, err := net.Listen("tcp4", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		lns[i], ports[i] = l, l.Addr().(*net.TCPAddr).Port
	}
	ask := func() {
		t.Helper()
		var wg sync.WaitGroup
		for _, port := range ports {
			wg.Go(func() {
				ls, err := Listeners(port)
				if err != nil {
					t.Errorf("Listeners(%d): %v", port, err)
					return
				}
				if len(ls) != 1 || !slices.Equal(ls[0].PIDs, []int{os.Getpid()}) {
					t.Errorf("Listeners(%d) = %+v, want held by the test (pid %d)", port, ls, os.Getpid())
				}
			})
		}
		wg.Wait()
	}
	before := ownerScanCount()
	ask()
	if got := ownerScanCount() - before; got != 1 {
		t.Errorf("%d concurrent callers made %d scans, want 1", n, got)
	}
	before = ownerScanCount()
	ask()
	if got := ownerScanCount() - before; got != 0 {
		t.Errorf("asking again made %d scans, want 0 (the holders checked one by one)", got)
	}

	// Port 0's listener is closed and a child listens there instead.
	port := ports[0]
	if err := lns[0].Close(); err != nil {
		t.Fatal(err)
	}
	cmd := startListening(t, port)
	before = ownerScanCount()
	ls, err := Listeners(port)
	if err != nil {
		t.Fatal(err)
	}
	if len(ls) != 1 || !slices.Equal(ls[0].PIDs, []int{cmd.Process.Pid}) {
		t.Errorf("Listeners(%d) after the holder changed = %+v, want the test server %d", port, ls, cmd.Process.Pid)
	}
	if got := ownerScanCount() - before; got != 1 {
		t.Errorf("a new listener made %d scans, want 1", got)
	}
}
