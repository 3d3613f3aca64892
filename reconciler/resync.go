package reconciler

import (
	"slices"

	"github.com/procfleet/procfleet/observe"
)

// A periodic resync is the backstop of the events, not their replacement:
// it must catch a process that exited unseen, a record changed or moved in
// behind up's back, a log to rotate and a fleet file event missed. A pass
// over a server at rest (tracked, Running, Ready, its last pass planned
// nothing and asked for no other look) finds none of these: its pass reads
// the tracked process's exit and nothing on disk, so the resync does not
// queue it, and costs no pass per idle server (the 1,000 passes were a
// quarter of an idle resync's CPU at 1,000). What it still does for each:
//   - its exit: a non-blocking look at its pin (observe.ExitedAll, which
//     asks about 64 pidfds in one poll(2)), and a pass at once if it has
//     exited, as every pass did;
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

// resyncScratch is enqueueResync's memory, kept from one resync to the
// next so that a resync over an idle fleet allocates little: the names of
// the records, the servers to pass, and the servers at rest with their
// pins and what the look at them found.
type resyncScratch struct {
	recorded, busy, quiet []string
	pins                  []*observe.Handle
	exited                []bool
}

// enqueueResync marks dirty, for a periodic resync, every server but those
// at rest whose process has not exited (see above): every server declared,
// remembered, or with a record (names' set, without its sort and copy).
func (r *Reconciler) enqueueResync() {
	b := &r.resyncBuf
	recorded, errs := r.recordNamesInto(b.recorded[:0])
	b.recorded = recorded
	busy := r.postListed(b.busy[:0], errs) // untrusted: posted, and passed
	quiet, pins := b.quiet[:0], b.pins[:0]
	r.mu.Lock()
	for n, s := range r.servers {
		if s.rest != nil && s.restGen == r.desiredGen {
			quiet, pins = append(quiet, n), append(pins, s.rest)
		} else {
			busy = append(busy, n)
		}
	}
	for n := range r.desired {
		if r.servers[n] == nil {
			busy = append(busy, n)
		}
	}
	for _, n := range recorded {
		if _, declared := r.desired[n]; !declared && r.servers[n] == nil {
			busy = append(busy, n)
		}
	}
	r.resyncs++
	r.mu.Unlock()
	slices.Sort(busy)
	for _, n := range busy {
		r.queue.Add(n) // a name twice is queued once
	}
	exited := slices.Grow(b.exited[:0], len(pins))[:len(pins)]
	observe.ExitedAll(pins, exited)
	for i, n := range quiet {
		if exited[i] {
			r.queue.Add(n)
		}
	}
	clear(pins) // keep no pin alive in the scratch
	b.busy, b.quiet, b.pins, b.exited = busy[:0], quiet[:0], pins[:0], exited[:0]
	r.notifyChange()
}
