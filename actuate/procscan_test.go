package actuate

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/procfleet/procfleet/observe"
)

// TestProcScannerFreshAndShared drives the coalescing with a scan function
// the test controls (the kernel cannot be made to pause a /proc scan on
// demand): a caller that arrives while a scan runs gets the next scan, never
// the one in progress; the callers waiting when a scan starts share it, and
// it reads tokens since the earliest start time they asked for.
func TestProcScannerFreshAndShared(t *testing.T) {
	var scans atomic.Int32
	release := make(chan struct{})
	type start struct {
		n     int32
		since uint64
	}
	started := make(chan start, 16)
	s := &procScanner{scan: func(since uint64) ([]observe.ProcEntry, error) {
		n := scans.Add(1)
		started <- start{n, since}
		<-release
		return []observe.ProcEntry{{PID: int(n)}}, nil
	}}
	type result struct {
		pid int
		err error
	}
	call := func(since uint64) chan result {
		c := make(chan result, 1)
		go func() {
			es, err := s.processes(since)
			pid := 0
			if len(es) == 1 {
				pid = es[0].PID
			}
			c <- result{pid, err}
		}()
		return c
	}
	first := call(500)
	if st := <-started; st.n != 1 || st.since != 500 {
		t.Fatalf("first scan is %+v, want number 1 since 500", st)
	}
	// Scan 1 is running: these callers asked after it started.
	late := []chan result{call(300), call(100), call(900)}
	waitFor(t, "3 callers waiting behind scan 1", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.waiting == 3
	})
	release <- struct{}{}
	if r := <-first; r.err != nil || r.pid != 1 {
		t.Fatalf("first caller got %+v, want scan 1", r)
	}
	if st := <-started; st.n != 2 || st.since != 100 {
		t.Fatalf("second scan is %+v, want number 2 since 100 (the earliest asked)", st)
	}
	release <- struct{}{}
	for i, c := range late {
		if r := <-c; r.err != nil || r.pid != 2 {
			t.Errorf("late caller %d got %+v, want scan 2 (started after it asked)", i, r)
		}
	}
	if n := scans.Load(); n != 2 {
		t.Errorf("%d scans for 4 callers, want 2 (the 3 that waited share one)", n)
	}
}

// TestProcScannerError: a scan's error reaches every caller it serves.
func TestProcScannerError(t *testing.T) {
	boom := errors.New("boom")
	s := &procScanner{scan: func(uint64) ([]observe.ProcEntry, error) { return nil, boom }}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			if _, err := s.processes(0); !errors.Is(err, boom) {
				t.Errorf("processes error = %v, want boom", err)
			}
		})
	}
	wg.Wait()
}

// waitFor polls cond until it holds, failing after 30 s: for states no
// event announces (another goroutine parked on a condition variable).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		<-tick.C
	}
}
