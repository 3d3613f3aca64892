package reconciler

import "github.com/procfleet/procfleet/observe"

// A periodic resync is the backstop of the events, not their replacement:
// it must catch a process that exited unseen, a record changed or moved in
// behind up's back, a log to rotate and a fleet file event missed. A pass
// over a server at rest (tracked, Running, Ready, its last pass planned
// nothing and asked for no other look) finds none of these: its pass reads
// the tracked process's exit and nothing on disk, so the resync does not
// queue it, and costs no pass per idle server (the 1,000 passes were a
// quarter of an idle resync's CPU at 1,000). What it still does for each:
//   - its exit: one non-blocking look at its pin (Handle.Exited), and a
//     pass at once if it has exited, as every pass did;
//   - its record: the scan of names (recordScan) reads every record that
//     changed, moves aside an untrusted or foreign one and posts it to its
//     server, which queues a pass, as before.
//
// Anything else that changes a server's inputs queues it itself (a post, a
// file update, a verb, a dependency Ready, a requeue), and a new fleet
// (setDesired) ends every server's rest.

// restLocked reports whether the pass of s that planned a, with result res
// and error err, left s at rest. s's worker calls it with r.mu held, at the
// end of the pass. (Posts are handled before the pass observes: its plan
// saw what they changed.)
func (r *Reconciler) restLocked(s *server, a Action, res Result, err error, req startAsk) bool {
	st := &s.st
	_, inStop := r.stopping[s.name]
	return err == nil && len(s.inbox) == 0 &&
		a.Kind == ActionNothing && a.RequeueAfter == 0 && !a.RemoveRecord && a.Lifted == "" &&
		res.RequeueAfter == 0 && !inStop && !r.held[s.name] &&
		(req.seq == 0 || req.seq <= s.taken) &&
		s.tracked != nil && s.startCancel == nil &&
		st.phase == PhaseRunning && st.isReady && !st.starting && !st.exitPending &&
		!st.livenessFailed && !st.rewrite && st.recordErr == "" &&
		st.quarantine == nil && st.untrusted == nil && st.portHolder == ""
}

// quietServer is a server at rest when a resync began, and its pin.
type quietServer struct {
	name string
	pin  *observe.Handle
}

// enqueueResync marks dirty, for a periodic resync, every server but those
// at rest whose process has not exited (see above).
func (r *Reconciler) enqueueResync() {
	names := r.names()
	quiet, busy := r.quietBuf[:0], names[:0] // busy reuses names: it never runs ahead
	r.mu.Lock()
	for _, n := range names {
		if s := r.servers[n]; s != nil && s.rest != nil && s.restGen == r.desiredGen {
			quiet = append(quiet, quietServer{n, s.rest})
		} else {
			busy = append(busy, n)
		}
	}
	r.resyncs++
	r.mu.Unlock()
	for _, n := range busy {
		r.queue.Add(n)
	}
	for i, q := range quiet {
		if q.pin.Exited() {
			r.queue.Add(q.name)
		}
		quiet[i] = quietServer{} // keep no pin alive in the buffer
	}
	r.quietBuf = quiet[:0]
	r.notifyChange()
}
