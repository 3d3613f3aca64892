package actuate

import (
	"sync"

	"github.com/procfleet/procfleet/observe"
)

// groupScanner coalesces the process-table scans that stops need once a
// server's leader has exited (addStragglers): when many servers stop at
// once (down of a fleet), each would otherwise scan /proc by itself, and a
// scan costs tens of milliseconds with a few hundred processes. A caller
// needs a view of the processes taken after it asked (its leader has
// exited by then); any scan that starts after its request gives that, so
// every caller waiting when a scan starts shares it. At most one scan runs
// at a time, and a caller waits for at most the scan in progress and the
// next one.
type groupScanner struct {
	// scan lists the live (not zombie) processes of every process group.
	scan func() (map[int][]int, error)

	mu      sync.Mutex
	cond    *sync.Cond
	started uint64 // scans started
	done    uint64 // number of the last scan finished
	running bool
	waiting int           // callers waiting for a scan to end
	groups  map[int][]int // the result of scan number done
	err     error
}

// members returns the live pids in process group pgid, from a scan started
// after the call.
func (g *groupScanner) members(pgid int) ([]int, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.cond == nil {
		g.cond = sync.NewCond(&g.mu)
	}
	// A scan running now started before this call: the next one is needed.
	want := g.started + 1
	for g.done < want {
		if g.running {
			g.waiting++
			g.cond.Wait()
			g.waiting--
			continue
		}
		g.running = true
		g.started++
		n := g.started
		g.mu.Unlock()
		groups, err := g.scan()
		g.mu.Lock()
		g.groups, g.err, g.done, g.running = groups, err, n, false
		g.cond.Broadcast()
	}
	if g.err != nil {
		return nil, g.err
	}
	return append([]int(nil), g.groups[pgid]...), nil
}

// groups is the scanner every Actuator of this process shares: the process
// table is the machine's.
var groups = &groupScanner{scan: observe.ProcessGroups}
