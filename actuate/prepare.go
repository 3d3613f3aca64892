package actuate

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// preparedInfix marks the temp file of a prepared intent record
// (".<name>.json.tmp-next-<random>"): a temp file as any other (never read
// as a record, swept by age), which a new holder of the state folder's
// lock also removes whatever its age, since only a lock holder prepares.
const preparedInfix = tempInfix + "next-"

// prepared is the next spawn of one server made ready while its process
// runs: an intent record, with the instance token drawn for it, written
// and synced under a temp name by the Actuator's preparer.
type prepared struct {
	rec    Record // never changed once made
	staged *stagedIntent
	// writing: the preparer took it (or it was cancelled); guarded by
	// Actuator.mu.
	writing bool
}

// preparerState is the Actuator's one preparer: the names whose prepared
// intent waits for its write, in order (queue: PrepareNext; ahead:
// PrepareAhead, written only while no start is in progress), whether the
// goroutine that writes them runs, and wake, closed to end it
// (DropAllPrepared). starting counts the starts in progress (a Spawn
// until its WaitReady returns, or until it fails); quiet, made by a
// preparer waiting for them, is closed when none is left. Guarded by
// Actuator.mu.
type preparerState struct {
	queue    []string
	ahead    []string
	running  bool
	wake     chan struct{}
	kick     chan struct{} // a PrepareNext for a preparer waiting on quiet
	starting int
	quiet    chan struct{}
	// tokens of the PrepareAhead rate (aheadBurst, aheadEvery), counted at
	// refilled.
	tokens   float64
	refilled time.Time
}

// PrepareAhead's writes are rate limited: up to aheadBurst at once (every
// server of a small fleet is prepared as soon as the fleet is up), then one
// per aheadEvery, so that a large fleet's preparation (an inode made, a
// write and an fsync each: 0.1-1 ms of CPU here, mostly the file system's
// inode allocation) is spread over minutes: about 60 records in any 30 s.
const (
	aheadBurst = 32
	aheadEvery = time.Second
)

// PrepareNext readies the next spawn of req's server while the current
// one runs, so that a crash's restart does not wait for the intent
// record's data to reach the disk: a fresh instance token is drawn and the
// intent record Spawn would write (name, token, cgroup, port, spec hash;
// no pid, no start time) is written and synced under a temp name in
// servers/, by one goroutine for the whole Actuator on a thread of the
// lowest priority, one record after the other (a fleet turning Ready at
// once costs no burst of fsyncs, nor a thread blocked per server, and the
// servers' own start never waits for it). Spawn of that server renames it
// over the record when the request still matches (same spec hash, port,
// membership and state folder) and it is written; otherwise (one still
// being written included), or when it was swept, Spawn writes one afresh.
// A prepared record replaces an earlier one. DropPrepared removes it.
//
// What it leaves on disk is only ever a temp file, never read as a record:
// if procfleet dies before the rename, the next holder of the state
// folder's lock removes it (Lock), and its token was never given to a
// process.
func (a *Actuator) PrepareNext(req StartRequest) { a.prepare(req, false) }

// PrepareAhead is PrepareNext for a server that has not crashed yet: it
// is written only while no start is in progress (from a Spawn until its
// WaitReady returns), after every PrepareNext asked, and at a bounded rate
// (aheadBurst, aheadEvery), so that a fleet starting together is all
// spawned and Ready before any of its intents is prepared, its cold start
// pays none of those writes, and a large fleet's are spread over minutes.
func (a *Actuator) PrepareAhead(req StartRequest) { a.prepare(req, true) }

// prepare queues the preparation of req's next spawn.
func (a *Actuator) prepare(req StartRequest, ahead bool) {
	if checkName(req.Name) != nil {
		return
	}
	rec := a.intentRecord(req, newToken())
	p := &prepared{rec: rec}
	p.staged = a.Dir.newStagedLater(&p.rec, preparedInfix)
	a.mu.Lock()
	if a.prepared == nil {
		a.prepared = make(map[string]*prepared)
	}
	old := a.prepared[req.Name]
	if old != nil && !old.writing {
		old.writing = true
		old.staged.cancel()
	}
	a.prepared[req.Name] = p
	if ahead {
		a.prep.ahead = append(a.prep.ahead, req.Name)
	} else {
		a.prep.queue = append(a.prep.queue, req.Name)
	}
	switch {
	case !a.prep.running:
		a.prep.running = true
		a.prep.wake, a.prep.kick = make(chan struct{}), make(chan struct{}, 1)
		go a.runPreparer(a.prep.wake, a.prep.kick)
	case !ahead:
		select {
		case a.prep.kick <- struct{}{}:
		default: // one is pending already
		}
	}
	a.mu.Unlock()
	if old != nil {
		old.staged.discard()
	}
}

// startBegins counts a start in progress until the function it returns
// is called (any number of times).
func (a *Actuator) startBegins() (ends func()) {
	a.mu.Lock()
	a.prep.starting++
	a.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			a.mu.Lock()
			a.prep.starting--
			if a.prep.starting == 0 && a.prep.quiet != nil {
				close(a.prep.quiet)
				a.prep.quiet = nil
			}
			a.mu.Unlock()
		})
	}
}

// runPreparer writes the queued prepared intents one after the other, at
// the lowest priority, and ends when none is left or wake is closed; kick
// wakes it from a wait for quiet.
func (a *Actuator) runPreparer(wake, kick <-chan struct{}) {
	lowerThreadPriority()
	for {
		a.mu.Lock()
		if a.prep.wake != wake {
			a.mu.Unlock()
			return // ended by DropAllPrepared
		}
		name, quiet, wait, ok := a.nextPrepare(time.Now())
		if !ok {
			a.prep.running = false
			a.prep.queue, a.prep.ahead = nil, nil
			a.mu.Unlock()
			return
		}
		if quiet != nil || wait > 0 {
			a.mu.Unlock()
			var t *time.Timer
			var rate <-chan time.Time
			if wait > 0 {
				t = time.NewTimer(wait)
				rate = t.C
			}
			select {
			case <-quiet:
			case <-rate:
			case <-kick:
			case <-wake:
			}
			if t != nil {
				t.Stop()
			}
			continue
		}
		p := a.prepared[name]
		if p == nil || p.writing {
			a.mu.Unlock()
			continue
		}
		p.writing = true
		a.mu.Unlock()
		p.staged.write()
	}
}

// nextPrepare takes the next name to prepare at now: PrepareNext's in
// turn, then PrepareAhead's while no start is in progress (else quiet is
// closed once none is) and the rate allows (else wait is the time until it
// does). false: nothing is left. Called with a.mu held.
func (a *Actuator) nextPrepare(now time.Time) (name string, quiet <-chan struct{}, wait time.Duration, ok bool) {
	if len(a.prep.queue) > 0 {
		name, a.prep.queue = a.prep.queue[0], a.prep.queue[1:]
		return name, nil, 0, true
	}
	for len(a.prep.ahead) > 0 {
		if p := a.prepared[a.prep.ahead[0]]; p != nil && !p.writing {
			break
		}
		a.prep.ahead = a.prep.ahead[1:] // dropped, or prepared again since
	}
	if len(a.prep.ahead) == 0 {
		return "", nil, 0, false
	}
	if a.prep.starting > 0 {
		if a.prep.quiet == nil {
			a.prep.quiet = make(chan struct{})
		}
		return "", a.prep.quiet, 0, true
	}
	if a.prep.refilled.IsZero() {
		a.prep.tokens = aheadBurst
	} else {
		a.prep.tokens = min(aheadBurst, a.prep.tokens+float64(now.Sub(a.prep.refilled))/float64(aheadEvery))
	}
	a.prep.refilled = now
	if a.prep.tokens < 1 {
		return "", nil, time.Duration((1 - a.prep.tokens) * float64(aheadEvery)), true
	}
	a.prep.tokens--
	name, a.prep.ahead = a.prep.ahead[0], a.prep.ahead[1:]
	return name, nil, 0, true
}

// Prepared returns the instance token of the next spawn readied for
// server name (PrepareNext, PrepareAhead; "" when none), and whether its
// record is written: only a written one is used by the spawn.
func (a *Actuator) Prepared(name string) (token string, written bool) {
	a.mu.Lock()
	p := a.prepared[name]
	a.mu.Unlock()
	if p == nil {
		return "", false
	}
	select {
	case <-p.staged.done:
		return p.rec.Instance, p.staged.err == nil
	default:
		return p.rec.Instance, false
	}
}

// DropPrepared removes the prepared next spawn of server name, if any.
func (a *Actuator) DropPrepared(name string) {
	if p := a.takePrepared(name); p != nil {
		p.staged.discard()
	}
}

// DropAllPrepared removes every prepared next spawn: its caller will
// spawn no more (up exiting). A preparer waiting for quiet ends.
func (a *Actuator) DropAllPrepared() {
	a.mu.Lock()
	names := make([]string, 0, len(a.prepared))
	for name := range a.prepared {
		names = append(names, name)
	}
	a.prep.queue, a.prep.ahead = nil, nil
	if a.prep.running {
		close(a.prep.wake)
		a.prep.running, a.prep.wake = false, nil
	}
	a.mu.Unlock()
	for _, name := range names {
		a.DropPrepared(name)
	}
}

// intentRecord is the intent record of a spawn of req with token, without
// a start time (the full record has it).
func (a *Actuator) intentRecord(req StartRequest, token string) Record {
	rec := Record{Version: RecordVersion, Name: req.Name, Instance: token, Port: req.Port, SpecHash: req.SpecHash,
		Cgroup: a.Dir.serverCgroupPath(req.Name)}
	if fid, err := a.Dir.folderID(); err == nil {
		rec.StateDir = &fid
	}
	return rec
}

// takePrepared removes and returns the prepared next spawn of name; one
// the preparer has not begun to write is cancelled (its done closed with
// an error), so that waiting on it never blocks longer than one write.
func (a *Actuator) takePrepared(name string) *prepared {
	a.mu.Lock()
	defer a.mu.Unlock()
	p := a.prepared[name]
	delete(a.prepared, name)
	if p != nil && !p.writing {
		p.writing = true
		p.staged.cancel()
	}
	return p
}

// usePrepared returns the prepared intent for want (the intent record
// Spawn would write now) when there is one that matches it and was
// written without error; any other is removed.
func (a *Actuator) usePrepared(want Record) *prepared {
	p := a.takePrepared(want.Name)
	if p == nil {
		return nil
	}
	// Written long ago, unless the spawn follows Ready at once: one not
	// yet begun was cancelled, and one being written (at the preparer's
	// low priority) is not waited for: a fresh one is staged instead, and
	// this one removed once written.
	select {
	case <-p.staged.done:
	default:
		go p.staged.discard()
		return nil
	}
	if p.staged.err == nil && p.rec.matches(want) {
		return p
	}
	p.staged.discard()
	return nil
}

// matches reports whether an intent record prepared earlier says what want
// says, but for the token.
func (r Record) matches(want Record) bool {
	same := r.StateDir == nil && want.StateDir == nil ||
		r.StateDir != nil && want.StateDir != nil && *r.StateDir == *want.StateDir
	return same && r.Version == want.Version && r.Name == want.Name && r.Port == want.Port &&
		r.SpecHash == want.SpecHash && r.Cgroup == want.Cgroup
}

// sweepPrepared removes every prepared intent's temp file: called by a new
// holder of the lock, it removes what an earlier holder prepared and never
// used (only a lock holder prepares).
func (d *StateDir) sweepPrepared() {
	dir := filepath.Join(d.Path, serversDir)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") && strings.Contains(e.Name(), preparedInfix) && e.Type().IsRegular() {
			_ = os.Remove(filepath.Join(dir, e.Name()))
		}
	}
}
