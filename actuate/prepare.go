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
// and synced under a temp name.
type prepared struct {
	rec    Record
	staged *stagedIntent
}

// PrepareNext readies the next spawn of req's server while the current
// one runs, so that a crash's restart does not wait for the intent
// record's data to reach the disk: a fresh instance token is drawn and the
// intent record Spawn would write (name, token, cgroup, port, spec hash;
// no pid, no start time) is written and synced in the background under a
// temp name in servers/. Spawn of that server renames it over the record
// when the request still matches (same spec hash, port, membership and
// state folder); otherwise, or when it was swept, Spawn writes one afresh.
// A prepared record replaces an earlier one. DropPrepared removes it.
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
	st := a.Dir.stageIntentAs(rec, preparedInfix)
	a.mu.Lock()
	if a.prepared == nil {
		a.prepared = make(map[string]*prepared)
	}
	old := a.prepared[req.Name]
	a.prepared[req.Name] = &prepared{rec: rec, staged: st}
	a.mu.Unlock()
	if old != nil {
		old.staged.discard()
	}
}

// DropPrepared removes the prepared next spawn of server name, if any.
func (a *Actuator) DropPrepared(name string) {
	if p := a.takePrepared(name); p != nil {
		p.staged.discard()
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

// takePrepared removes and returns the prepared next spawn of name.
func (a *Actuator) takePrepared(name string) *prepared {
	a.mu.Lock()
	defer a.mu.Unlock()
	p := a.prepared[name]
	delete(a.prepared, name)
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
	// wait is at most what writing one afresh would take.
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
