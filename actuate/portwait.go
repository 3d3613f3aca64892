package actuate

import (
	"sync"

	"github.com/procfleet/procfleet/observe"
)

// listenRounds answers "does anything listen on this port" for the stops
// of one process that wait on their ports at the same time, with one
// kernel query per round for all of them (observe.ListeningPorts): a fleet
// stopping together asked once per stop before, each query a walk of the
// kernel's whole listening hash per address family. A port is asked in a
// round that starts after it was asked (a round already running may have
// looked before the caller's process exited), so every answer is as fresh
// as a query of its own.
type listenRounds struct {
	mu      sync.Mutex
	pending *listenRound // gathering ports; runs when running is done
	running *listenRound
	// query replaces observe.ListeningPorts (tests).
	query func(ports []int) (map[int]bool, error)
}

type listenRound struct {
	ports []int
	done  chan struct{}
	busy  map[int]bool
	err   error
}

var portRounds listenRounds

// listening reports whether anything listens on port, in a round that
// starts after the call.
func (l *listenRounds) listening(port int) (bool, error) {
	l.mu.Lock()
	r := l.pending
	if r == nil {
		r = &listenRound{done: make(chan struct{})}
		l.pending = r
	}
	r.ports = append(r.ports, port)
	for l.running != nil && l.pending == r {
		cur := l.running
		l.mu.Unlock()
		<-cur.done
		l.mu.Lock()
	}
	if l.pending != r {
		// Another caller of this round runs it.
		l.mu.Unlock()
		<-r.done
		return r.busy[port], r.err
	}
	l.pending, l.running = nil, r
	l.mu.Unlock()
	query := l.query
	if query == nil {
		query = observe.ListeningPorts
	}
	r.busy, r.err = query(r.ports)
	l.mu.Lock()
	l.running = nil
	l.mu.Unlock()
	close(r.done)
	return r.busy[port], r.err
}
