package reconciler

import (
	"errors"
	"fmt"

	"github.com/procfleet/procfleet/actuate"
)

// writeTrackedRecord writes the record of a tracked process again. On
// success it reports RecordRewritten with msg; on failure it reports
// RecordFailed (once per run of failures), marks the record to be written
// again at the next pass, and returns the error.
func (r *Reconciler) writeTrackedRecord(s *server, t *tracked, msg string) error {
	if err := r.records.WriteRecord(t.rec); err != nil {
		why := fmt.Sprintf("cannot write the record of pid %d (it runs on, tracked through its %s pin; retrying): %v", t.rec.PID, t.handle.Mode(), err)
		_ = r.change(s, func(st *state) ([]Event, error) { return st.recordFailed(s.name, why, true) })
		return fmt.Errorf("rewrite the record of server %s: %w", s.name, err)
	}
	r.ownRecordWritten(s.name)
	return r.change(s, func(st *state) ([]Event, error) { return st.recordOK(s.name, msg) })
}

// rewriteRecord retries, at each pass, the write of a tracked process's
// record that failed (state folder full or read-only). An untrusted file
// still there is moved aside first (ReadRecord does), as a resync would.
func (r *Reconciler) rewriteRecord(s *server) error {
	r.mu.Lock()
	retry := s.st.rewrite
	r.mu.Unlock()
	t := s.tracked
	if !retry || t == nil || t.handle.Exited() {
		return nil // an exit is the next pass's: it removes the record
	}
	msg := "record rewritten: writing it had failed"
	var ue *actuate.UntrustedRecordError
	if _, err := r.records.ReadRecord(s.name); errors.As(err, &ue) && ue.MovedTo != "" {
		msg += "; the untrusted one was moved aside to " + ue.MovedTo
	}
	return r.writeTrackedRecord(s, t, msg)
}

// recordFailed reports that a record could not be removed.
func (r *Reconciler) recordFailed(s *server, msg string) {
	_ = r.change(s, func(st *state) ([]Event, error) { return st.recordFailed(s.name, msg, false) })
}

// recordOK ends a run of record failures, if there was one.
func (r *Reconciler) recordOK(s *server) {
	r.mu.Lock()
	failing := s.st.recordErr != ""
	r.mu.Unlock()
	if failing {
		_ = r.change(s, func(st *state) ([]Event, error) { return st.recordOK(s.name, "") })
	}
}
