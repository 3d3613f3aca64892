package reconciler

import (
	"maps"
	"slices"

	"github.com/procfleet/procfleet/spec"
)

// applyUpdate makes a fleet update from the file watcher the desired state
// and marks dirty the instances it can make act: the passes a save costs
// are those of the servers it changed (and their dependents), not of the
// fleet. Like a resync it also looks at the records folder (only the
// records that changed are read): a record found untrusted or foreign is
// posted to its server, and a record of a server this reconciler has no
// memory of gets a pass. Every server is still looked at by the next
// resync and by Reload. An update leaves desiredGen as it is: a server it
// does not touch plans as before, so its rest (resync.go) stands.
func (r *Reconciler) applyUpdate(u FleetUpdate) {
	// A change of a server's files lifts its stop (down, stop).
	r.liftForChanges(u.Changed, u.Fleet)
	touched := r.setDesiredChanged(u.Fleet, u.Errors, u.Changed)
	if len(u.Changed) == 0 {
		return
	}
	for _, n := range touched {
		r.queue.Add(n)
	}
	known := r.names()
	r.mu.Lock()
	var unseen []string
	for _, n := range known {
		if _, ok := r.servers[n]; !ok {
			unseen = append(unseen, n)
		}
	}
	r.mu.Unlock()
	for _, n := range unseen {
		r.queue.Add(n)
	}
}

// setDesiredChanged installs f as the desired state, where only the
// servers named in changed (FleetUpdate.Changed) differ in content from the
// fleet in force, and returns the instances the change touches
// (touchedBy), the changed ones first.
//
// The entries of unchanged instances are kept as they were, Server and
// Instance pointers included: what a worker remembers about the
// declaration it last acted on (startedFor) stays true without a pass.
// A kept entry's Server may carry an older Source (its position in the
// file moves when a server above it grows); nothing the reconciler
// decides reads the position. The entries of changed instances point to
// copies of their server and instance, not into f, so that keeping an
// entry across later updates never keeps a whole older fleet alive.
func (r *Reconciler) setDesiredChanged(f *spec.Fleet, errs spec.ErrorList, changed []string) []string {
	r.mu.Lock()
	old, oldInsts := r.desired, r.instances
	d, insts := desiredUpdated(old, oldInsts, f, changed, r.cfg.OneShot)
	r.fleet, r.desired, r.instances, r.errs = f, d, insts, errs
	r.dependents = nil
	touched := touchedBy(changed, old, d, slices.Collect(maps.Keys(r.servers)))
	r.mu.Unlock()
	r.kickStatus()
	return touched
}

// desiredUpdated is desiredOf(f) and instanceNamesOf(f), keeping the
// entries of old (and oldInsts) for the servers not in changed. It is
// pure.
func desiredUpdated(old map[string]Desired, oldInsts map[string][]string, f *spec.Fleet, changed []string, oneShot bool) (map[string]Desired, map[string][]string) {
	if len(changed) == 0 && old != nil {
		return old, oldInsts
	}
	isChanged := make(map[string]bool, len(changed))
	for _, c := range changed {
		isChanged[c] = true
	}
	all := f.Instances()
	d := make(map[string]Desired, len(all))
	for i := range all {
		in := &all[i]
		server := in.Server.Metadata.Name
		if o, ok := old[in.Name]; ok && !isChanged[server] && o.serverName() == server && o.Instance != nil {
			d[in.Name] = o
			continue
		}
		sv := *in.Server
		ci := *in
		ci.Server = &sv
		d[in.Name] = Desired{Server: &sv, Instance: &ci, Hash: ci.Hash, OneShot: oneShot}
	}
	insts := make(map[string][]string, len(f.Servers))
	for i := range f.Servers {
		s := &f.Servers[i]
		name := s.Metadata.Name
		if o, ok := oldInsts[name]; ok && !isChanged[name] {
			insts[name] = o
			continue
		}
		insts[name] = s.InstanceNames()
	}
	return d, insts
}

// touchedBy lists the instances whose plan a change of the servers named
// in changed can alter: every instance of a changed server, declared
// before (old) or now (cur), or only known (present: tracked or recorded,
// like a replica scaled away earlier that is still stopping), and every
// instance that depends on a changed server (its start waits for that
// server's instances, however many there are now). The changed servers'
// instances come first, each list sorted. It is pure.
func touchedBy(changed []string, old, cur map[string]Desired, present []string) []string {
	if len(changed) == 0 {
		return nil
	}
	isChanged := make(map[string]bool, len(changed))
	for _, c := range changed {
		isChanged[c] = true
	}
	seen := map[string]bool{}
	var own, deps []string
	ofChanged := func(name string) bool {
		declared := false
		for _, m := range []map[string]Desired{old, cur} {
			if d, ok := m[name]; ok && d.Server != nil {
				declared = true
				if isChanged[d.serverName()] {
					return true
				}
			}
		}
		if declared {
			return false
		}
		server, _, ok := SplitInstance(name)
		return isChanged[name] || ok && isChanged[server]
	}
	consider := func(name string) {
		if seen[name] {
			return
		}
		seen[name] = true
		if ofChanged(name) {
			own = append(own, name)
			return
		}
		if d, ok := cur[name]; ok && d.Server != nil {
			for _, dep := range d.Server.Spec.DependsOn {
				if isChanged[dep] {
					deps = append(deps, name)
					return
				}
			}
		}
	}
	for _, m := range []map[string]Desired{old, cur} {
		for name := range m {
			consider(name)
		}
	}
	for _, name := range present {
		consider(name)
	}
	slices.Sort(own)
	slices.Sort(deps)
	return append(own, deps...)
}
