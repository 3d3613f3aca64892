package actuate

import (
	"context"
	"sync"
	"time"

	"github.com/procfleet/procfleet/observe"
)

// listenRounds answers "does anything listen on this port" for the stops
// of one process that wait on their ports at the same time, with one
// kernel query per round for all of them (observe.ListeningOn: one
// sock_diag dump per address family, each a walk of the kernel's whole
// listening hash, whatever the number of ports). A port is asked in a
// round that starts after it was asked (a round already running may have
// looked before the caller's process exited), so every answer is as fresh
// as a query of its own.
//
// A round starts no sooner than roundBudget times the last query's
// duration after that query ended (at most maxRoundGap): stops of a fleet
// end one by one, and rounds run back to back answered about one port
// each; spaced so, the queries take at most 1/roundBudget of the time and
// a round gathers the ports of the stops that ended meanwhile.
type listenRounds struct {
	mu      sync.Mutex
	pending *listenRound // gathering ports; its claimer runs it
	running *listenRound
	next    time.Time // no round starts before
	// query replaces listenersOn (tests).
	query func(ports []int) (map[int]bool, error)
}

type listenRound struct {
	ports   []int
	claimed bool // a caller will run it
	done    chan struct{}
	busy    map[int]bool
	err     error
}

// roundBudget and maxRoundGap space the rounds (see listenRounds). A query
// costs ~0.1 ms on a quiet machine: rounds 2 ms apart.
const (
	roundBudget = 20
	maxRoundGap = 10 * time.Millisecond
)

var portRounds listenRounds

// listening reports whether anything listens on port, in a round that
// starts after the call. The error is the query's: without sock_diag
// (macOS, a seccomp filter) it wraps observe.ErrNotSupported.
func (l *listenRounds) listening(port int) (bool, error) {
	l.mu.Lock()
	r := l.pending
	if r == nil {
		r = &listenRound{done: make(chan struct{})}
		l.pending = r
	}
	r.ports = append(r.ports, port)
	if r.claimed {
		// Another caller of this round runs it.
		l.mu.Unlock()
		<-r.done
		return r.busy[port], r.err
	}
	r.claimed = true
	// Only the claimer of the one pending round moves it to running, so
	// once the running round is done none other starts before this one.
	if cur := l.running; cur != nil {
		l.mu.Unlock()
		<-cur.done
		l.mu.Lock()
	}
	if wait := time.Until(l.next); wait > 0 {
		l.mu.Unlock()
		t := time.NewTimer(wait)
		<-t.C
		l.mu.Lock()
	}
	l.pending, l.running = nil, r
	l.mu.Unlock()
	query := l.query
	if query == nil {
		query = listenersOn
	}
	began := time.Now()
	r.busy, r.err = query(r.ports)
	ended := time.Now()
	l.mu.Lock()
	l.running = nil
	l.next = ended.Add(min(roundBudget*ended.Sub(began), maxRoundGap))
	l.mu.Unlock()
	close(r.done)
	return r.busy[port], r.err
}

// listenersOn reports which of ports have a TCP listener, on any address
// of either family, from one observe.ListeningOn query.
func listenersOn(ports []int) (map[int]bool, error) {
	ls, err := observe.ListeningOn(ports, nil)
	if err != nil {
		return nil, err
	}
	busy := make(map[int]bool, len(ls))
	for _, l := range ls {
		busy[l.Port()] = true
	}
	return busy, nil
}

// portFree reports whether nothing accepts TCP on port: where the kernel's
// listener table can be asked (sock_diag), no LISTEN socket on the port at
// any address, in a round shared with the other stops waiting on their
// ports, and no connect: every socket a loopback connect could reach is a
// LISTEN socket there, so the table alone is the stricter test. Without
// it, no connect to loopback succeeds and the /proc tables (where
// readable) show no listener (a connect that merely timed out on a loaded
// machine proves nothing).
func portFree(ctx context.Context, port int) bool {
	busy, err := portRounds.listening(port)
	if err == nil {
		return !busy
	}
	if observe.PortAccepting(ctx, port) {
		return false
	}
	table, err := observe.ListeningPorts([]int{port})
	return err != nil || !table[port]
}
