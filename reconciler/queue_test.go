package reconciler

import (
	"context"
	"errors"
	"slices"
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

func startWorkers(t *testing.T, q *queue, n int, fn reconcileFunc) {
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

// drain takes every name waiting now, in order, holding none of them.
func drain(q *queue) []string {
	var got []string
	for q.Len() > 0 {
		n, _ := q.Get()
		q.Done(n)
		got = append(got, n)
	}
	return got
}

func TestQueueFirstAddedFirstOut(t *testing.T) {
	q := newQueue(nil)
	for _, n := range []string{"c", "a", "b", "a", "c"} {
		q.Add(n)
	}
	if got := drain(q); !slices.Equal(got, []string{"c", "a", "b"}) {
		t.Errorf("handed out %v, want [c a b]", got)
	}
}

// TestQueueAddFirst: names added by AddFirst go before those added by Add,
// each line first added first out; a name already waiting keeps its place;
// a held name marked by AddFirst goes first at its Done.
func TestQueueAddFirst(t *testing.T) {
	q := newQueue(nil)
	q.Add("a")
	q.Add("b")
	q.AddFirst("x")
	q.AddFirst("y")
	q.AddFirst("a")
	q.AddFirst("x")
	if got := drain(q); !slices.Equal(got, []string{"x", "y", "a", "b"}) {
		t.Errorf("handed out %v, want [x y a b]", got)
	}

	q.Add("c")
	n, _ := q.Get()
	q.Add("a")
	q.AddFirst("c")
	if l := q.Len(); l != 1 {
		t.Errorf("Len while c is held and dirty = %d, want 1", l)
	}
	q.Done(n)
	if got := drain(q); !slices.Equal(got, []string{"c", "a"}) {
		t.Errorf("after Done handed out %v, want [c a]", got)
	}

	q.Add("d")
	n, _ = q.Get()
	q.Add("a")
	q.Add("d")
	q.Done(n)
	if got := drain(q); !slices.Equal(got, []string{"a", "d"}) {
		t.Errorf("a held name marked by Add: handed out %v, want [a d]", got)
	}
}

// TestQueueHeldNameNotCounted: Len counts what waits, not a name a worker
// holds nor one marked dirty while held; Done hands the dirty one out.
func TestQueueHeldNameNotCounted(t *testing.T) {
	q := newQueue(nil)
	q.Add("api")
	n, _ := q.Get()
	q.Add("api")
	if l := q.Len(); l != 0 {
		t.Errorf("Len while api is held and dirty = %d, want 0", l)
	}
	q.Done(n)
	if got := drain(q); !slices.Equal(got, []string{"api"}) {
		t.Errorf("after Done handed out %v, want [api]", got)
	}
	q.Done("api") // a Done with nothing held changes nothing
	if l := q.Len(); l != 0 {
		t.Errorf("Len after a stray Done = %d, want 0", l)
	}
}

func TestErrorBackoff(t *testing.T) {
	ms := time.Millisecond
	for n, want := range map[int]time.Duration{
		0: 50 * ms, 1: 100 * ms, 2: 200 * ms, 5: 1600 * ms, 9: 25600 * ms,
		10: 30 * time.Second, 11: 30 * time.Second, 64: 30 * time.Second, 1000: 30 * time.Second,
	} {
		if got := errorBackoff(n); got != want {
			t.Errorf("errorBackoff(%d) = %v, want %v", n, got, want)
		}
	}
}

// stepUntil steps clk by d and waits until the delay goroutine has added
// sentinel, due at that instant: whether it looks at the clock before or
// after the step, every name due by then is added in the same pass, under
// the same lock, so what drain finds is complete.
func stepUntil(t *testing.T, q *queue, clk *clocktesting.FakeClock, d time.Duration) []string {
	t.Helper()
	q.AddAfter("sentinel", d)
	clk.Step(d)
	waitFor(t, "sentinel", func() bool { return q.Len() > 0 })
	got := slices.DeleteFunc(drain(q), func(n string) bool { return n == "sentinel" })
	return got
}

// TestQueueRateLimitedDoublesAndForgets: each AddRateLimited of a name
// waits twice as long on the injected clock as the one before; Forget
// starts it over at 50 ms; another name has its own count.
func TestQueueRateLimitedDoublesAndForgets(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0))
	q := newQueue(clk)
	t.Cleanup(q.ShutDown)
	for i, d := range []time.Duration{50, 100, 200} {
		d *= time.Millisecond
		q.AddRateLimited("api")
		if got := stepUntil(t, q, clk, d-time.Millisecond); len(got) != 0 {
			t.Fatalf("retry %d: %v out 1 ms before its %v backoff", i+1, got, d)
		}
		if got := stepUntil(t, q, clk, time.Millisecond); !slices.Equal(got, []string{"api"}) {
			t.Fatalf("retry %d: %v out at its %v backoff, want [api]", i+1, got, d)
		}
		if n := q.NumRequeues("api"); n != i+1 {
			t.Fatalf("NumRequeues(api) = %d, want %d", n, i+1)
		}
	}
	q.AddRateLimited("db")
	if got := stepUntil(t, q, clk, 50*time.Millisecond); !slices.Equal(got, []string{"db"}) {
		t.Errorf("db's first retry: %v out at 50 ms, want [db] (its own count)", got)
	}
	q.Forget("api")
	if n := q.NumRequeues("api"); n != 0 {
		t.Errorf("NumRequeues(api) after Forget = %d", n)
	}
	q.AddRateLimited("api")
	if got := stepUntil(t, q, clk, 50*time.Millisecond); !slices.Equal(got, []string{"api"}) {
		t.Errorf("after Forget: %v out at 50 ms, want [api]", got)
	}
}

// TestQueueAddAfterEarliestWins: of two delays of one name the earlier
// adds it, and the later one is gone with it (the name runs once).
func TestQueueAddAfterEarliestWins(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0))
	q := newQueue(clk)
	t.Cleanup(q.ShutDown)
	q.AddAfter("late-first", 10*time.Second)
	q.AddAfter("late-first", time.Second)
	q.AddAfter("early-first", time.Second)
	q.AddAfter("early-first", 10*time.Second)
	q.AddAfter("now", 0)
	if got := drain(q); !slices.Equal(got, []string{"now"}) {
		t.Errorf("AddAfter 0 handed out %v at once, want [now]", got)
	}
	got := stepUntil(t, q, clk, time.Second)
	slices.Sort(got)
	if !slices.Equal(got, []string{"early-first", "late-first"}) {
		t.Errorf("at 1 s: %v, want both names", got)
	}
	if got := stepUntil(t, q, clk, 10*time.Second); len(got) != 0 {
		t.Errorf("at 11 s: %v out again, want none", got)
	}
}

// TestQueueShutDown: a blocked Get returns; what was queued is still handed
// out, then shutdown is reported; Add and AddAfter do nothing; pending
// delays are dropped with their timer.
func TestQueueShutDown(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0))
	q := newQueue(clk)
	got := make(chan bool)
	go func() {
		_, shutdown := q.Get()
		got <- shutdown
	}()
	q.AddAfter("delayed", time.Second)
	waitFor(t, "the delay timer", clk.HasWaiters)
	q.ShutDown()
	select {
	case shutdown := <-got:
		if !shutdown {
			t.Errorf("a Get blocked at ShutDown got a name")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a Get blocked at ShutDown did not return")
	}
	waitFor(t, "the delay timer to be stopped", func() bool { return !clk.HasWaiters() })
	clk.Step(time.Hour)
	q.Add("late")
	q.AddAfter("later", time.Second)
	if n, shutdown := q.Get(); !shutdown || n != "" {
		t.Errorf("Get after ShutDown = %q, %v; want shutdown", n, shutdown)
	}
	if !q.ShuttingDown() {
		t.Error("ShuttingDown() = false")
	}

	q = newQueue(nil)
	q.Add("a")
	q.Add("b")
	q.ShutDown()
	q.ShutDown() // twice is harmless
	if got := drain(q); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("after ShutDown handed out %v, want the queued [a b]", got)
	}
	if _, shutdown := q.Get(); !shutdown {
		t.Error("empty and shut down, Get did not report shutdown")
	}
}
