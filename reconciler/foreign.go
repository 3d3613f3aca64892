package reconciler

import (
	"fmt"

	"github.com/procfleet/procfleet/actuate"
)

// foreignFound: a record written in another state folder (a copied
// project's) had taken the place of the server's own and was moved aside
// by the read that found it (rule 7: never acted on). A process this
// reconciler holds is still ours, whatever that file said: its record is
// written again, so that a restart of up still finds and adopts it
// instead of meeting an unrecorded process on the server's port. A server
// with no tracked process simply has no record now, as DESIGN.md says.
func (r *Reconciler) foreignFound(s *server, fe *actuate.ForeignRecordError) error {
	t := s.tracked
	if t == nil || t.handle.Exited() {
		r.log.Info("A record from another state folder was moved aside, never acted on", "server", s.name, "movedTo", fe.MovedTo)
		return nil
	}
	return r.writeTrackedRecord(s, t, fmt.Sprintf("record rewritten: a record from another state folder had replaced it (moved aside to %s, never acted on)", fe.MovedTo))
}
