package reconciler

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	clocktesting "k8s.io/utils/clock/testing"
)

// counter records how often each key ran and the most keys (and runs of one
// key) seen at the same time.
type counter struct {
	mu        sync.Mutex
	runs      map[string]int
	active    map[string]int
	maxActive int
	maxPerKey int
}

func newCounter() *counter { return &counter{runs: map[string]int{}, active: map[string]int{}} }

func (c *counter) enter(k string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.runs[k]++
	c.active[k]++
	c.maxPerKey = max(c.maxPerKey, c.active[k])
	n := 0
	for _, v := range c.active {
		n += v
	}
	c.maxActive = max(c.maxActive, n)
}

func (c *counter) leave(k string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.active[k]--
}

func (c *counter) get(k string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.runs[k]
}

func startWorkers(t *testing.T, q queue, n int, fn reconcileFunc) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		runWorkers(context.Background(), q, n, testr.New(t), fn)
	}()
	t.Cleanup(func() {
		q.ShutDown()
		<-done
	})
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

func TestQueueDedupsBursts(t *testing.T) {
	q := newQueue(nil)
	c := newCounter()
	for range 50 {
		q.Add("api")
	}
	q.Add("db")
	startWorkers(t, q, 4, func(ctx context.Context, k string) (Result, error) {
		c.enter(k)
		defer c.leave(k)
		return Result{}, nil
	})
	waitFor(t, "db and api to run", func() bool { return c.get("api") >= 1 && c.get("db") >= 1 })
	// A sentinel added after the burst proves the queue drained.
	q.Add("sentinel")
	waitFor(t, "sentinel", func() bool { return c.get("sentinel") == 1 })
	if got := c.get("api"); got != 1 {
		t.Errorf("50 adds before processing ran api %d times, want 1", got)
	}
}

func TestQueueKeyBeingProcessedRunsOnceMoreNeverTwiceAtOnce(t *testing.T) {
	q := newQueue(nil)
	c := newCounter()
	entered := make(chan struct{})
	release := make(chan struct{})
	var first atomic.Bool
	startWorkers(t, q, 4, func(ctx context.Context, k string) (Result, error) {
		c.enter(k)
		defer c.leave(k)
		if first.CompareAndSwap(false, true) {
			close(entered)
			<-release
		}
		return Result{}, nil
	})
	q.Add("api")
	<-entered
	// While api is processed, ten more adds only mark it dirty.
	for range 10 {
		q.Add("api")
	}
	close(release)
	waitFor(t, "the second run", func() bool { return c.get("api") == 2 })
	q.Add("sentinel")
	waitFor(t, "sentinel", func() bool { return c.get("sentinel") == 1 })
	if got := c.get("api"); got != 2 {
		t.Errorf("api ran %d times, want 2 (once, then once more for the adds while running)", got)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.maxPerKey != 1 {
		t.Errorf("one key ran %d times at once, want 1", c.maxPerKey)
	}
}

func TestQueueBoundedWorkers(t *testing.T) {
	q := newQueue(nil)
	c := newCounter()
	const workers = 3
	gate := make(chan struct{})
	var inFlight atomic.Int32
	startWorkers(t, q, workers, func(ctx context.Context, k string) (Result, error) {
		c.enter(k)
		defer c.leave(k)
		if inFlight.Add(1) == workers {
			close(gate) // all workers busy at once: the pool is really parallel
		}
		<-gate
		return Result{}, nil
	})
	for _, k := range []string{"a", "b", "c", "d", "e", "f", "g", "h"} {
		q.Add(k)
	}
	waitFor(t, "all keys", func() bool {
		for _, k := range []string{"a", "b", "c", "d", "e", "f", "g", "h"} {
			if c.get(k) != 1 {
				return false
			}
		}
		return true
	})
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.maxActive != workers {
		t.Errorf("at most %d keys ran at once, want exactly %d", c.maxActive, workers)
	}
}

func TestQueueRequeueAfterUsesTheClock(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0))
	q := newQueue(clk)
	c := newCounter()
	startWorkers(t, q, 2, func(ctx context.Context, k string) (Result, error) {
		c.enter(k)
		defer c.leave(k)
		if c.get(k) == 1 {
			return Result{RequeueAfter: 4 * time.Second}, nil
		}
		return Result{}, nil
	})
	q.Add("api")
	waitFor(t, "first run", func() bool { return c.get("api") == 1 })
	// The delaying queue arms a timer on the fake clock; step just short of
	// the delay and prove nothing ran by running a sentinel after it.
	waitFor(t, "the requeue timer", func() bool { return clk.HasWaiters() })
	clk.Step(4*time.Second - time.Millisecond)
	q.Add("sentinel")
	waitFor(t, "sentinel", func() bool { return c.get("sentinel") == 1 })
	if got := c.get("api"); got != 1 {
		t.Fatalf("api ran %d times before its delay expired, want 1", got)
	}
	clk.Step(time.Millisecond)
	waitFor(t, "the requeued run", func() bool { return c.get("api") == 2 })
}

func TestQueueErrorsRetryPanicsRecoverTerminalDoesNot(t *testing.T) {
	q := newQueue(nil)
	c := newCounter()
	startWorkers(t, q, 2, func(ctx context.Context, k string) (Result, error) {
		c.enter(k)
		defer c.leave(k)
		n := c.get(k)
		switch {
		case k == "flaky" && n < 3:
			return Result{}, errors.New("transient")
		case k == "panicky" && n == 1:
			panic("boom")
		case k == "bad":
			return Result{}, &TerminalError{Err: errors.New("invalid spec")}
		}
		return Result{}, nil
	})
	q.Add("flaky")
	q.Add("panicky")
	q.Add("bad")
	waitFor(t, "flaky to succeed on its third run", func() bool { return c.get("flaky") == 3 })
	waitFor(t, "panicky to run again after its panic", func() bool { return c.get("panicky") == 2 })
	q.Add("sentinel")
	waitFor(t, "sentinel", func() bool { return c.get("sentinel") == 1 })
	if got := c.get("bad"); got != 1 {
		t.Errorf("terminal error ran %d times, want 1", got)
	}
	if got := q.NumRequeues("flaky"); got != 0 {
		t.Errorf("after success NumRequeues(flaky) = %d, want 0 (forgotten)", got)
	}
}
