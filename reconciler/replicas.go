package reconciler

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/procfleet/procfleet/spec"
)

// Replicas (DESIGN.md "Fleet files"): the desired state, the plan and the
// observation are keyed by instance ("api-0" ... "api-2", or "api" for a
// server without replicas); this file holds what ties the instances of one
// server together: their ports, the names a user gives, the readiness a
// dependent waits for, and the rolling replace.

// port is the instance's port (spec.port + index for a replica), 0 for
// none.
func (d Desired) port() int {
	switch {
	case d.Instance != nil:
		return d.Instance.Port
	case d.Server != nil:
		return d.Server.Spec.Port
	}
	return 0
}

// replicaOf is the name of the server d is a replica of, "" when d is not
// a replica.
func (d Desired) replicaOf() string {
	if d.Instance == nil {
		return ""
	}
	return d.Instance.ReplicaOf
}

// serverName is the name of the declared server d is an instance of.
func (d Desired) serverName() string {
	if d.Server == nil {
		return ""
	}
	return d.Server.Metadata.Name
}

// instanceNamesOf lists, per declared server, the names of its instances in
// index order: [name] for a server without replicas, none for replicas: 0.
func instanceNamesOf(f *spec.Fleet) map[string][]string {
	out := make(map[string][]string, len(f.Servers))
	for i := range f.Servers {
		out[f.Servers[i].Metadata.Name] = f.Servers[i].InstanceNames()
	}
	return out
}

// SplitInstance splits an instance name "<server>-<index>" into its
// server name and index; ok is false when name does not end in
// "-<digits>" (without a leading zero). A name of that shape is a replica
// only while its server declares replicas: the caller checks that.
func SplitInstance(name string) (server string, index int, ok bool) {
	i := strings.LastIndexByte(name, '-')
	if i <= 0 || i == len(name)-1 {
		return "", 0, false
	}
	n, err := strconv.Atoi(name[i+1:])
	if err != nil || n < 0 || strconv.Itoa(n) != name[i+1:] {
		return "", 0, false
	}
	return name[:i], n, true
}

// ExpandNames resolves the names a user gave to a verb into instance
// names, in the order given, each once. The name of a server with
// replicas stands for all its instances: those its spec declares
// (replicated maps it to them, in index order) and any other known
// instance of it (one scaled away that still runs), by index. Any other
// name must be known. An unknown name is an *UnknownNameError with the
// nearest known name. No name is ever matched by a guess: "api-3" stands
// for "api"'s replica only while "api" declares replicas.
func ExpandNames(names, known []string, replicated map[string][]string) ([]string, error) {
	knownSet := make(map[string]bool, len(known))
	for _, k := range known {
		knownSet[k] = true
	}
	var out []string
	seen := map[string]bool{}
	add := func(n string) {
		if !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	for _, n := range names {
		insts, isServer := replicated[n]
		if !isServer {
			if !knownSet[n] {
				return nil, unknownName(n, known, replicated)
			}
			add(n)
			continue
		}
		for _, in := range insts {
			add(in)
		}
		var extra []string
		for _, k := range known {
			if s, _, ok := SplitInstance(k); ok && s == n && !slices.Contains(insts, k) {
				extra = append(extra, k)
			}
		}
		sort.Slice(extra, func(i, j int) bool { return instanceLess(extra[i], extra[j]) })
		for _, k := range extra {
			add(k)
		}
	}
	return out, nil
}

func unknownName(n string, known []string, replicated map[string][]string) error {
	all := slices.Clone(known)
	for s := range replicated {
		all = append(all, s)
	}
	slices.Sort(all) // the nearest of equals is the first in name order
	e := &UnknownNameError{Name: n}
	if best, near := spec.NearestName(n, all); near {
		e.Nearest = best
	}
	return e
}

// instanceLess orders names as status groups them: by server, then by
// index, so that api-10 comes after api-9.
func instanceLess(a, b string) bool {
	as, ai, aok := SplitInstance(a)
	bs, bi, bok := SplitInstance(b)
	if aok && bok && as == bs {
		return ai < bi
	}
	return a < b
}

// replicatedLocked maps every declared server with spec.replicas to its
// instances, for ExpandNames. The caller holds r.mu.
func (r *Reconciler) replicatedLocked() map[string][]string {
	out := map[string][]string{}
	if r.fleet == nil {
		return out
	}
	for i := range r.fleet.Servers {
		if s := &r.fleet.Servers[i]; s.Spec.Replicas != nil {
			out[s.Metadata.Name] = r.instances[s.Metadata.Name]
		}
	}
	return out
}

// expandNames is ExpandNames over what the reconciler knows: the declared
// instances, the servers it remembers, and the records.
func (r *Reconciler) expandNames(names []string) ([]string, error) {
	known := r.names()
	r.mu.Lock()
	replicated := r.replicatedLocked()
	r.mu.Unlock()
	return ExpandNames(names, known, replicated)
}

// instanceNamesLocked lists the instances of server name (just name for a
// server without replicas, or one not declared). The caller holds r.mu.
func (r *Reconciler) instanceNamesLocked(name string) []string {
	if insts, ok := r.instances[name]; ok {
		return insts
	}
	return []string{name}
}

// readyLocked reports whether every instance of server name is Ready (for
// dependsOn). A server with replicas: 0 has none to wait for. The caller
// holds r.mu.
func (r *Reconciler) readyLocked(name string) bool {
	for _, in := range r.instanceNamesLocked(name) {
		s := r.servers[in]
		if s == nil || !s.st.shownReady() {
			return false
		}
	}
	return true
}

// shownReady reports a process that runs and is Ready.
func (s *state) shownReady() bool {
	return s.isReady && s.pid != 0 && s.phase == PhaseRunning
}

// Rollout is what the rolling replace of one replica depends on: the
// other instances of its server (those declared and not held stopped).
// At most one field is set: the first reason found to wait.
type Rollout struct {
	// NotReady names one that is not Ready (or not yet known to be).
	NotReady string
	// Before names one with a lower index that runs an older spec.
	Before string
}

// rolloutOf summarizes the other instances of d's server for d's rolling
// turn. names are the server's instances in index order; state tells
// whether one runs Ready, the spec hash it runs, and whether a restart
// asked of it is still to be carried out (a restart of api rolls as a spec
// change does: a lower index with one pending goes first). It stops at the first
// instance that makes the replica wait (one not Ready, or a lower one
// still to be replaced), so that it allocates nothing and, with every
// replica Ready, costs O(1) for all but the first: a resync over n
// replicas about to roll costs O(n), not O(n^2).
func rolloutOf(d Desired, names []string, desired map[string]Desired, state func(name string) (ready bool, hash string, restart bool)) Rollout {
	for j, n := range names {
		sd, declared := desired[n]
		if n == d.Instance.Name || !declared || sd.Held {
			continue
		}
		switch ready, hash, restart := state(n); {
		case !ready:
			return Rollout{NotReady: n}
		case j < d.Instance.Index && (hash != sd.Hash || restart):
			return Rollout{Before: n}
		}
	}
	return Rollout{}
}

// rolloutLocked is rolloutOf over the reconciler's memory of each
// instance. The caller holds r.mu.
func (r *Reconciler) rolloutLocked(d Desired, desired map[string]Desired) *Rollout {
	ro := rolloutOf(d, r.instances[d.replicaOf()], desired, func(n string) (bool, string, bool) {
		s := r.servers[n]
		if s == nil {
			return false, "", false
		}
		req := r.requests[n]
		return s.st.shownReady(), s.st.hash, req.restart && req.seq > s.taken
	})
	return &ro
}

// rollingTurn reports whether the pass of d's instance must know its
// Rollout: it is a replica running a spec other than the declared one, or
// one a restart asks to replace.
func rollingTurn(d Desired, o Observed) bool {
	return d.replicaOf() != "" && o.running() && !o.Starting && (o.SpecHash != d.Hash || d.Restart)
}

// rollingWait says why the replace of a replica that runs an older spec
// must wait for its turn, or "" when it may go now (DESIGN.md: one
// instance at a time, the next only once the replaced one is Ready again,
// so at most one is down). A replica that is down itself (not Ready, and
// its readiness known) goes at once: replacing it takes nothing away. A
// Ready one waits while another instance of its server is not Ready (or
// not yet known to be), and while one with a lower index still runs an
// older spec, so that the replicas go in index order. A replica without
// its Rollout waits. It is pure.
func rollingWait(d Desired, o Observed) string {
	switch {
	case d.replicaOf() == "" || (!o.Ready && !o.ReadyUnknown):
		return ""
	case o.Rollout == nil:
		return "rolling replace: waits for its turn"
	case o.Rollout.NotReady != "":
		return "rolling replace: waits for " + o.Rollout.NotReady + " to be Ready"
	case o.Rollout.Before != "":
		return "rolling replace: waits for " + o.Rollout.Before + " to be replaced first"
	}
	return ""
}

// noteRolling remembers whether instance name waits for its rolling turn,
// so that the next instance of its server to become Ready (or to stop)
// wakes it.
func (r *Reconciler) noteRolling(name string, waits bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !waits {
		delete(r.rolling, name)
		return
	}
	if r.rolling == nil {
		r.rolling = map[string]bool{}
	}
	r.rolling[name] = true
}

// rollingWaitersLocked returns the replica of server to wake when another
// of its instances became Ready or stopped: the waiting one with the
// lowest index, the only one whose turn it can be (the others wait for it
// to be replaced first). Waking one, not all, keeps a rolling replace of
// n replicas at O(n) passes. The caller holds r.mu.
func (r *Reconciler) rollingWaitersLocked(server string) []string {
	next, at := "", -1
	for n := range r.rolling {
		if d, ok := r.desired[n]; ok && d.replicaOf() == server && (at < 0 || d.Instance.Index < at) {
			next, at = n, d.Instance.Index
		}
	}
	if next == "" {
		return nil
	}
	return []string{next}
}

// enqueueServers marks dirty every instance of the named servers.
func (r *Reconciler) enqueueServers(names []string) {
	var all []string
	r.mu.Lock()
	for _, n := range names {
		all = append(all, r.instanceNamesLocked(n)...)
	}
	r.mu.Unlock()
	for _, n := range all {
		r.queue.Add(n)
	}
}

// rollingBlockerLocked names an instance of d's server, other than name,
// that was given up on (Failed or Quarantined): a rolling turn that waits
// for it waits in vain. The caller holds r.mu.
func (r *Reconciler) rollingBlockerLocked(name string, d Desired) string {
	for _, sib := range r.instances[d.replicaOf()] {
		if s := r.servers[sib]; s != nil && sib != name && (s.st.phase == PhaseFailed || s.st.phase == PhaseQuarantined) {
			return sib
		}
	}
	return ""
}

// setReplica fills ReplicaOf and Index for a replica: from its declared
// instance, or, for one no longer declared (scaled away, still stopping),
// from its name when its server still declares replicas.
func (ss *ServerStatus) setReplica(d Desired, instances map[string][]string) {
	if in := d.Instance; in != nil {
		if in.Replicated() {
			i := in.Index
			ss.ReplicaOf, ss.Index = in.ReplicaOf, &i
		}
		return
	}
	if d.Server != nil {
		return
	}
	if server, i, ok := SplitInstance(ss.Name); ok {
		if _, declared := instances[server]; declared && !slices.Contains(instances[server], server) {
			ss.ReplicaOf, ss.Index = server, &i
		}
	}
}

// isReplicaOf reports whether name is named as a replica of server
// ("api-1" of "api"). It only orders stops (a dependent of "api" stops
// before "api-1"); it never decides what to signal.
func isReplicaOf(name, server string) bool {
	s, _, ok := SplitInstance(name)
	return ok && s == server
}

// scaledAway says why replica name is no longer declared when its server
// still runs replicas ("scaled down: api declares 2 replicas"); "" when
// that is not why.
func scaledAway(name string, desired map[string]Desired) string {
	server, _, ok := SplitInstance(name)
	if !ok {
		return ""
	}
	d, ok := desired[spec.InstanceName(server, 0)]
	if !ok || d.replicaOf() != server || d.Server.Spec.Replicas == nil {
		return ""
	}
	return fmt.Sprintf("scaled down: %s declares %d replicas", server, *d.Server.Spec.Replicas)
}
