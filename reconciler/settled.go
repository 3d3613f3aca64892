package reconciler

// settleMode says what a caller waits for.
type settleMode uint8

const (
	// settleApply: apply without --wait; a server is done once it runs.
	settleApply settleMode = iota
	// settleWait: apply --wait (and apply through up with --wait); a
	// server is done once it is Ready, or given up on.
	settleWait
	// settleDown: down, stop; a server is done once nothing of it runs.
	settleDown
)

// settleView is what settled reads of one server.
type settleView struct {
	// declared: in the fleet files; held: kept stopped by down or stop.
	declared, held bool
	// passed: reconciled at least once since the wait began; until then
	// nothing said of it is current.
	passed bool
	phase  Phase
	ready  bool
	// running: a process of it is tracked; starting: a start is in
	// progress.
	running, starting bool
	// exitsBeforeReady counts exits before Ready since its last fresh
	// start or the last time it counted as Ready.
	exitsBeforeReady int
	// exitedAfterReady: it exited, after it had counted as Ready, since
	// the wait began.
	exitedAfterReady bool
	// completed: stopped after it ran to an end its restartPolicy accepts.
	completed bool
	// waitedOn: a declared server waits for it to be Ready (dependsOn).
	waitedOn bool
	// toStop: a down has yet to stop it (it may wait for its dependents
	// without ever having been looked at as running).
	toStop bool
	// requested: a start or restart asked of it is not carried out yet.
	requested bool
	// outdated: it runs a spec other than the declared one (a replica
	// waiting for its rolling turn); blockedBy names an instance of its
	// server given up on (Failed, Quarantined), which that turn waits for
	// in vain.
	outdated  bool
	blockedBy string
	// depFailed names a dependency (dependsOn) that was given up on: it
	// will not be Ready, so neither will this server start.
	depFailed string
}

// settleVerdict is settled's answer for one server.
type settleVerdict struct {
	// done: the server will not change by itself before the caller's
	// deadline; waiting longer for it is pointless.
	done bool
	// failed: done, and not as the caller wanted (reported, exit 1).
	failed bool
	// why explains a failure beyond the server's phase and reason.
	why string
}

var (
	pending = settleVerdict{}
	ok      = settleVerdict{done: true}
)

func failedBecause(why string) settleVerdict {
	return settleVerdict{done: true, failed: true, why: why}
}

// settled is the one decision of "is this server done" that apply (with
// and without --wait), Converge, Reload's wait, down and stop use.
func settled(v settleView, mode settleMode) settleVerdict {
	if !v.passed {
		return pending
	}
	if v.requested && v.declared && !v.held && mode != settleDown {
		// What it shows is from before the start or restart asked of
		// it; only a quarantine keeps the request from being taken.
		if v.phase == PhaseQuarantined {
			return failedBecause("")
		}
		return pending
	}
	if mode == settleDown || !v.declared || v.held {
		switch {
		case v.phase == PhaseQuarantined:
			return failedBecause("")
		case v.phase == PhaseFailed && !v.running && !v.starting:
			return failedBecause("")
		case v.running || v.starting || v.toStop || v.phase == PhaseStopping:
			return pending
		}
		return ok
	}
	switch {
	case v.phase == PhaseQuarantined, v.phase == PhaseFailed:
		return failedBecause("")
	case v.exitsBeforeReady >= 2 && v.phase != PhasePending:
		// Pending: the pass that decides (Failed, or a backed-off
		// restart) is on its way.
		return failedBecause(whyGivenUp(false))
	case mode == settleWait && v.exitedAfterReady:
		return failedBecause(whyGivenUp(true))
	case v.outdated && v.blockedBy != "":
		return failedBecause("its rolling replace waits for " + v.blockedBy + ", which was given up on")
	case v.outdated:
		return pending
	case v.depFailed != "" && !v.running && !v.starting && v.phase != PhaseStopped:
		return failedBecause("its dependency " + v.depFailed + " failed")
	case v.phase == PhaseStopped && v.completed:
		return ok
	case mode == settleWait:
		if v.ready && v.running {
			return ok
		}
		return pending
	case v.phase == PhaseRunning:
		return ok
	case v.phase == PhaseStarting && !v.waitedOn:
		return ok
	}
	return pending
}

// whyGivenUp says why apply gives up on a server that exited: after it
// counted as Ready, or for the second time before.
func whyGivenUp(afterReady bool) string {
	if afterReady {
		return "exited after it was Ready"
	}
	return "exited twice before it was Ready"
}
