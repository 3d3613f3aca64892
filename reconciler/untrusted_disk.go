package reconciler

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"sync"

	"github.com/procfleet/procfleet/actuate"
)

// untrustedChecker is the part of *actuate.Actuator that decides and lifts
// an UntrustedRecord quarantine kept on disk (rule 7). Without it (a
// test's fake Actuator) the quarantine is decided by untrustedGone.
type untrustedChecker interface {
	CheckUntrusted(ctx context.Context, q actuate.UntrustedQuarantine, argv []string, port int) (why string, lift bool)
	ResolveUntrusted(q actuate.UntrustedQuarantine, why string) error
}

// diskUntrusted returns the server's UntrustedRecord quarantine kept on
// disk: the newest record of it moved aside as untrusted and not resolved
// since. It is looked up once per server (at its first pass without a
// record, and again after a record of it is moved aside), so a quarantine
// outlives the up that found it, in a list of the state folder shared by
// all servers until a record is moved aside or resolved
// (untrustedList).
func (r *Reconciler) diskUntrusted(s *server) *actuate.UntrustedQuarantine {
	if s.untrustedListed || r.cfg.StateDir == nil {
		return s.untrustedDisk
	}
	s.untrustedListed, s.untrustedDisk = true, nil
	qs, err := r.untrusted.list(r.cfg.StateDir)
	if err != nil {
		r.log.Error(err, "Cannot list the untrusted records", "server", s.name)
		s.untrustedListed = false // listed again at the next pass
		return nil
	}
	if i, found := slices.BinarySearchFunc(qs, s.name, func(q actuate.UntrustedQuarantine, name string) int {
		return strings.Compare(q.Name, name)
	}); found {
		q := qs[i]
		s.untrustedDisk = &q
	}
	return s.untrustedDisk
}

// untrustedList is the state folder's UntrustedRecord quarantines, listed
// once for the first passes of all servers rather than once for each:
// each listing reads the whole records folder, and 1,000 of them in a cold
// start of 1,000 allocated 58 MB. The list is taken again once this
// process has moved a record aside or resolved one since it was taken
// (actuate.AsideChanges): only the holder of the state folder's lock does
// either, so the list is whole until then.
type untrustedList struct {
	mu     sync.Mutex
	qs     []actuate.UntrustedQuarantine // sorted by name; never changed once listed
	at     uint64                        // actuate.AsideChanges() before the listing
	listed bool
}

// list returns the quarantines of sd, sorted by name (not to be changed).
func (l *untrustedList) list(sd *actuate.StateDir) ([]actuate.UntrustedQuarantine, error) {
	now := actuate.AsideChanges()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.listed && l.at == now {
		return l.qs, nil
	}
	qs, err := sd.UntrustedQuarantines()
	if err != nil {
		return nil, err
	}
	l.qs, l.at, l.listed = qs, now, true
	return qs, nil
}

// observeUntrusted keeps, for a server without a record, its
// UntrustedRecord quarantine (on disk, or found in this run) until nothing
// the moved-aside record could protect is left: then the moved-aside file
// is renamed .resolved-<time> (kept), a QuarantineLifted event says why,
// and the server may start. It never signals anything.
func (r *Reconciler) observeUntrusted(ctx context.Context, s *server, d Desired, ob *observation, q *actuate.QuarantineError, ue *actuate.UntrustedRecordError) {
	dq := r.diskUntrusted(s)
	inMemory := q != nil && q.Reason == actuate.UntrustedRecord
	uc, ok := r.act.(untrustedChecker)
	if !ok || dq == nil {
		if inMemory {
			if why, gone := untrustedGone(ue, d); !gone {
				r.log.V(1).Info("Untrusted record quarantine kept", "server", s.name, "why", why)
				ob.obs = Observed{Ownership: OwnQuarantined, Reason: string(q.Reason), Message: q.Message}
			} else {
				ob.obs.Lifted = "untrusted record quarantine lifted, nothing signalled: " + why
			}
		}
		return
	}
	var argv []string
	port := 0
	if d.Server != nil {
		argv = append(append(argv, d.Server.Spec.Command...), d.Server.Spec.Args...)
		port = d.Server.Spec.Port
	}
	why, lift := uc.CheckUntrusted(ctx, *dq, argv, port)
	if !lift {
		r.log.V(1).Info("Untrusted record quarantine kept", "server", s.name, "why", why)
		msg := fmt.Sprintf("its record was not trusted and was moved aside to %s; kept until nothing it could protect is left (now: %s). Check it; delete it once its process is gone", dq.Path, why)
		if inMemory {
			msg = q.Message + " (now: " + why + ")"
		}
		ob.obs = Observed{Ownership: OwnQuarantined, Reason: string(actuate.UntrustedRecord), Message: msg}
		return
	}
	if err := uc.ResolveUntrusted(*dq, why); err != nil && !errors.Is(err, fs.ErrNotExist) {
		r.log.Error(err, "Cannot mark the untrusted record resolved", "server", s.name)
		ob.obs = Observed{Ownership: OwnQuarantined, Reason: string(actuate.UntrustedRecord), Message: err.Error()}
		return
	}
	s.untrustedDisk = nil
	ob.obs.Lifted = fmt.Sprintf("untrusted record quarantine lifted, nothing signalled: %s; %s is kept, renamed .resolved-<time>", why, dq.Path)
}

// untrustedMovedAside tells the server's worker that a record of it was
// just moved aside: the folder is listed again at its next pass.
func (s *server) untrustedMovedAside() { s.untrustedListed = false }

// resolveOwnUntrusted marks resolved the record of s just moved aside
// (ue) when the process it names is held by this reconciler: nothing is
// left for a quarantine to protect.
func (r *Reconciler) resolveOwnUntrusted(s *server, ue *actuate.UntrustedRecordError, why string) {
	uc, ok := r.act.(untrustedChecker)
	if !ok || ue.MovedTo == "" {
		return
	}
	if dq := r.diskUntrusted(s); dq != nil && dq.Path == ue.MovedTo {
		if err := uc.ResolveUntrusted(*dq, why); err != nil && !errors.Is(err, fs.ErrNotExist) {
			r.log.Error(err, "Cannot mark the untrusted record resolved", "server", s.name)
			return
		}
		s.untrustedDisk = nil
	}
}
