package actuate

import (
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/procfleet/procfleet/observe"
)

// Stops that ask while a round runs are answered together by the next
// round, which starts after they asked; the query is the kernel's,
// replaced here only to hold the first round until the others have asked
// (the scheduler cannot be made to interleave them on demand).
func TestListenRoundsGatherWaiters(t *testing.T) {
	var mu sync.Mutex
	var calls [][]int
	started, release := make(chan struct{}), make(chan struct{})
	l := &listenRounds{query: func(ports []int) (map[int]bool, error) {
		mu.Lock()
		calls = append(calls, slices.Clone(ports))
		first := len(calls) == 1
		mu.Unlock()
		if first {
			close(started)
			<-release
		}
		busy := map[int]bool{}
		for _, p := range ports {
			busy[p] = p%2 == 0 // even ports listen
		}
		return busy, nil
	}}
	type answer struct {
		port int
		busy bool
		err  error
	}
	answers := make(chan answer, 10)
	ask := func(p int) {
		b, err := l.listening(p)
		answers <- answer{p, b, err}
	}
	go ask(100)
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("the first round did not start within 10 s")
	}
	later := []int{101, 102, 103, 104, 105, 106}
	for _, p := range later {
		go ask(p)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		l.mu.Lock()
		n := 0
		if l.pending != nil {
			n = len(l.pending.ports)
		}
		l.mu.Unlock()
		if n == len(later) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d callers joined the next round within 10 s", n, len(later))
		}
		time.Sleep(time.Millisecond) // polling a condition, with a deadline
	}
	close(release)
	for range 1 + len(later) {
		select {
		case a := <-answers:
			if a.err != nil || a.busy != (a.port%2 == 0) {
				t.Errorf("port %d: busy %v, %v; want %v", a.port, a.busy, a.err, a.port%2 == 0)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("a caller was not answered within 10 s")
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(calls) != 2 {
		t.Fatalf("%d queries (%v), want 2: the first caller's, then one for the six that asked meanwhile", len(calls), calls)
	}
	got := slices.Sorted(slices.Values(calls[1]))
	if !slices.Equal(got, later) {
		t.Errorf("second round asked %v, want %v", got, later)
	}
}

// With the kernel's query: a port with a listener is busy, and free once
// the listener has closed.
func TestListenRoundsKernel(t *testing.T) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	var l listenRounds
	if busy, err := l.listening(port); err != nil || !busy {
		t.Fatalf("port %d with a listener: busy %v, %v", port, busy, err)
	}
	ln.Close()
	if busy, err := l.listening(port); err != nil || busy {
		t.Fatalf("port %d after its listener closed: busy %v, %v", port, busy, err)
	}
}

// A round starts no sooner than roundBudget times the last query's
// duration after it ended (capped at maxRoundGap), so back-to-back stops
// share a round rather than each paying a query.
func TestListenRoundsSpaced(t *testing.T) {
	var mu sync.Mutex
	var starts, ends []time.Time
	l := &listenRounds{query: func(ports []int) (map[int]bool, error) {
		mu.Lock()
		starts = append(starts, time.Now())
		mu.Unlock()
		// Work the kernel query would do, here a measurable span.
		for t0 := time.Now(); time.Since(t0) < 200*time.Microsecond; {
		}
		mu.Lock()
		ends = append(ends, time.Now())
		mu.Unlock()
		return map[int]bool{}, nil
	}}
	for p := 100; p < 103; p++ {
		if busy, err := l.listening(p); err != nil || busy {
			t.Fatalf("port %d: busy %v, %v", p, busy, err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for i := 1; i < len(starts); i++ {
		took := ends[i-1].Sub(starts[i-1])
		want := min(roundBudget*took, maxRoundGap)
		if gap := starts[i].Sub(ends[i-1]); gap < want {
			t.Errorf("round %d began %v after the last ended, which took %v: want at least %v", i, gap, took, want)
		}
	}
}

// Where the listener table can be read, portFree asks it alone: a listener
// is found busy without a connection made to it (one would wait in its
// accept queue), and the port is free once it has closed.
func TestPortFreeConnectsNot(t *testing.T) {
	if _, err := observe.ListeningOn([]int{1}, nil); err != nil {
		t.Skipf("no listener table here: %v", err)
	}
	ln, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	ctx := testCtx(t)
	if portFree(ctx, port) {
		t.Fatalf("port %d with a listener found free", port)
	}
	// A loopback connect completes in the kernel before connect returns:
	// had portFree made one, it would be queued now.
	if err := ln.SetDeadline(time.Now()); err != nil {
		t.Fatal(err)
	}
	if c, err := ln.Accept(); err == nil {
		c.Close()
		t.Fatal("portFree connected to the listener")
	}
	ln.Close()
	if !portFree(ctx, port) {
		t.Fatalf("port %d found busy after its listener closed", port)
	}
}
