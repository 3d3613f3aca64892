package actuate

import (
	"net"
	"slices"
	"sync"
	"testing"
	"time"
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
