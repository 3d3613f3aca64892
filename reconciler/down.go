package reconciler

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/go-logr/logr"
	"k8s.io/utils/clock"

	"github.com/procfleet/procfleet/actuate"
	"github.com/procfleet/procfleet/internal/api"
	"github.com/procfleet/procfleet/spec"
)

// DownConfig configures Down.
type DownConfig struct {
	// Files are the fleet files; their dependsOn orders the stops and their
	// timeouts bound them. Files that do not load leave the order unknown:
	// every server is then stopped at once, and the log says so.
	Files []string
	// StateDir is the state folder. Required.
	StateDir *actuate.StateDir
	Log      logr.Logger
	// OnEvent receives progress events. Nil means none.
	OnEvent func(Event)
	// Actuator replaces actuate.Actuator (tests). Nil means the real one.
	Actuator Actuator
	// Clock stamps events. Nil means the real clock.
	Clock clock.WithTicker
}

// DownError names the servers that could not be stopped, and why.
type DownError struct {
	Servers map[string]error
}

func (e *DownError) Error() string {
	names := make([]string, 0, len(e.Servers))
	for n := range e.Servers {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	fmt.Fprintf(&b, "%d server(s) could not be stopped", len(names))
	for _, n := range names {
		fmt.Fprintf(&b, "\n  %s: %v", n, e.Servers[n])
	}
	return b.String()
}

// Unwrap returns the errors.
func (e *DownError) Unwrap() []error {
	out := make([]error, 0, len(e.Servers))
	for _, err := range e.Servers {
		out = append(out, err)
	}
	return out
}

// UnknownNameError is a server name that is neither declared nor recorded.
type UnknownNameError struct {
	Name string
	// Nearest is the known name nearest to Name, "" when none is near.
	Nearest string
}

func (e *UnknownNameError) Error() string {
	if e.Nearest != "" {
		return fmt.Sprintf("no server named %s (did you mean %s?)", e.Name, e.Nearest)
	}
	return "no server named " + e.Name
}

// Is makes an unknown name api.ErrNotFound for the API.
func (e *UnknownNameError) Is(target error) bool { return target == api.ErrNotFound }

// Down stops the named servers, or every server with a record when names is
// empty, without a running up (the caller holds the state folder's lock).
// It is DownServers on a reconciler of its own: dependents first,
// independent servers in parallel, each with the full stop sequence (which
// signals only what it proves is ours), every signal's evidence in the
// server's events file. The error is a *DownError naming each server that
// could not be stopped, or an *UnknownNameError.
func Down(ctx context.Context, cfg DownConfig, names []string) error {
	if cfg.StateDir == nil {
		return errors.New("down: StateDir is required")
	}
	r, err := New(Config{Files: cfg.Files, StateDir: cfg.StateDir, Log: cfg.Log, OnEvent: cfg.OnEvent,
		Actuator: cfg.Actuator, Clock: cfg.Clock, ResyncPeriod: -1})
	if err != nil {
		return err
	}
	_, err = r.Down(ctx, names)
	return err
}

// Down is DownServers for a reconciler that is not running (`procfleet
// down` without up): it loads the fleet files for the order and timeouts,
// reconciles only the servers it stops, and records their new status in
// status.json, leaving the other servers' entries as they were.
func (r *Reconciler) Down(ctx context.Context, names []string) (Status, error) {
	// Without names the targets are the recorded servers: the records are
	// read while the fleet files load, since neither read needs the other.
	// What the records' read found untrusted is posted once the servers are
	// set up, as downTargets does.
	var listed chan recordList
	if len(names) == 0 {
		// The stops take the records it reads, where unchanged.
		r.recScan.keep = true
		listed = make(chan recordList, 1)
		go func() {
			var l recordList
			l.names, l.errs = r.recordNames()
			listed <- l
		}()
	}
	fleet, err := spec.Load(r.cfg.Files...)
	if err != nil {
		r.log.Info("Fleet files do not load; stopping without dependency order", "error", err.Error())
		fleet = &spec.Fleet{}
	}
	r.setDesired(fleet, nil)
	// status.json is read once: for setup, and to merge the stopped
	// servers' entries into at the end (no other process writes it while
	// this one holds the lock, and Down runs no status writer).
	saved := r.savedStatus()
	serr := r.setupWith(saved)
	var l recordList
	if listed != nil {
		// Awaited even when setup failed: the read may move records aside,
		// which only the lock's holder may do, so it ends before Down does.
		l = <-listed
	}
	if serr != nil {
		return Status{}, serr
	}
	var targets []string
	if listed != nil {
		targets = r.recordedTargets(l.names, l.errs)
	} else if targets, err = r.downTargets(names); err != nil {
		return Status{}, err
	}
	// Stops mostly wait (for the grace period, for the port): one worker
	// each, so that a fleet stops in parallel; each keeps its server's
	// events file open through its three events.
	r.cfg.Workers = max(1, min(len(targets), maxDownWorkers))
	if r.events != nil {
		r.events.limit = downEventFiles(len(targets), openFileLimit())
	}
	wctx, cancel := context.WithCancel(context.Background())
	workers := r.startWorkers(wctx)
	st, derr := r.stopAndWait(ctx, targets, len(names) > 0)
	r.teardown(workers)
	cancel()
	if r.cfg.StateDir != nil {
		if err := mergeSavedStatus(r.cfg.StateDir.StatusPath(), saved, r.Status(), targets); err != nil {
			r.statusFault.failed(r.log, err, "Cannot write status")
		}
	}
	return st, derr
}

// recordList is what recordNames found.
type recordList struct {
	names []string
	errs  []error
}

// maxDownWorkers bounds the parallel stops of one standalone down.
const maxDownWorkers = 1024

// maxDownEventFiles bounds the events files a standalone down keeps open
// at once (a stopped server's is closed: eventFiles.rest). With a pidfd
// per stop, a down of 1,000 holds some 2,000 descriptors.
const maxDownEventFiles = 1024

// downEventFiles is how many events files a down of n servers keeps open:
// one a server up to maxDownEventFiles, and never more than a quarter of
// the descriptor limit (limit, 0 when unknown), which the stops' pidfds
// and the cgroups' descriptors share; never fewer than up keeps.
func downEventFiles(n, limit int) int {
	keep := min(n, maxDownEventFiles)
	if limit > 0 {
		keep = min(keep, limit/4)
	}
	return max(maxOpenEventFiles, keep)
}

// downTargets is names checked against the known servers (a server's
// name standing for all its instances), or every server with a record (or
// an untrusted one) when names is empty.
func (r *Reconciler) downTargets(names []string) ([]string, error) {
	if len(names) > 0 {
		return r.expandNames(names)
	}
	if r.fw != nil {
		return r.names(), nil // under up: every server it knows
	}
	recorded, errs := r.recordNames()
	return r.recordedTargets(recorded, errs), nil
}

// recordedTargets is every server of a records' read (recordNames) that
// has a record, or had an untrusted one, and every server quarantined, in
// order. Each record is read once to list it; the stop reads it again
// unless its file is unchanged since (recordScan.take).
func (r *Reconciler) recordedTargets(recorded []string, errs []error) []string {
	set := map[string]bool{}
	r.addListed(set, recorded, errs)
	r.mu.Lock()
	for n, s := range r.servers {
		if len(s.inbox) > 0 || s.st.phase == PhaseQuarantined {
			set[n] = true // an untrusted record was found
		}
	}
	r.mu.Unlock()
	out := make([]string, 0, len(set))
	for n := range set {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// stopAndWait holds the declared targets stopped (persist: in held.json
// too, as stop does), stops every target (dependents first) and waits
// until each has stopped or could not be.
func (r *Reconciler) stopAndWait(ctx context.Context, targets []string, persist bool) (Status, error) {
	return r.waitStopped(ctx, r.takeStop(targets, persist))
}

// mergeStatus writes, into the status.json at path (when there is one), the
// entries of names from st, keeping every other server's entry; a name st
// no longer lists (stopped and not declared: forgotten) loses its entry.
func mergeStatus(path string, st Status, names []string) error {
	saved, err := ReadStatus(path)
	if err != nil {
		return nil // no status.json: nothing to keep true
	}
	return mergeSavedStatus(path, &saved, st, names)
}

// mergeSavedStatus is mergeStatus into saved, the status.json at path as
// read before (nil: there was none, nothing is written). It changes saved.
func mergeSavedStatus(path string, saved *Status, st Status, names []string) error {
	if saved == nil {
		return nil
	}
	byName := make(map[string]ServerStatus, len(saved.Servers))
	for _, ss := range saved.Servers {
		byName[ss.Name] = ss
	}
	for _, n := range names {
		ss, ok := st.Get(n)
		if !ok {
			delete(byName, n)
			continue
		}
		ss.Events = nil
		byName[n] = ss
	}
	saved.Servers = saved.Servers[:0]
	for _, ss := range byName {
		saved.Servers = append(saved.Servers, ss)
	}
	sort.Slice(saved.Servers, func(i, j int) bool { return saved.Servers[i].Name < saved.Servers[j].Name })
	return WriteStatus(path, *saved)
}
