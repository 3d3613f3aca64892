package reconciler

import (
	"context"
	"errors"

	"github.com/procfleet/procfleet/actuate"
)

// ReasonCleanupFailed: something the exited leader left behind outlived
// the cleanup (the event names it); the restart goes ahead and meets it
// as a port conflict if it holds the port.
const ReasonCleanupFailed = "CleanupFailed"

// cleaner is the part of *actuate.Actuator that stops what an exited
// leader left behind. An Actuator without it (a test's fake) leaves
// nothing to clean.
type cleaner interface {
	Cleanup(ctx context.Context, rec actuate.Record, opts actuate.StopOptions) error
}

// cleanupAfterExit stops what the exited leader of t left running (the
// members of its cgroup, the rest of its process group, the processes
// carrying its instance token) before its record goes and it restarts,
// as DESIGN.md "Starting" requires: nothing of a server is left behind
// before a restart or a Stopped or Failed report. It is bounded by the
// server's grace and kill timeouts and returns at once when nothing is
// left. Every signal is an actuate event naming its evidence.
func (r *Reconciler) cleanupAfterExit(ctx context.Context, s *server, t *tracked) {
	c, ok := r.act.(cleaner)
	if !ok || t.rec.Intent() {
		return
	}
	opts := actuate.StopOptions{Grace: t.spec.TerminationGracePeriod(), KillTimeout: t.spec.KillTimeout()}
	if t.handle != nil && t.handle.PID() == t.rec.PID && t.handle.Exited() {
		// Held until its exit: its group id cannot name a stranger's
		// group while members remain.
		opts.Held = t.handle
	}
	err := c.Cleanup(ctx, t.rec, opts)
	if err == nil || errors.Is(err, context.Canceled) {
		return
	}
	r.log.Error(err, "Cannot stop what the exited server left behind", "server", s.name)
	r.event(Event{Server: s.name, Type: EventWarning, Reason: ReasonCleanupFailed, Message: err.Error()})
}
