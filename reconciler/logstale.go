package reconciler

import (
	"os"
	"path/filepath"

	"github.com/procfleet/procfleet/internal/logfile"
)

// staleCheck is how the resync's look at the logs folder (tendLogs)
// removes the logs and events files of the servers that have left the
// fleet and written nothing for logfile.DefaultStaleAge (a week). A server
// is kept while it is declared, tracked or recorded (a record written since
// the look included). It is nil, and nothing is removed, before the fleet
// watcher runs and while the fleet files have errors: a server in a file
// that does not load is still the user's.
func (r *Reconciler) staleCheck() *logfile.StaleCheck {
	r.mu.Lock()
	fw := r.fw
	r.mu.Unlock()
	if fw == nil {
		return nil
	}
	if fleet, errs := fw.Fleet(); fleet == nil || len(errs) > 0 {
		return nil
	}
	return r.keepCheck()
}

// keepCheck is staleCheck without its conditions. Each name is looked up
// as the listing reaches it (no copy of the fleet's names per resync).
func (r *Reconciler) keepCheck() *logfile.StaleCheck {
	sd := r.cfg.StateDir
	return &logfile.StaleCheck{Keep: func(name string) bool {
		r.mu.Lock()
		_, declared := r.desired[name]
		_, known := r.servers[name]
		r.mu.Unlock()
		if declared || known {
			return true
		}
		_, err := os.Lstat(sd.RecordPath(name))
		return err == nil
	}, Now: r.clock.Now()}
}

// tendLogs is the resync's look at the logs folder, from one listing of
// it: the files of servers gone from the fleet for a week removed (stale,
// staleCheck's: none when nil), then the logs that have reached their limit rotated. It
// logs what goes wrong and goes on. Only the holder of the state folder's
// lock may call it (logfile.Rotate wants a single rotator).
func (r *Reconciler) tendLogs(stale *logfile.StaleCheck) {
	if r.cfg.StateDir == nil {
		return
	}
	rotated, removed, err := logfile.Maintain(filepath.Dir(r.cfg.StateDir.LogPath("x")), r.cfg.LogRotation, stale)
	for _, p := range removed {
		r.log.Info("Removed the log of a server gone from the fleet for a week", "path", p)
	}
	for _, p := range rotated {
		r.log.V(1).Info("Log rotated", "path", p)
	}
	if err != nil {
		r.log.Error(err, "Cannot look after the logs")
	}
}
