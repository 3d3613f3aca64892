package reconciler

import (
	"github.com/procfleet/procfleet/actuate"
	"github.com/procfleet/procfleet/spec"
)

// preparer is the part of *actuate.Actuator that readies a server's next
// spawn while it runs (an intent record written and synced ahead, its
// token drawn), so that the restart after a crash only renames it into
// place. An Actuator without it (a test's fake) spawns as before.
type preparer interface {
	PrepareNext(req actuate.StartRequest)
	PrepareRestart(req actuate.StartRequest)
	DropPrepared(name string)
	DropAllPrepared()
}

// prepareNext readies the next spawn of s once its process is Ready, if
// it has restarted before: a prepared record is a file write and an fsync,
// which every server of a cold start would otherwise pay at once (a fleet
// of 1,000 that never crashes would pay 1,000). Not for apply (it exits:
// nothing of its restarts), nor for a server that is never restarted.
func (r *Reconciler) prepareNext(s *server, d Desired) {
	p, ok := r.act.(preparer)
	if !ok || r.cfg.OneShot || s.st.restarts == 0 || d.Server == nil || d.Server.Spec.RestartPolicy == spec.RestartNever {
		return
	}
	p.PrepareNext(startRequest(d))
}

// prepareRestart readies the spawn that may follow the exit of s seen
// now, before the exit is handled, when its policy may restart it and
// nothing stops or holds it: a first crash's intent record (not prepared
// at Ready, see prepareNext) is then written and synced while the exit is
// reaped, cleaned up and reported, the port checked and the cgroup made,
// not after them. One write per exit, so no idle or cold-start cost.
func (r *Reconciler) prepareRestart(s *server, d Desired) {
	p, ok := r.act.(preparer)
	if !ok || d.Server == nil || d.Held || d.Server.Spec.RestartPolicy == spec.RestartNever {
		return
	}
	r.mu.Lock()
	_, stopping := r.stopping[s.name]
	r.mu.Unlock()
	if !stopping {
		p.PrepareRestart(startRequest(d))
	}
}

// dropPrepared removes what prepareNext readied for s: it is being
// stopped.
func (r *Reconciler) dropPrepared(s *server) {
	if p, ok := r.act.(preparer); ok {
		p.DropPrepared(s.name)
	}
}

// dropAllPrepared removes everything prepareNext readied, once the
// workers have ended: nothing of this reconciler restarts any more (up
// exits, or stops the fleet with a reconciler of its own).
func (r *Reconciler) dropAllPrepared() {
	if p, ok := r.act.(preparer); ok {
		p.DropAllPrepared()
	}
}
