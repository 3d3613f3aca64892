package actuate

import "github.com/procfleet/procfleet/observe"

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

	laterRounds
	since     uint64 // the earliest start time asked for since the last scan began
	haveSince bool
	table     []observe.ProcEntry // the result of the last scan
	err       error
}

// processes returns a listing of the live processes taken by a scan that
// started after the call, with the instance token of every process
// started at or after since. The slice is shared: callers do not modify it.
func (s *procScanner) processes(since uint64) ([]observe.ProcEntry, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.haveSince || since < s.since {
		s.since, s.haveSince = since, true
	}
	s.await(func() {
		from := s.since
		s.haveSince = false
		s.mu.Unlock()
		table, err := s.scan(from)
		s.mu.Lock()
		s.table, s.err = table, err
	})
	return s.table, s.err
}

// procs is the scanner every Actuator of this process shares: the process
// table is the machine's.
var procs = &procScanner{scan: func(since uint64) ([]observe.ProcEntry, error) {
	return observe.ScanProcesses(observe.ScanOptions{EnvKey: InstanceEnv, EnvSince: since})
}}
