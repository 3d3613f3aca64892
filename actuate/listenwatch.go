package actuate

import (
	"errors"
	"runtime"
	"sync"
	"time"

	"github.com/procfleet/procfleet/observe"
)

// listenBudget bounds the watch's share of a CPU: after a query that cost
// d of CPU time (its thread's, so that a busy machine does not stretch it),
// the next one waits listenBudget*d, at least fastReadyPeriod and at most
// maxListenPeriod. One query answers for every starting server, so the
// cost of readiness is bounded by the machine, not by how many servers
// start at once.
const (
	listenBudget    = 50
	maxListenPeriod = DefaultReadyPeriod
)

// errNoListenWatch: sock_diag is not available (macOS, a seccomp filter);
// WaitReady then connects to the port, per server.
var errNoListenWatch = errors.New("no listener table")

// listenWatch is the process's one readiness loop for default checks: while
// servers wait for their port to listen, it asks the kernel once per tick
// for the LISTEN sockets on all their ports (observe.ListeningOn) and
// wakes each server whose port has a listener that a loopback connect
// reaches, whoever made it: DESIGN.md's default readiness is "the port
// accepts TCP", which a server's listener outside its cgroup (docker
// run -p: docker-proxy holds the port) also satisfies.
var listenWatch portWatch

type portWatch struct {
	mu      sync.Mutex
	waits   map[*portWait]struct{}
	running bool
	broken  bool // ListeningOn failed: waiters connect instead
	// querying: the loop is in a query (its netlink socket open); idle is
	// signalled when it leaves one.
	querying bool
	idle     *sync.Cond
}

type portWait struct {
	port int
	done chan struct{} // closed when the port listens, or on err
	err  error         // errNoListenWatch, set before done closes
}

// add registers a wait for port; the caller removes it with remove.
func (p *portWatch) add(port int) *portWait {
	w := &portWait{port: port, done: make(chan struct{})}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.broken {
		w.err = errNoListenWatch
		close(w.done)
		return w
	}
	if p.waits == nil {
		p.waits = map[*portWait]struct{}{}
		p.idle = sync.NewCond(&p.mu)
	}
	p.waits[w] = struct{}{}
	if !p.running {
		p.running = true
		go p.loop()
	}
	return w
}

// remove ends w's wait. When it was the last, it returns only once the
// loop is out of its query: no descriptor of the watch is then open on
// this server's behalf (WaitReady returns with none left).
func (p *portWatch) remove(w *portWait) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.waits, w)
	for len(p.waits) == 0 && p.querying {
		p.idle.Wait()
	}
}

// loop queries while anyone waits and ends when nobody does. It starts
// with a query, so a lone restarted server is seen at most
// fastReadyPeriod after it listens; a waiter added while it runs is served
// at its next tick.
func (p *portWatch) loop() {
	// The query's cost is read from this thread's CPU time.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var (
		ports []int
		seen  []observe.PortListen
	)
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		p.mu.Lock()
		if len(p.waits) == 0 {
			p.running = false
			p.mu.Unlock()
			return
		}
		ports = ports[:0]
		for w := range p.waits {
			ports = append(ports, w.port)
		}
		p.querying = true
		p.mu.Unlock()

		began := threadCPU()
		var err error
		seen, err = observe.ListeningOn(ports, seen[:0])
		took := threadCPU() - began

		p.mu.Lock()
		p.querying = false
		p.idle.Broadcast()
		if err != nil {
			p.broken = true
			for w := range p.waits {
				w.err = errNoListenWatch
				close(w.done)
				delete(p.waits, w)
			}
			p.running = false
			p.mu.Unlock()
			return
		}
		for w := range p.waits {
			if listensFor(seen, w) {
				close(w.done)
				delete(p.waits, w)
			}
		}
		p.mu.Unlock()

		t.Reset(min(max(fastReadyPeriod, listenBudget*took), maxListenPeriod))
		<-t.C
	}
}

// listensFor reports whether seen holds a listener w waits for.
func listensFor(seen []observe.PortListen, w *portWait) bool {
	for _, l := range seen {
		if l.Port() == w.port && l.LoopbackReachable() {
			return true
		}
	}
	return false
}
