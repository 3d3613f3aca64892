package reconciler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"

	"github.com/procfleet/procfleet/actuate"
	"github.com/procfleet/procfleet/internal/logfile"
	"github.com/procfleet/procfleet/spec"
)

// DetailEvents is how many of a server's last events Detail returns.
const DetailEvents = 64

// ServerDetail is one server as the running reconciler knows it beyond its
// status: what `describe` shows, and the dashboard's server page.
type ServerDetail struct {
	Status ServerStatus
	// Record is the server's record as it is on disk now, read without
	// moving anything and verified against the kernel with the code
	// Inspect runs (actuate.Verify, ObservedFromRecord); nil when the
	// server has no record.
	Record *RecordView
	// Held: the reconciler holds the process the status shows pinned
	// (pidfd, kqueue) since it spawned or adopted it, so the kernel
	// guarantees it is that process whatever its command line became.
	Held bool
	// Events are the server's last events (at most DetailEvents), oldest
	// first, from its events file: they outlive a restart of up.
	Events []Event
	// LogPath is the server's log file; empty without a state folder.
	LogPath string
}

// Fleet returns the fleet in force: the last one that loaded (nil before
// Run has loaded one). It is shared: callers must not change it.
func (r *Reconciler) Fleet() *spec.Fleet {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.fleet
}

// Detail returns what the reconciler knows of one server beyond its
// status. It changes nothing and signals nothing: the record is read as
// status and describe read it (an untrusted one stays where it is, for the
// worker to move aside). An unknown name is an *UnknownNameError.
func (r *Reconciler) Detail(_ context.Context, name string) (ServerDetail, error) {
	r.mu.Lock()
	s := r.servers[name]
	_, declared := r.desired[name]
	var d ServerDetail
	if s != nil {
		d.Status = s.st.status(name)
		d.Held = s.st.holds()
	}
	known := s != nil || declared
	var names []string
	if !known {
		names = make([]string, 0, len(r.servers)+len(r.desired))
		for n := range r.servers {
			names = append(names, n)
		}
		for n := range r.desired {
			names = append(names, n)
		}
	}
	r.mu.Unlock()
	if !known {
		return ServerDetail{}, unknownName(name, names, nil)
	}
	sd := r.cfg.StateDir
	if sd == nil {
		return d, nil
	}
	d.LogPath = sd.LogPath(name)
	rec, err := sd.InspectRecord(name)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		rv, ok := unreadableRecordView(err)
		if !ok {
			return d, fmt.Errorf("detail of server %s: %w", name, err)
		}
		d.Record = rv
	default:
		d.Record = verifiedRecordView(r.verify, rec)
	}
	// The transition whose state was read above held emitMu until its
	// events were in the file: once emitMu is free, the file has them.
	r.emitMu.Lock()
	//lint:ignore SA2001 a barrier: waits for the transition in progress
	r.emitMu.Unlock()
	evs, _, err := ReadEvents(sd.EventsPath(name), DetailEvents)
	if err != nil {
		return d, fmt.Errorf("detail of server %s: %w", name, err)
	}
	d.Events = evs
	return d, nil
}

// holds reports whether the state shows a process the reconciler tracks:
// one that reached Running through a readiness wait or an adoption (both
// keep the pin taken at spawn or adoption) and has not exited or stopped.
// A quarantined process is pinned for its exit only: not held.
func (s *state) holds() bool {
	return s.pid != 0 && (s.phase == PhaseRunning || s.phase == PhaseStopping)
}

// verifiedRecordView checks a record against the process at its pid, as
// Inspect and the worker do, and closes the pin Verify took.
func verifiedRecordView(verify func(actuate.Record) actuate.Verification, rec actuate.Record) *RecordView {
	v := verify(rec)
	if v.Handle != nil {
		_ = v.Handle.Close()
	}
	return &RecordView{Record: rec, Verdict: v.Verdict, Reason: v.Reason, Message: v.Message,
		Identity: v.Identity, Evidence: v.Evidence, Observed: ObservedFromRecord(rec, nil, v)}
}

// unreadableRecordView maps a record that cannot be trusted (rule 7) or
// was written by a newer procfleet (rule 6) to its view; false for any
// other error.
func unreadableRecordView(err error) (*RecordView, bool) {
	var ue *actuate.UntrustedRecordError
	var ne *actuate.NewerRecordError
	switch {
	case errors.As(err, &ue):
		return &RecordView{Record: actuate.Record{Name: ue.Name}, Untrusted: ue, Observed: ObservedFromRecord(actuate.Record{}, ue, actuate.Verification{})}, true
	case errors.As(err, &ne):
		return &RecordView{Record: actuate.Record{Name: ne.Name}, Newer: ne, Observed: ObservedFromRecord(actuate.Record{}, ne, actuate.Verification{})}, true
	}
	return nil, false
}

// ReadEvents returns the last n events of a server's events file (and its
// rotated copy), oldest first, and how many lines did not parse. A missing
// file means no events.
func ReadEvents(path string, n int) ([]Event, int, error) {
	lines, err := logfile.TailFiles([]string{logfile.RotatedPath(path, 1), path}, n)
	if err != nil {
		return nil, 0, fmt.Errorf("read events: %w", err)
	}
	evs := make([]Event, 0, len(lines))
	bad := 0
	for _, l := range lines {
		var e Event
		if err := json.Unmarshal([]byte(l), &e); err != nil || e.Reason == "" {
			bad++
			continue
		}
		evs = append(evs, e)
	}
	return evs, bad, nil
}
