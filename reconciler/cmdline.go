package reconciler

import (
	"github.com/procfleet/procfleet/actuate"
	"github.com/procfleet/procfleet/observe"
)

// cmdlineRefresher is the part of *actuate.Actuator that follows a held
// process's command line. Without it (a test's fake) records keep the
// command line of the spawn.
type cmdlineRefresher interface {
	RefreshCmdline(rec actuate.Record, h *observe.Handle) (actuate.Record, bool, error)
}

// refreshCmdline rewrites the record of a tracked server whose command
// line or uid changed since it was recorded (a shim's or wrapper's exec, a
// retitle, a privilege drop), keeping the spawn's as spawnCmdline, with a
// CommandLineChanged event naming both; so that a later procfleet, which
// does not hold the process, finds it as it now is. Called when the server
// becomes Ready (a shim has exec'd by then), adopted or started.
func (r *Reconciler) refreshCmdline(s *server, t *tracked) {
	rf, ok := r.act.(cmdlineRefresher)
	if !ok || t == nil || t.handle == nil || t.handle.Exited() {
		return
	}
	rec, changed, err := rf.RefreshCmdline(t.rec, t.handle)
	if err != nil {
		r.log.V(1).Info("Command line not refreshed", "server", s.name, "error", err.Error())
		return
	}
	if changed {
		t.rec = rec
		r.ownRecordWritten(s.name)
	}
}
