package actuate

import (
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestGroupScannerFreshAndShared drives the coalescing with a scan function
// the test controls (the kernel cannot be made to pause a /proc scan on
// demand): a caller that arrives while a scan runs gets the next scan, never
// the one in progress; the callers waiting when a scan starts share it.
func TestGroupScannerFreshAndShared(t *testing.T) {
	var scans atomic.Int32
	release := make(chan struct{})
	started := make(chan int32, 16)
	g := &groupScanner{scan: func() (map[int][]int, error) {
		n := scans.Add(1)
		started <- n
		<-release
		return map[int][]int{7: {int(n)}}, nil
	}}
	type result struct {
		pids []int
		err  error
	}
	call := func() chan result {
		c := make(chan result, 1)
		go func() {
			pids, err := g.members(7)
			c <- result{pids, err}
		}()
		return c
	}
	first := call()
	if n := <-started; n != 1 {
		t.Fatalf("first scan is number %d", n)
	}
	// Scan 1 is running: these callers asked after it started.
	late := []chan result{call(), call(), call()}
	waitFor(t, "3 callers waiting behind scan 1", func() bool {
		g.mu.Lock()
		defer g.mu.Unlock()
		return g.waiting == 3
	})
	release <- struct{}{}
	if r := <-first; r.err != nil || !slices.Equal(r.pids, []int{1}) {
		t.Fatalf("first caller got %v, %v, want scan 1", r.pids, r.err)
	}
	if n := <-started; n != 2 {
		t.Fatalf("second scan is number %d", n)
	}
	release <- struct{}{}
	for i, c := range late {
		if r := <-c; r.err != nil || !slices.Equal(r.pids, []int{2}) {
			t.Errorf("late caller %d got %v, %v, want scan 2 (started after it asked)", i, r.pids, r.err)
		}
	}
	if n := scans.Load(); n != 2 {
		t.Errorf("%d scans for 4 callers, want 2 (the 3 that waited share one)", n)
	}
}

// TestGroupScannerError: a scan's error reaches every caller it serves.
func TestGroupScannerError(t *testing.T) {
	boom := errors.New("boom")
	g := &groupScanner{scan: func() (map[int][]int, error) { return nil, boom }}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			if _, err := g.members(1); !errors.Is(err, boom) {
				t.Errorf("members error = %v, want boom", err)
			}
		})
	}
	wg.Wait()
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}
