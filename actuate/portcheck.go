package actuate

import (
	"context"

	"github.com/procfleet/procfleet/observe"
)

// startPorts is the process's port check before a start, shared by the
// starts running at the same time.
var startPorts startPortRounds

// startPortRounds reads the kernel's LISTEN sockets in rounds: one
// observe.ListeningOn query (one sock_diag dump per address family, the
// kernel filtering to the round's ports) answers every port asked before
// it began. An asker that finds no query running runs the next one for
// everyone waiting; the others wait for it. No round waits on a timer: a
// lone start (a restart after a crash) queries at once.
type startPortRounds struct {
	laterRounds
	asks []*portAsk // asked since the last round began
}

type portAsk struct {
	port      int
	listening bool  // a LISTEN socket on the port, on any address
	err       error // the query failed: nothing is known
}

// listening reports whether a LISTEN socket is on port, from a query that
// began after the call.
func (g *startPortRounds) listening(port int) (bool, error) {
	a := &portAsk{port: port}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.asks = append(g.asks, a)
	g.await(func() {
		asks := g.asks
		g.asks = nil
		g.mu.Unlock()
		ports := make([]int, len(asks))
		for i, x := range asks {
			ports[i] = x.port
		}
		seen, err := observe.ListeningOn(ports, nil)
		g.mu.Lock()
		for _, x := range asks {
			x.err = err
			for _, l := range seen {
				if l.Port() == x.port {
					x.listening = true
					break
				}
			}
		}
	})
	return a.listening, a.err
}

// portHolder is observe.HolderOf(ctx, port) with the socket table read in
// a round shared with the other starts (startPorts): when the round finds
// no listener on the port, the port is held only if a loopback connect is
// accepted (as HolderOf says); when it finds one, or cannot say, HolderOf
// reads the tables again and names the holder.
func portHolder(ctx context.Context, port int) *observe.PortHolder {
	listening, err := startPorts.listening(port)
	if err != nil || listening {
		return observe.HolderOf(ctx, port)
	}
	if observe.PortAccepting(ctx, port) {
		return &observe.PortHolder{Port: port, UID: -1}
	}
	return nil
}
