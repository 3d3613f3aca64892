package actuate

import (
	"errors"
	"fmt"
	"slices"

	"github.com/procfleet/procfleet/observe"
)

// RefreshCmdline follows a held process (one the caller has kept a pin on
// since it spawned or adopted it): it re-reads, through h, the command
// line and uid of rec's process and, when either changed (an exec, as a
// pyenv or nvm shim or a wrapper script ending in exec does; a retitle, as
// nginx, postgres or node do; a privilege drop), rewrites the record with
// the command line and uid of now, keeping the first command line as
// spawnCmdline, and sends CommandLineChanged naming both. It returns the
// record as it now is and whether it changed. Call it once the server is
// Ready (a shim has exec'd by then) and at resyncs.
//
// A process that has exited, or whose /proc cannot be read, changes
// nothing: rec is returned with an error.
func (a *Actuator) RefreshCmdline(rec Record, h *observe.Handle) (Record, bool, error) {
	if h == nil || h.PID() != rec.PID || rec.PID <= 0 {
		return rec, false, fmt.Errorf("refresh the command line of server %s: the held pin is not on its pid %d", rec.Name, rec.PID)
	}
	id, err := h.Identity()
	if err == nil && id.State.Exited() {
		err = fmt.Errorf("pid %d: %w", rec.PID, observe.ErrGone)
	}
	if err != nil {
		return rec, false, fmt.Errorf("refresh the command line of server %s: %w", rec.Name, err)
	}
	if len(id.Cmdline) == 0 && !h.Exited() {
		// An empty command line is a process between exec and its new
		// arguments, or a kernel thread: nothing to record.
		return rec, false, errors.New("refresh the command line of server " + rec.Name + ": empty command line")
	}
	if slices.Equal(id.Cmdline, rec.Cmdline) && id.UID == rec.UID {
		return rec, false, nil
	}
	next := rec
	if len(next.SpawnCmdline) == 0 {
		next.SpawnCmdline = slices.Clone(rec.Cmdline)
	}
	next.Cmdline = slices.Clone(id.Cmdline)
	next.UID = id.UID
	if err := a.Dir.WriteRecord(next); err != nil {
		return rec, false, fmt.Errorf("refresh the command line of server %s: %w", rec.Name, err)
	}
	msg := fmt.Sprintf("pid %d (held by %s since it started) now runs %s, was %s", rec.PID, h.Mode(), observe.FormatCmdline(id.Cmdline), observe.FormatCmdline(rec.Cmdline))
	if id.UID != rec.UID {
		msg += fmt.Sprintf(", as uid %d (was %d)", id.UID, rec.UID)
	}
	if !slices.Equal(next.SpawnCmdline, rec.Cmdline) {
		msg += "; spawned as " + observe.FormatCmdline(next.SpawnCmdline)
	}
	a.event(rec.Name, EventCommandLineChanged, msg+"; record rewritten")
	return next, true, nil
}
