package reconciler

import (
	"fmt"
	"time"

	"github.com/procfleet/procfleet/actuate"
)

// ReasonMinReadySeconds: the server runs and its readiness holds, for less
// than its minReadySeconds so far; it is not Ready yet (status reason,
// Ready condition reason and event reason).
const ReasonMinReadySeconds = "MinReadySeconds"

// recordTimeResolution is the precision of a record's StartedAt (whole
// seconds): a process recorded as started at T was spawned within
// [T, T+recordTimeResolution).
const recordTimeResolution = time.Second

// minReady is how long the server's readiness must hold before it counts
// as Ready: its instance's minReadySeconds, with its default (0 with a
// readiness probe, declared or the TCP connect to its port; 1 s when
// readiness is "running").
func (d Desired) minReady() time.Duration {
	switch {
	case d.Instance != nil:
		return d.Instance.MinReady
	case d.Server != nil:
		return d.Server.Spec.MinReady()
	}
	return 0
}

// planReadiness reports a running, tracked server as it stands: Ready;
// inside its minReadySeconds window (looked at again when the window ends);
// at the end of the window (it counts as Ready now); or not ready.
func planReadiness(a Action, d Desired, o Observed) Action {
	a.Kind, a.Phase = ActionNothing, PhaseRunning
	switch {
	case o.Ready:
		a.Reason = "ready"
	case !o.ReadinessHeld:
		a.Reason = "not ready"
	default:
		min := d.minReady()
		if rem := min - o.ReadyFor; rem > 0 {
			a.Reason, a.RequeueAfter = ReasonMinReadySeconds, rem
			a.Message = minReadyMessage(min)
			return a
		}
		a.Reason, a.CountReady = "ready", true
	}
	return a
}

// minReadyMessage says what a server inside its window waits for.
func minReadyMessage(min time.Duration) string {
	return fmt.Sprintf("Ready once ready for %gs without exiting (minReadySeconds)", min.Seconds())
}

// adoptedReadySince is when an adopted process's readiness window may
// count from: it ran without exiting since its spawn, which its record
// places within a second (the end of that second is taken); never later
// than now.
func adoptedReadySince(startedAt, now time.Time) time.Time {
	if startedAt.IsZero() {
		return now
	}
	since := startedAt.Add(recordTimeResolution)
	if since.After(now) {
		return now
	}
	return since
}

// minReadyWindow reports, for the read-only status, whether an owned
// process whose readiness holds may still be inside its minReadySeconds
// window: no up or apply counted it Ready (status.json), and its spawn,
// known to the second, may be less than minReadySeconds ago. It returns
// the server's minReadySeconds.
func minReadyWindow(in summaryInput, rec actuate.Record, now time.Time) (time.Duration, bool) {
	if in.Declared == nil || rec.StartedAt.IsZero() {
		return 0, false
	}
	min := in.Declared.Spec.MinReady()
	if min <= 0 {
		return 0, false
	}
	if s := in.Saved; s != nil && s.Ready && s.PID == rec.PID {
		return min, false // counted by the up or apply that started it
	}
	return min, now.Before(rec.StartedAt.Add(recordTimeResolution + min))
}
