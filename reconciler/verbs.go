package reconciler

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"time"

	"github.com/procfleet/procfleet/internal/api"
	"github.com/procfleet/procfleet/spec"
)

// Verb is a request on named servers: the CLI's stop, start and restart,
// made through up's socket, the dashboard's buttons, or by the command
// itself without up (Act). Only names cross: never a spec or a command.
type Verb uint8

// The verbs.
const (
	// VerbStop stops the servers and keeps them stopped (a hold, saved in
	// the state folder) until start, restart, apply or a change to their
	// files.
	VerbStop Verb = iota + 1
	// VerbStart lifts the holds of the servers and of what they depend on,
	// and starts those that are not running at once: their last exit,
	// restart policy and crash backoff are set aside.
	VerbStart
	// VerbRestart is VerbStart, and a server of the names that runs is
	// replaced now (graceful stop, port released, fresh start); its
	// dependents are not touched. A quarantined server refuses it.
	VerbRestart
)

var verbNames = [...]string{VerbStop: "stop", VerbStart: "start", VerbRestart: "restart"}

func (v Verb) String() string {
	if int(v) < len(verbNames) && verbNames[v] != "" {
		return verbNames[v]
	}
	return fmt.Sprintf("Verb(%d)", v)
}

// ParseVerb returns the verb called s ("stop", "start", "restart").
func ParseVerb(s string) (Verb, error) {
	for v, n := range verbNames {
		if n != "" && n == s {
			return Verb(v), nil
		}
	}
	return 0, fmt.Errorf("%w: unknown verb %q (want stop, start or restart)", api.ErrInvalid, s)
}

// Reasons of the verbs.
const (
	// ReasonStopLifted: a hold of stop ended because the server's files
	// changed.
	ReasonStopLifted = "StopLifted"
	// reasonStartRequested and reasonRestartRequested explain a start or
	// replace that a request made.
	reasonStartRequested   = "start requested"
	reasonRestartRequested = "restart requested"
)

// RefusedError is a request the reconciler will not carry out on a server,
// and why. It is api.ErrFailed for the API.
type RefusedError struct {
	Verb   Verb
	Server string
	// Why says what keeps it from being done, and what a person can do.
	Why string
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("%s %s refused: %s", e.Verb, e.Server, e.Why)
}

// Is makes a refusal api.ErrFailed.
func (e *RefusedError) Is(target error) bool { return target == api.ErrFailed }

// startAsk is a start or restart asked of one server, not yet taken by
// its worker. seq orders the requests: the worker records the last one it
// took (server.taken).
type startAsk struct {
	seq     uint64
	restart bool
}

// Request is a verb the reconciler has taken: the holds and requests are
// in place, the servers enqueued. Wait tells how it ends.
type Request struct {
	r *Reconciler
	// Verb is what was asked.
	Verb Verb
	// Names are the servers named, sorted; Targets every server the
	// request acts on and waits for (start and restart add what the names
	// depend on), sorted.
	Names, Targets []string
	since          uint64
	began          time.Time
}

// Stop stops the named servers, dependents first, and keeps the declared
// ones stopped until start, restart, apply or a change to their files (a
// hold saved in the state folder, so a restarted up keeps it). It returns
// once the request is taken; Wait on the Request for the outcome. An
// unknown name is an *UnknownNameError (api.ErrNotFound).
func (r *Reconciler) Stop(ctx context.Context, names []string) (*Request, error) {
	return r.take(ctx, VerbStop, names)
}

// Start lifts the holds of the named servers and of those they depend on
// (transitively), and starts each of them that is not running, dependencies
// first, at once: a last exit, restart policy or crash backoff does not
// keep it back. It returns once the request is taken. An unknown name is an
// *UnknownNameError, a server not in the fleet files a *RefusedError.
func (r *Reconciler) Start(ctx context.Context, names []string) (*Request, error) {
	return r.take(ctx, VerbStart, names)
}

// Restart is Start, and each named server that runs is replaced now:
// stopped gracefully (with escalation, its port released), then started
// afresh (restart count reset, crash backoff skipped); servers that depend
// on it are not restarted. A quarantined server refuses it
// (*RefusedError, saying why). It returns once the request is taken.
func (r *Reconciler) Restart(ctx context.Context, names []string) (*Request, error) {
	return r.take(ctx, VerbRestart, names)
}

// take puts a verb's holds or requests in place and enqueues its targets.
func (r *Reconciler) take(_ context.Context, verb Verb, names []string) (*Request, error) {
	if len(names) == 0 {
		return nil, fmt.Errorf("%w: %s: no server named", api.ErrInvalid, verb)
	}
	r.mu.Lock()
	acting := r.acting
	r.mu.Unlock()
	if !acting {
		return nil, fmt.Errorf("%s: the reconciler is not running", verb)
	}
	names, err := r.expandNames(names)
	if err != nil {
		return nil, err
	}
	names = slices.Compact(slices.Sorted(slices.Values(names)))
	if verb == VerbStop {
		return r.takeStop(names, true), nil
	}
	now := r.clock.Now()
	r.mu.Lock()
	if err := r.refuseLocked(verb, names); err != nil {
		r.mu.Unlock()
		return nil, err
	}
	q := &Request{r: r, Verb: verb, Names: names, Targets: withDependencies(names, r.desired, r.instances), since: r.begun, began: now}
	save := r.liftLocked(q.Targets)
	for _, n := range q.Targets {
		r.reqSeq++
		req := startAsk{seq: r.reqSeq, restart: verb == VerbRestart && slices.Contains(names, n)}
		if prev, ok := r.requests[n]; ok && r.serverTakenLocked(n) < prev.seq {
			req.restart = req.restart || prev.restart // a restart not yet taken stays one
		}
		r.requests[n] = req
	}
	r.mu.Unlock()
	if save {
		r.saveHolds()
	}
	for _, n := range q.Targets {
		r.queue.Add(n)
	}
	r.notifyChange()
	return q, nil
}

// refuseLocked returns a *RefusedError for the first name the verb cannot
// act on: one not declared in the fleet files (start and restart start only
// what the files declare), and for restart a quarantined one.
func (r *Reconciler) refuseLocked(verb Verb, names []string) error {
	for _, n := range names {
		if d, ok := r.desired[n]; !ok || d.Server == nil {
			return &RefusedError{Verb: verb, Server: n, Why: "it is not in the fleet files (add it there, then 'procfleet apply')"}
		}
		if s := r.servers[n]; verb == VerbRestart && s != nil && s.st.phase == PhaseQuarantined {
			ss := s.st.status(n)
			return &RefusedError{Verb: verb, Server: n, Why: fmt.Sprintf("it is %s; procfleet signals nothing it cannot prove it owns ('procfleet describe %s' says how to stop it by hand)", PhaseSummary(ss), n)}
		}
	}
	return nil
}

func (r *Reconciler) serverTakenLocked(name string) uint64 {
	if s := r.servers[name]; s != nil {
		return s.taken
	}
	return 0
}

// takeStop holds the targets stopped (persist: in held.json too), asks
// for their stop (dependents first) and enqueues them.
func (r *Reconciler) takeStop(targets []string, persist bool) *Request {
	now := r.clock.Now()
	r.mu.Lock()
	if r.stopping == nil {
		r.stopping = map[string][]string{}
	}
	var declared []string
	for _, n := range targets {
		var deps []string
		if d, ok := r.desired[n]; ok && d.Server != nil {
			declared = append(declared, n)
			deps = d.Server.Spec.DependsOn
		}
		r.setStoppingLocked(n, deps)
		delete(r.requests, n)
	}
	r.keepLocked(declared, persist, now)
	q := &Request{r: r, Verb: VerbStop, Names: targets, Targets: targets, since: r.begun, began: now}
	r.mu.Unlock()
	if persist && len(declared) > 0 {
		r.saveHolds()
	}
	for _, n := range targets {
		r.queue.Add(n)
	}
	return q
}

// setStoppingLocked lists n in stopping with what it depends on.
func (r *Reconciler) setStoppingLocked(n string, deps []string) {
	r.unstopLocked(n)
	r.stopping[n] = deps
	if len(deps) > 0 {
		r.stoppingDeps++
	}
}

// unstopLocked takes n out of stopping.
func (r *Reconciler) unstopLocked(n string) {
	if deps, ok := r.stopping[n]; ok {
		if len(deps) > 0 {
			r.stoppingDeps--
		}
		delete(r.stopping, n)
	}
}

// withDependencies is names and everything they depend on, transitively,
// in the declared fleet, sorted; a dependency on a server with replicas
// is one on each of its instances.
func withDependencies(names []string, desired map[string]Desired, instances map[string][]string) []string {
	set := map[string]bool{}
	var visit func(string)
	visit = func(n string) {
		if set[n] {
			return
		}
		set[n] = true
		if d, ok := desired[n]; ok && d.Server != nil {
			for _, dep := range d.Server.Spec.DependsOn {
				insts, ok := instances[dep]
				if !ok {
					insts = []string{dep}
				}
				for _, in := range insts {
					visit(in)
				}
			}
		}
	}
	for _, n := range names {
		visit(n)
	}
	return slices.Sorted(maps.Keys(set))
}

// Wait waits until every target has settled as the verb wants, or ctx
// ends. stop: nothing of it runs (else a *DownError naming why, as down).
// start and restart: Ready, or given up on as apply --wait gives up (a
// second exit before Ready, Failed, Quarantined); else a
// *NotConvergedError naming each target that is not Ready and why (with
// ctx's error when it ended first).
func (q *Request) Wait(ctx context.Context) (Status, error) {
	if q.Verb == VerbStop {
		return q.r.waitStopped(ctx, q)
	}
	return q.wait(ctx, settleWait)
}

// WaitRunning is Wait for start and restart without --wait: it returns
// once every target runs (spawned), or was given up on.
func (q *Request) WaitRunning(ctx context.Context) (Status, error) {
	if q.Verb == VerbStop {
		return q.Wait(ctx)
	}
	return q.wait(ctx, settleApply)
}

func (q *Request) wait(ctx context.Context, mode settleMode) (Status, error) {
	bad, why, cause := q.r.waitSettled(ctx, q.Targets, q.since, q.began, mode)
	st := q.r.Status()
	if len(bad) == 0 {
		return st, nil
	}
	return st, &NotConvergedError{Servers: bad, Why: why, Cause: cause}
}

// waitStopped waits for a stop's targets; the error is a *DownError.
func (r *Reconciler) waitStopped(ctx context.Context, q *Request) (Status, error) {
	bad, _, cause := r.waitSettled(ctx, q.Targets, q.since, q.began, settleDown)
	r.mu.Lock()
	for _, n := range q.Targets {
		r.unstopLocked(n)
	}
	r.mu.Unlock()
	st := r.Status()
	if len(bad) == 0 {
		return st, nil
	}
	failed := make(map[string]error, len(bad))
	for n, why := range bad {
		if cause != nil {
			failed[n] = fmt.Errorf("not stopped yet (%s): %w", why, cause)
			continue
		}
		failed[n] = errors.New(why)
	}
	return st, &DownError{Servers: failed}
}

// requestTaken reports whether a pass that planned a for a server asked to
// start (or restart) carried the request out: it starts or replaces the
// server, or finds it running and with nothing to replace. A wait (for a
// dependency, for the port), a quarantine, or the adoption of a replica
// whose rolling restart follows keeps the request pending.
func requestTaken(a Action, o Observed) bool {
	switch a.Kind {
	case ActionStart, ActionReplace:
		return true
	case ActionAdopt:
		return !a.Rolling
	case ActionNothing:
		return o.running()
	}
	return false
}

// verbThroughAPI takes a verb asked over the socket and, with wait, waits
// for it (timeout 0: only ctx bounds it). A stop always waits: up answers
// once the servers are stopped, as down does.
func (r *Reconciler) verbThroughAPI(ctx context.Context, verb string, names []string, wait bool, timeout time.Duration) (Status, error) {
	v, err := ParseVerb(verb)
	if err != nil {
		return Status{}, err
	}
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	q, err := r.take(ctx, v, names)
	if err != nil {
		return Status{}, err
	}
	if !wait && v != VerbStop {
		return only(r.Status(), q.Targets), nil
	}
	st, err := q.Wait(ctx)
	return only(st, q.Targets), err
}

// Act carries out one verb without a running up: `procfleet stop`,
// `start` and `restart` when nothing answers on the socket (the caller
// holds the state folder's lock). It loads the fleet files (stop goes on
// without them, as down does, unordered), takes the verb as up takes it,
// waits for it (ready: for Ready, as apply --wait; else start and restart
// return once the servers run), and writes the targets' new status into
// status.json, leaving the other servers' entries and processes as they
// were. Set Config.OneShot for apply's give-up rules.
func (r *Reconciler) Act(ctx context.Context, verb Verb, names []string, ready bool) (Status, error) {
	fleet, err := spec.Load(r.cfg.Files...)
	if err != nil {
		if verb != VerbStop {
			return Status{Errors: statusErrors(asErrorList(err))}, err
		}
		r.log.Info("Fleet files do not load; stopping without dependency order", "error", err.Error())
		fleet = &spec.Fleet{}
	}
	r.setDesired(fleet, nil)
	if err := r.setup(); err != nil {
		return Status{}, err
	}
	if verb == VerbStop {
		r.cfg.Workers = max(1, min(len(names), maxDownWorkers))
	}
	wctx, cancel := context.WithCancel(context.Background())
	workers := r.startWorkers(wctx)
	r.mu.Lock()
	r.acting = true
	r.mu.Unlock()
	var st Status
	q, err := r.take(ctx, verb, names)
	if err == nil {
		if ready {
			st, err = q.Wait(ctx)
		} else {
			st, err = q.WaitRunning(ctx)
		}
	}
	r.mu.Lock()
	r.acting = false
	r.mu.Unlock()
	r.teardown(workers)
	cancel()
	if q != nil && r.cfg.StateDir != nil {
		if merr := mergeStatus(r.cfg.StateDir.StatusPath(), r.Status(), q.Targets); merr != nil {
			r.statusFault.failed(r.log, merr, "Cannot write status")
		}
	}
	if err != nil {
		return st, err
	}
	return only(st, q.Targets), nil
}

// only is st restricted to names (those it has).
func only(st Status, names []string) Status {
	out := Status{Errors: st.Errors, Servers: make([]ServerStatus, 0, len(names))}
	for _, n := range names {
		if ss, ok := st.Get(n); ok {
			out.Servers = append(out.Servers, ss)
		}
	}
	sort.Slice(out.Servers, func(i, j int) bool { return out.Servers[i].Name < out.Servers[j].Name })
	return out
}
