package reconciler

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"sort"
	"time"

	"github.com/procfleet/procfleet/spec"
)

// holdsFile is the file of the state folder that lists the servers that
// `stop NAME` (or `down NAME`) keeps stopped, so that a later or restarted
// up keeps them stopped too.
const holdsFile = "held.json"

// holdsVersion is the version of held.json this procfleet writes and reads.
const holdsVersion = 1

// holdsDoc is held.json.
type holdsDoc struct {
	Version int                  `json:"version"`
	Servers map[string]holdEntry `json:"servers"`
}

// holdEntry is one server kept stopped.
type holdEntry struct {
	// Since is when it was stopped.
	Since time.Time `json:"since"`
	// Fingerprint hashes the server's declaration (every field, and what
	// its env files set) when it was stopped: a change made while no up
	// watched the files lifts the hold as a change under up does. Empty
	// for a server that was not declared.
	Fingerprint string `json:"fingerprint,omitempty"`
}

// holdsPath is held.json's path; "" without a state folder.
func (r *Reconciler) holdsPath() string {
	if r.cfg.StateDir == nil {
		return ""
	}
	return filepath.Join(r.cfg.StateDir.Path, holdsFile)
}

// readHolds reads held.json; a missing file holds nothing.
func readHolds(path string) (map[string]holdEntry, error) {
	if path == "" {
		return nil, nil
	}
	data, err := readStateFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var doc holdsDoc
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if doc.Version != holdsVersion {
		return nil, fmt.Errorf("read %s: version %d, this procfleet reads %d", path, doc.Version, holdsVersion)
	}
	return doc.Servers, nil
}

// serverFingerprint is a server's fingerprint (FleetWatcher's: every field
// and what its env files set) as a short hash.
func serverFingerprint(s *spec.Server) string {
	sum := sha256.Sum256(s.Fingerprint())
	return "sha256:" + hex.EncodeToString(sum[:])
}

// fingerprintFor is the fingerprint of the declared server that instance
// name belongs to, "" when none is declared.
func (r *Reconciler) fingerprintForLocked(name string) string {
	if d, ok := r.desired[name]; ok && d.Server != nil {
		return serverFingerprint(d.Server)
	}
	return ""
}

// loadHolds takes held.json in: every server it lists is kept stopped,
// but one whose declaration changed since it was stopped (edited while no
// up watched the files) is released, with an event saying so. A file that
// cannot be read holds nothing and is logged: the servers it named start.
func (r *Reconciler) loadHolds() {
	saved, err := readHolds(r.holdsPath())
	if err != nil {
		r.log.Error(err, "Cannot read the servers kept stopped; starting them as declared")
		return
	}
	var released []string
	r.mu.Lock()
	for name, e := range saved {
		if fp := r.fingerprintForLocked(name); e.Fingerprint != "" && fp != "" && fp != e.Fingerprint {
			released = append(released, name)
			continue
		}
		r.held[name] = true
		r.kept[name] = e
	}
	r.heldGen++
	r.mu.Unlock()
	if len(released) == 0 {
		return
	}
	sort.Strings(released)
	for _, n := range released {
		r.event(Event{Server: n, Type: EventNormal, Reason: ReasonStopLifted, Message: "no longer kept stopped: its fleet file or env file changed since 'procfleet stop'"})
	}
	r.saveHolds()
}

// keepLocked keeps the named servers stopped, in memory and (persist) in
// held.json once saveHolds runs.
func (r *Reconciler) keepLocked(names []string, persist bool, now time.Time) {
	r.heldGen++
	for _, n := range names {
		r.held[n] = true
		if persist {
			r.kept[n] = holdEntry{Since: now, Fingerprint: r.fingerprintForLocked(n)}
		}
	}
}

// liftLocked ends the holds of names; it reports whether held.json must be
// written again.
func (r *Reconciler) liftLocked(names []string) bool {
	r.heldGen++
	changed := false
	for _, n := range names {
		delete(r.held, n)
		if _, ok := r.kept[n]; ok {
			delete(r.kept, n)
			changed = true
		}
	}
	return changed
}

// liftAllLocked ends every hold (apply); it reports whether held.json must
// be written again.
func (r *Reconciler) liftAllLocked() bool {
	changed := len(r.kept) > 0
	r.held, r.kept = map[string]bool{}, map[string]holdEntry{}
	r.heldGen++
	return changed
}

// liftForChanges ends the holds of the instances of the servers whose
// files changed (names as FleetUpdate.Changed gives them), in the fleet in
// force before the change and after it.
func (r *Reconciler) liftForChanges(servers []string, next *spec.Fleet) {
	r.mu.Lock()
	var names []string
	for _, f := range []*spec.Fleet{r.fleet, next} {
		if f == nil {
			continue
		}
		for _, n := range servers {
			if s, ok := f.Get(n); ok {
				names = append(names, s.InstanceNames()...)
			}
		}
	}
	names = append(names, servers...)
	var lifted []string
	for _, n := range names {
		if r.held[n] {
			lifted = append(lifted, n)
		}
	}
	save := r.liftLocked(names)
	r.mu.Unlock()
	sort.Strings(lifted)
	for _, n := range lifted {
		r.event(Event{Server: n, Type: EventNormal, Reason: ReasonStopLifted, Message: "no longer kept stopped: its fleet file or env file changed"})
	}
	if save {
		r.saveHolds()
	}
}

// saveHolds writes held.json as the holds are now (removes it when none
// is kept). A write that fails is logged: the holds stay in force in this
// process, and a later up would start those servers.
func (r *Reconciler) saveHolds() {
	if err := r.writeHolds(); err != nil {
		r.log.Error(err, "Cannot save the servers kept stopped; a later up will start them")
	}
}

func (r *Reconciler) writeHolds() error {
	path := r.holdsPath()
	if path == "" {
		return nil
	}
	// One writer at a time, each writing what it read last: a write of an
	// older state never lands after a newer one.
	r.holdsMu.Lock()
	defer r.holdsMu.Unlock()
	r.mu.Lock()
	doc := holdsDoc{Version: holdsVersion, Servers: make(map[string]holdEntry, len(r.kept))}
	for n, e := range r.kept {
		doc.Servers[n] = e
	}
	r.mu.Unlock()
	if len(doc.Servers) == 0 {
		return r.cfg.StateDir.RemoveFile(path)
	}
	data, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return r.cfg.StateDir.WriteFile(path, append(data, '\n'), true)
}
