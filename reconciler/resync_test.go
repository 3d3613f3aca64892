package reconciler

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/procfleet/procfleet/internal/testserver"
	"github.com/procfleet/procfleet/observe"
)

// lostExits is an exit watcher that never reports an exit: the event lost,
// which the kernel cannot be made to do on demand. Only the resync can
// then find an exit.
type lostExits struct{}

func (lostExits) Watch(*observe.Handle, func()) {}
func (lostExits) Unwatch(*observe.Handle)       {}

// waitOnChanges waits, woken by the reconciler's change notifications and
// for at most bound, until cond holds.
func waitOnChanges(tb testing.TB, r *Reconciler, bound time.Duration, what string, cond func() bool) {
	tb.Helper()
	deadline := time.NewTimer(bound)
	defer deadline.Stop()
	for {
		ch := r.Changes()
		if cond() {
			return
		}
		select {
		case <-ch:
		case <-deadline.C:
			tb.Fatalf("timed out waiting for %s", what)
		}
	}
}

// counted returns a condition that holds once *count (read under r.mu)
// has grown by n from now.
func counted(r *Reconciler, count *uint64, n uint64) func() bool {
	r.mu.Lock()
	target := *count + n
	r.mu.Unlock()
	return func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		return *count >= target
	}
}

// waitResyncs waits until n more periodic resyncs have run.
func waitResyncs(t *testing.T, r *Reconciler, n uint64) {
	t.Helper()
	waitOnChanges(t, r, 30*time.Second, fmt.Sprintf("%d resyncs", n), counted(r, &r.resyncs, n))
}

// lastPasses returns the number of the last pass of each named server.
func lastPasses(r *Reconciler, names ...string) map[string]uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]uint64{}
	for _, n := range names {
		if s := r.servers[n]; s != nil {
			out[n] = s.lastPass
		}
	}
	return out
}

// waitAtRest waits until every named server is at rest.
func waitAtRest(t *testing.T, r *Reconciler, names ...string) {
	t.Helper()
	waitOnChanges(t, r, 30*time.Second, fmt.Sprintf("%v at rest", names), func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		for _, n := range names {
			if s := r.servers[n]; s == nil || s.rest == nil {
				return false
			}
		}
		return true
	})
}

// TestResyncLeavesRestingServersAlone: a periodic resync passes no server
// at rest (Running, Ready, nothing planned), yet still finds an exit no
// event reported (the exit watcher here loses every event) and restarts
// that server; the other server is still not passed.
func TestResyncLeavesRestingServersAlone(t *testing.T) {
	f := newTestFleet(t)
	ports := testserver.FreePorts(t, 2)
	f.add(&testSpec{name: "a", port: ports[0]})
	f.add(&testSpec{name: "b", port: ports[1]})
	f.write()
	rr := f.run(t, func(c *Config) {
		c.ResyncPeriod = 20 * time.Millisecond
		c.Exits = lostExits{}
	})
	st := waitStatus(t, rr.r, "all ready", allReady("a", "b"))
	a := pidOf(st, "a")

	// Once both are at rest, ten resyncs pass neither. (A pass queued by
	// the resync that ran just before the server came to rest may still
	// be under way: at most one more each.)
	waitAtRest(t, rr.r, "a", "b")
	last, moved := lastPasses(rr.r, "a", "b"), map[string]int{}
	for range 10 {
		waitResyncs(t, rr.r, 1)
		now := lastPasses(rr.r, "a", "b")
		for n := range now {
			if now[n] != last[n] {
				moved[n]++
			}
		}
		last = now
	}
	for n, m := range moved {
		if m > 1 {
			t.Errorf("server %s at rest was passed between %d of 10 resyncs", n, m)
		}
	}

	// An exit no event reports: the next resync finds it.
	if err := syscall.Kill(a, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, rr.r, "a restarted by a resync", func(st Status) bool {
		return allReady("a")(st) && pidOf(st, "a") != a
	})
	if got := lastPasses(rr.r, "b")["b"]; got != last["b"] {
		t.Errorf("b, at rest, was passed while a was restarted (last pass %d, was %d)", got, last["b"])
	}
}
