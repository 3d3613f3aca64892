package reconciler

// A tracked process that exited leaves its record (and its started/ file)
// on disk until the end of the pass that saw the exit, not a moment
// longer: a restart in that pass renames its intent record over the record
// (one rename on the way from the exit to the exec, no unlink before it),
// and otherwise clearDeadRecord removes it. Meanwhile the server counts as
// having no record (observeRecord does not read it): procfleet held the
// process to its exit, so the record names nothing. Should procfleet die
// in between, the record names a process that is gone (or whose pid was
// reused): the next reader finds it stale or reused and removes it
// without a signal (rules 1 and 2), as it would after an exit it never saw.

// clearDeadRecord removes, at the end of a pass, the record and started/
// file of an exited process when no restart replaced them. A record that
// cannot be removed is logged, as before, and tried again at the end of
// the next pass.
func (r *Reconciler) clearDeadRecord(s *server) {
	if s.deadRecord {
		if err := r.records.RemoveRecord(s.name); err != nil {
			r.log.Error(err, "Cannot remove the record of an exited server", "server", s.name)
		} else {
			s.deadRecord = false
		}
	}
	if s.deadStarted {
		s.deadStarted = false
		r.forgetStarted(s)
	}
}
