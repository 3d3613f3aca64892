package reconciler

import (
	"os"
	"path/filepath"

	"github.com/procfleet/procfleet/internal/logfile"
)

// removeStaleLogs removes the logs and events files of the servers that
// have left the fleet and written nothing for logfile.DefaultStaleAge (a
// week). A server is kept while it is declared, tracked or recorded (a
// record written since the look included). It runs in the resync passes
// only, once the fleet watcher runs, and does nothing while the fleet files
// have errors: a server in a file that does not load is still the user's.
func (r *Reconciler) removeStaleLogs() {
	if r.cfg.StateDir == nil {
		return
	}
	r.mu.Lock()
	fw := r.fw
	keep := make(map[string]bool, len(r.desired)+len(r.servers))
	for n := range r.desired {
		keep[n] = true
	}
	for n := range r.servers {
		keep[n] = true
	}
	r.mu.Unlock()
	if fw == nil {
		return
	}
	if fleet, errs := fw.Fleet(); fleet == nil || len(errs) > 0 {
		return
	}
	sd := r.cfg.StateDir
	removed, err := logfile.RemoveStale(filepath.Dir(sd.LogPath("x")), func(name string) bool {
		if keep[name] {
			return true
		}
		_, err := os.Lstat(sd.RecordPath(name))
		return err == nil
	}, 0, r.clock.Now())
	for _, p := range removed {
		r.log.Info("Removed the log of a server gone from the fleet for a week", "path", p)
	}
	if err != nil {
		r.log.Error(err, "Cannot remove the logs of servers gone from the fleet")
	}
}
