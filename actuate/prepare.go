package actuate

import (
	"os"
	"path/filepath"
	"strings"
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
	rec    Record
	staged *stagedIntent
	// writing: the preparer took it (or it was cancelled); guarded by
	// Actuator.mu.
	writing bool
}

// preparerState is the Actuator's one preparer: the names whose prepared
// intent waits for its write, in order, and whether the goroutine that
// writes them runs. Guarded by Actuator.mu.
type preparerState struct {
	queue   []string
	running bool
}

// PrepareNext readies the next spawn of req's server while the current
// one runs, so that a crash's restart does not wait for the intent
// record's data to reach the disk: a fresh instance token is drawn and the
// intent record Spawn would write (name, token, cgroup, port, spec hash;
// no pid, no start time) is written and synced under a temp name in
// servers/, by one goroutine for the whole Actuator, one record after the
// other (a fleet turning Ready at once costs no burst of fsyncs, nor a
// thread blocked per server). Spawn of that server renames it over the
// record when the request still matches (same spec hash, port, membership
// and state folder) and it is written (or being written: Spawn waits for
// that one fsync); otherwise, or when it was swept, Spawn writes one
// afresh. A prepared record replaces an earlier one. DropPrepared removes
// it.
//
// What it leaves on disk is only ever a temp file, never read as a record:
// if procfleet dies before the rename, the next holder of the state
// folder's lock removes it (Lock), and its token was never given to a
// process.
func (a *Actuator) PrepareNext(req StartRequest) {
	if checkName(req.Name) != nil {
		return
	}
	rec := a.intentRecord(req, newToken())
	p := &prepared{rec: rec, staged: a.Dir.newStaged(rec, preparedInfix)}
	a.mu.Lock()
	old := a.setPreparedLocked(req.Name, p)
	a.prep.queue = append(a.prep.queue, req.Name)
	if !a.prep.running {
		a.prep.running = true
		go a.runPreparer()
	}
	a.mu.Unlock()
	if old != nil {
		old.staged.discard()
	}
}

// PrepareRestart readies the spawn that may follow an exit of req's
// server seen just now, so that the intent record's write and fsync run
// while the exit is handled (reaped, what it left cleaned up, reported,
// the port checked, the cgroup made), not after it: a prepared intent
// that matches req is kept, and written at once if it still waits in the
// preparer's queue; otherwise a fresh token is drawn and its intent record
// written and synced at once, on a goroutine of its own (one write per
// exit, never a burst). Spawn renames it into place as it does a
// PrepareNext one; a restart that does not come leaves it prepared for the
// next spawn, or to DropPrepared.
func (a *Actuator) PrepareRestart(req StartRequest) {
	if checkName(req.Name) != nil {
		return
	}
	want := a.intentRecord(req, "")
	a.mu.Lock()
	if p := a.prepared[req.Name]; p != nil && p.rec.matches(want) {
		begin := !p.writing
		p.writing = true
		a.mu.Unlock()
		if begin {
			go p.staged.write()
		}
		return
	}
	a.mu.Unlock()
	want.Instance = newToken()
	p := &prepared{rec: want, staged: a.Dir.newStaged(want, preparedInfix), writing: true}
	go p.staged.write()
	a.mu.Lock()
	old := a.setPreparedLocked(req.Name, p)
	a.mu.Unlock()
	if old != nil {
		go old.staged.discard() // it may wait for its write: not on the way to the restart
	}
}

// setPreparedLocked makes p the prepared intent of name and returns the
// one it replaces (to discard), cancelled if its write had not begun. a.mu
// is held.
func (a *Actuator) setPreparedLocked(name string, p *prepared) (old *prepared) {
	if a.prepared == nil {
		a.prepared = make(map[string]*prepared)
	}
	old = a.prepared[name]
	if old != nil && !old.writing {
		old.writing = true
		old.staged.cancel()
	}
	a.prepared[name] = p
	return old
}

// runPreparer writes the queued prepared intents one after the other and
// ends when none is left.
func (a *Actuator) runPreparer() {
	for {
		a.mu.Lock()
		if len(a.prep.queue) == 0 {
			a.prep.running = false
			a.prep.queue = nil
			a.mu.Unlock()
			return
		}
		name := a.prep.queue[0]
		a.prep.queue = a.prep.queue[1:]
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

// DropPrepared removes the prepared next spawn of server name, if any.
func (a *Actuator) DropPrepared(name string) {
	if p := a.takePrepared(name); p != nil {
		p.staged.discard()
	}
}

// DropAllPrepared removes every prepared next spawn: its caller will
// spawn no more (up exiting).
func (a *Actuator) DropAllPrepared() {
	a.mu.Lock()
	names := make([]string, 0, len(a.prepared))
	for name := range a.prepared {
		names = append(names, name)
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
	// Written long ago, unless the spawn follows Ready at once: then the
	// wait is at most the one write in progress, what writing one afresh
	// would take; one not yet begun was cancelled.
	<-p.staged.done
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
