package actuate

import (
	"sync"

	"github.com/procfleet/procfleet/observe"
)

// procScanner coalesces the process-table scans that stops and cleanups
// need in the session mode (a server's group once its leader exited, and
// the processes carrying its instance token): when many servers stop at
// once (down of a fleet), each would otherwise scan /proc by itself, and a
// scan costs tens of milliseconds with 1,000 processes. A caller needs a
// view taken after it asked (its leader has exited by then, or its
// daemons have forked); any scan that starts after its request gives that,
// so every caller waiting when a scan starts shares it, and the scan reads
// the environment of processes started since the earliest start time they
// ask about. At most one scan runs at a time; a caller waits for at most
// the scan in progress and the next one. So a stop costs a share of a few
// scans, not a scan of its own: stopping a fleet is linear in its size.
type procScanner struct {
	// scan lists the live processes, with the instance token of those
	// started since the given start time.
	scan func(since uint64) ([]observe.ProcEntry, error)

	mu        sync.Mutex
	cond      *sync.Cond
	started   uint64 // scans started
	done      uint64 // number of the last scan finished
	running   bool
	waiting   int    // callers waiting for a scan to end
	since     uint64 // the earliest start time asked for by callers waiting
	haveSince bool
	table     []observe.ProcEntry // the result of scan number done
	err       error
}

// processes returns a listing of the live processes taken by a scan that
// started after the call, with the instance token of every process
// started at or after since. The slice is shared: callers do not modify it.
func (s *procScanner) processes(since uint64) ([]observe.ProcEntry, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cond == nil {
		s.cond = sync.NewCond(&s.mu)
	}
	if !s.haveSince || since < s.since {
		s.since, s.haveSince = since, true
	}
	// A scan running now started before this call: the next one is needed.
	want := s.started + 1
	for s.done < want {
		if s.running {
			s.waiting++
			s.cond.Wait()
			s.waiting--
			continue
		}
		s.running = true
		s.started++
		n, from := s.started, s.since
		s.haveSince = false
		s.mu.Unlock()
		table, err := s.scan(from)
		s.mu.Lock()
		s.table, s.err, s.done, s.running = table, err, n, false
		s.cond.Broadcast()
	}
	return s.table, s.err
}

// procs is the scanner every Actuator of this process shares: the process
// table is the machine's.
var procs = &procScanner{scan: func(since uint64) ([]observe.ProcEntry, error) {
	return observe.ScanProcesses(observe.ScanOptions{EnvKey: InstanceEnv, EnvSince: since})
}}
