package reconciler

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"reflect"
	"strings"
	"time"

	"github.com/go-logr/logr"

	"github.com/procfleet/procfleet/actuate"
	"github.com/procfleet/procfleet/observe"
	"github.com/procfleet/procfleet/spec"
)

// postKind says what a goroutine learned about a server.
type postKind uint8

const (
	// postStarted: a readiness wait ended (ready, failed, or abandoned).
	postStarted postKind = iota
	// postReadiness: readiness changed (a readiness probe, or the check
	// after adoption).
	postReadiness
	// postLiveness: the liveness probe failed its threshold.
	postLiveness
	// postExitLearned: the exit status of an adopted process was learned.
	postExitLearned
	// postUntrusted: the server's record was found untrusted and moved
	// aside.
	postUntrusted
	// postForeign: a record from another state folder in place of the
	// server's was moved aside (foreign.go).
	postForeign
)

// post is a result that a goroutine hands to the worker of its server.
// gen ties it to one process: a post about an earlier one is dropped.
type post struct {
	kind postKind
	gen  uint64

	running   *actuate.Running // postStarted
	err       error            // postStarted: the start failed
	abandoned bool             // postStarted: its wait was cancelled
	logOffset int64            // postStarted: the log's size before the spawn

	// since is when readiness began to hold (postStarted, postReadiness;
	// zero: when it is handled).
	since time.Time

	ok      bool   // postReadiness
	reason  string // postReadiness
	message string // postReadiness, postLiveness

	exitSeq uint64    // postExitLearned: the exit it is about
	learned *LastExit // postExitLearned

	untrusted *actuate.UntrustedRecordError // postUntrusted
	foreign   *actuate.ForeignRecordError   // postForeign
}

// post hands p to the worker of server name and marks the server dirty.
func (r *Reconciler) post(name string, p post) {
	r.mu.Lock()
	s := r.serverLocked(name)
	s.inbox = append(s.inbox, p)
	r.mu.Unlock()
	r.queue.AddFirst(name) // a result goes before first passes and resyncs
}

// observation is what one reconcile found out about its server, with the
// resources the plan's application may need.
type observation struct {
	obs Observed
	// rec is the server's record, when one was read (or tracked).
	rec *actuate.Record
	// handle pins an owned process found from its record and not yet
	// tracked: Adopt keeps it, anything else closes it.
	handle *observe.Handle
}

// reconcile is one level-triggered pass over one server: take what was
// posted, read its whole state anew, plan, apply.
func (r *Reconciler) reconcile(ctx context.Context, name string) (Result, error) {
	defer r.cfg.Metrics.observeReconcile(time.Now())
	log := logr.FromContextOrDiscard(ctx)
	r.mu.Lock()
	s := r.serverLocked(name)
	posts := s.inbox
	s.inbox = nil
	s.rest = nil
	desired, gen := r.desiredLocked(), r.desiredGen
	r.begun++
	num := r.begun
	req := r.requests[name]
	if req.seq <= s.taken {
		req = startAsk{}
	}
	r.mu.Unlock()
	d, declared := desired[name]
	if req.seq > 0 && declared && !d.Held {
		d.StartNow, d.Restart = true, req.restart
		desired = maps.Clone(desired)
		desired[name] = d
	}

	var err error
	for _, p := range posts {
		if perr := r.handlePost(ctx, s, d, p); perr != nil && err == nil {
			err = perr
		}
	}
	ob, oerr := r.observe(ctx, s, d)
	if oerr != nil {
		return Result{}, oerr
	}
	observed := r.observedFor(name, ob.obs, desired, declared && !d.Held)
	a := PlanServer(name, desired, observed)
	if v := log.V(1); v.Enabled() { // its arguments cost 4 allocations a pass
		v.Info("Planned", "action", a.Kind.String(), "reason", a.Reason, "phase", a.Phase.String())
	}
	r.noteRolling(name, a.Rolling)
	res, aerr := r.apply(ctx, s, d, a, ob)
	if aerr != nil && err == nil {
		err = aerr
	}
	if werr := r.rewriteRecord(s); werr != nil && err == nil {
		err = werr // tried again with the queue's backoff
	}
	r.clearDeadRecord(s)
	if t := s.tracked; t != nil && s.startedFor != d.Server {
		r.noteStarted(s, d, t.rec)
	}
	r.mu.Lock()
	r.passes++
	s.lastPass = num
	if req.seq > 0 && requestTaken(a, ob.obs) {
		s.taken = req.seq // seen with this pass's outcome, never before it
	}
	if r.restLocked(s, a, res, err, req) {
		s.rest, s.restGen = s.tracked.handle, gen // the fleet this pass planned with
	}
	_, inStop := r.stopping[name]
	atRest := s.st.phase == PhaseStopped || s.st.phase == PhaseFailed || s.st.phase == PhaseQuarantined
	r.mu.Unlock()
	if inStop && atRest && s.tracked == nil && s.startCancel == nil {
		r.stopDone(name, nil) // not running (any more): its dependencies may go
	}
	r.notifyChange()
	return res, err
}

// withHeld returns a copy of m with Held set on the held servers.
func withHeld(m map[string]Desired, held map[string]bool) map[string]Desired {
	out := make(map[string]Desired, len(m))
	for k, v := range m {
		if held[k] {
			v.Held = true
		}
		out[k] = v
	}
	return out
}

// observedFor builds the observed map Plan reads: this server (with its
// Rollout when a rolling replace must take its turn), the readiness of
// its dependencies (every instance of each), and
// (for a server being stopped: pruned, or held by down, declared false)
// the other servers still running that depend on it.
func (r *Reconciler) observedFor(name string, self Observed, desired map[string]Desired, declared bool) map[string]Observed {
	r.mu.Lock()
	defer r.mu.Unlock()
	if declared {
		d := desired[name]
		if d.Server != nil && rollingTurn(d, self) {
			self.Rollout = r.rolloutLocked(d, desired)
		}
		m := map[string]Observed{name: self}
		if d.Server != nil {
			for _, dep := range d.Server.Spec.DependsOn {
				m[dep] = Observed{Ready: r.readyLocked(dep)}
			}
		}
		return m
	}
	// The plan of a server being stopped reads no others
	// (stoppingDependents).
	m := map[string]Observed{name: self}
	if r.stoppingDeps == 0 && !r.anyDependsLocked(desired) {
		// No server declares a dependency: none waits for this one (the
		// loops below would find none, at a look at every server).
		return m
	}
	for n, s := range r.servers {
		if n == name || s.st.pid == 0 || s.st.phase == PhaseQuarantined {
			continue
		}
		d, ok := desired[n]
		if ok && !d.Held && !r.held[n] {
			continue
		}
		var deps []string
		if ok && d.Server != nil {
			deps = d.Server.Spec.DependsOn
		}
		if dependsOnServer(deps, name) {
			m[n] = Observed{Ownership: OwnOwned, Tracked: true, DependsOn: deps}
		}
	}
	// A down stops what it was asked to in dependency order, whether or
	// not the process was looked at yet.
	for n, deps := range r.stopping {
		if _, seen := m[n]; !seen && n != name && dependsOnServer(deps, name) {
			m[n] = Observed{Ownership: OwnOwned, Tracked: true, DependsOn: deps}
		}
	}
	return m
}

// depsSeen remembers whether one desired map declares any dependency.
type depsSeen struct {
	of  map[string]Desired // held, so that its address names it alone
	any bool
}

// anyDependsLocked reports whether a server of desired declares a
// dependency, looked at once per desired map (a fleet update, a change of
// the holds or a request makes another). r.mu is held.
func (r *Reconciler) anyDependsLocked(desired map[string]Desired) bool {
	c := &r.depsSeen
	if c.of == nil || reflect.ValueOf(c.of).UnsafePointer() != reflect.ValueOf(desired).UnsafePointer() {
		c.of, c.any = desired, false
		for _, d := range desired {
			if d.Server != nil && len(d.Server.Spec.DependsOn) > 0 {
				c.any = true
				break
			}
		}
	}
	return c.any
}

// handlePost applies what a goroutine learned, through a transition.
func (r *Reconciler) handlePost(ctx context.Context, s *server, d Desired, p post) error {
	switch p.kind {
	case postUntrusted:
		return r.untrustedFound(s, p.untrusted)
	case postForeign:
		return r.foreignFound(s, p.foreign)
	case postExitLearned:
		if p.exitSeq != s.exitSeq {
			return nil
		}
		return r.change(s, func(st *state) ([]Event, error) { return st.exitLearned(s.name, p.learned, p.message) })
	}
	if p.gen != s.gen {
		if p.kind == postStarted && p.running != nil && p.err == nil && !p.abandoned {
			_ = p.running.Handle.Close()
		}
		return nil // about a process this server no longer has
	}
	switch p.kind {
	case postStarted:
		s.startCancel, s.startDone = nil, nil
		switch {
		case p.abandoned:
			// Its process keeps running with its record: this pass adopts
			// or stops it.
			return nil
		case p.err != nil:
			return r.startFailed(s, d, p.err)
		}
		return r.started(ctx, s, d, p)
	case postReadiness:
		if s.tracked == nil {
			return nil
		}
		err := r.change(s, func(st *state) ([]Event, error) {
			return st.readiness(s.name, readinessInput{ok: p.ok, reason: p.reason, msg: p.message, since: p.since, now: r.clock.Now()})
		})
		if p.ok {
			r.refreshCmdline(s, s.tracked)
			r.enqueueDependents(s.name)
		}
		return err
	case postLiveness:
		if s.tracked == nil {
			return nil
		}
		return r.change(s, func(st *state) ([]Event, error) { return st.liveness(s.name, p.message) })
	}
	return nil
}

// started takes a process whose readiness held into the reconciler's care.
func (r *Reconciler) started(ctx context.Context, s *server, d Desired, p post) error {
	running := p.running
	t := &tracked{rec: running.Record, handle: running.Handle, running: running, spec: d.Server.Spec, logOffset: p.logOffset}
	s.tracked = t
	r.refreshCmdline(s, t)
	since := p.since
	if since.IsZero() {
		since = r.clock.Now()
	}
	err := r.change(s, func(st *state) ([]Event, error) {
		min := d.minReady()
		return st.becameReady(s.name, readyInput{rec: running.Record, since: since, window: min, windowMsg: minReadyMessage(min), now: r.clock.Now()})
	})
	r.exits.Watch(running.Handle, func() { r.queue.AddFirst(s.name) })
	r.prepareNext(s, d)
	r.startProbes(ctx, s, d, t)
	r.enqueueDependents(s.name)
	if s.recordLost != "" {
		msg := s.recordLost
		s.recordLost = ""
		if werr := r.writeTrackedRecord(s, t, msg); werr != nil && err == nil {
			err = werr
		}
	}
	return err
}

// observe reads the state of one server: its tracked process (exited?), or
// its record verified against the kernel, its port when a conflict kept it
// from starting, and what the reconciler remembers (exit, backoff).
func (r *Reconciler) observe(ctx context.Context, s *server, d Desired) (observation, error) {
	var ob observation
	r.mu.Lock()
	starting, startHash := s.st.starting, s.st.startHash
	r.mu.Unlock()
	t := s.tracked
	switch {
	case starting:
		ob.obs = Observed{Ownership: OwnOwned, Tracked: true, Starting: true, SpecHash: startHash}
	case t != nil && t.handle.Exited():
		if err := r.handleExit(ctx, s, d, t); err != nil {
			return ob, err
		}
	case t != nil:
		rec := t.rec
		ob.rec = &rec
		ob.obs = Observed{Ownership: OwnOwned, Tracked: true, SpecHash: rec.SpecHash, DependsOn: t.spec.DependsOn}
	}
	if !starting && ob.rec == nil {
		if err := r.observeRecord(ctx, s, d, &ob); err != nil {
			return ob, err
		}
	}

	r.mu.Lock()
	st := s.st
	r.mu.Unlock()
	o := &ob.obs
	o.Phase = st.phase
	o.Ready = st.isReady
	o.ReadyUnknown = st.ready.Status == ConditionUnknown
	if !st.readySince.IsZero() && st.phase == PhaseRunning {
		o.ReadinessHeld, o.ReadyFor = true, r.clock.Now().Sub(st.readySince)
	}
	o.LivenessFailed = st.livenessFailed
	o.ExitsBeforeReady = st.exitsBeforeReady
	if st.exitPending {
		o.Exit, o.ExitHash, o.ExitAfterReady, o.RestartRule = st.lastExit, st.exitHash, st.lastExitAfterReady, st.restartRule
		o.Daemonized = st.exitDaemonized
		o.NotRunnable = st.exitNotRunnable
		if rem := st.restartAt.Sub(r.clock.Now()); rem > 0 {
			o.BackoffRemaining = rem
		}
	}
	if st.portHolder != "" && o.Ownership == OwnNone && d.Server != nil {
		// A cheap read of the socket tables: the server starts as soon as
		// the holder lets go (Plan re-checks with backoff).
		o.PortHolder = PortHolder(d.port())
		o.PortChecks = st.portChecks
	}
	return ob, nil
}

// observeRecord reads and verifies the server's record, and keeps what the
// server's memory adds: a quarantine found at a stop, an UntrustedRecord
// quarantine until nothing it protects is left.
func (r *Reconciler) observeRecord(ctx context.Context, s *server, d Desired, ob *observation) error {
	var rec actuate.Record
	err := error(fs.ErrNotExist) // an exited process's: it names nothing
	if !s.deadRecord {
		rec, err = r.readRecord(s.name)
	}
	if err != nil && !isNotExist(err) && !isRecordVerdict(err) {
		return fmt.Errorf("observe server %s: %w", s.name, err)
	}
	var ue *actuate.UntrustedRecordError
	if errors.As(err, &ue) {
		s.untrustedMovedAside()
		if rerr := r.untrustedFound(s, ue); rerr != nil {
			return rerr
		}
		// It was moved aside: from now on the server has no record.
		err = fs.ErrNotExist
	}
	var resolved *actuate.Verification
	if err == nil && rec.Intent() && !r.stopsUnverified(s) {
		// Rule 8 (actuate.Stop resolves it for a down).
		if rec, resolved, err = r.resolveIntent(ctx, s, d, rec); err != nil && !isNotExist(err) {
			return err
		}
	}
	if err == nil && r.stopsUnverified(s) {
		// A down stops it: actuate.Stop verifies the record (rules 1-6)
		// right before any signal, and a stale or reused one is removed
		// there without one. Verifying here too would only delay the
		// stop, and stops that begin together share one scan of the
		// process table.
		ob.obs, ob.rec = Observed{Ownership: OwnOwned, SpecHash: rec.SpecHash}, &rec
		return nil
	}
	var v actuate.Verification
	switch {
	case resolved != nil:
		v = *resolved
	case err == nil:
		v = r.verify(rec)
	}
	ob.obs = ObservedFromRecord(rec, err, v)
	if err == nil {
		ob.rec = &rec
		ob.handle = v.Handle
	}
	r.mu.Lock()
	q, untrusted := s.st.quarantine, s.st.untrusted
	r.mu.Unlock()
	switch {
	case isNotExist(err):
		r.observeUntrusted(ctx, s, d, ob, q, untrusted)
	case ob.obs.Ownership == OwnOwned && q != nil && q.Reason == actuate.Unkillable && q.PID == rec.PID:
		// Found unkillable before: leave it alone.
		ob.obs = Observed{Ownership: OwnQuarantined, Reason: string(q.Reason), Message: quarantineText(q)}
		closeHandle(ob)
	}
	if ob.obs.Ownership == OwnQuarantined && ob.rec != nil {
		r.pinQuarantined(s, *ob.rec)
	} else {
		r.unpin(s)
	}
	return nil
}

// stopsUnverified reports whether a down is about to stop s, untracked and
// not quarantined: its record goes straight to actuate.Stop.
func (r *Reconciler) stopsUnverified(s *server) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, target := r.stopping[s.name]
	return target && s.tracked == nil && s.st.phase != PhaseQuarantined && s.st.quarantine == nil
}

// isRecordVerdict reports the read errors that are verdicts on the record
// (ObservedFromRecord's), not failures to read the folder.
func isRecordVerdict(err error) bool {
	return errors.As(err, new(*actuate.UntrustedRecordError)) || errors.As(err, new(*actuate.NewerRecordError))
}

// ObservedFromRecord maps what reading a record (readErr) and verifying it
// (v, when readErr is nil) found to what Plan reads. up, apply, down and
// the read-only status, describe and diff all decide with it.
func ObservedFromRecord(rec actuate.Record, readErr error, v actuate.Verification) Observed {
	var ue *actuate.UntrustedRecordError
	var ne *actuate.NewerRecordError
	switch {
	case readErr == nil:
	case isNotExist(readErr):
		return Observed{Ownership: OwnNone}
	case errors.As(readErr, &ue):
		return Observed{Ownership: OwnQuarantined, Reason: string(actuate.UntrustedRecord), Message: UntrustedAdvice(ue)}
	case errors.As(readErr, &ne):
		// Rule 6: a record this procfleet cannot read may still prove that
		// the server runs; keep it, signal nothing, start nothing.
		return Observed{Ownership: OwnQuarantined, Reason: string(actuate.UnverifiedOwner), Message: ne.Error()}
	default:
		return Observed{Ownership: OwnQuarantined, Reason: string(actuate.UnverifiedOwner), Message: readErr.Error()}
	}
	switch v.Verdict {
	case actuate.VerdictOwned:
		return Observed{Ownership: OwnOwned, SpecHash: rec.SpecHash}
	case actuate.VerdictStale:
		return Observed{Ownership: OwnStale, Reason: v.Message, SpecHash: rec.SpecHash}
	case actuate.VerdictReused:
		return Observed{Ownership: OwnReused, Reason: v.Message, SpecHash: rec.SpecHash}
	}
	return Observed{Ownership: OwnQuarantined, Reason: string(v.Reason), Message: v.Message + "; nothing was signalled; " + actuate.ManualStopHint(rec)}
}

// UntrustedAdvice says what is wrong with an untrusted record file and what
// a person can do about it. The read-only commands leave the file in place
// (MovedTo empty); up, apply and down move it aside.
func UntrustedAdvice(ue *actuate.UntrustedRecordError) string {
	if ue.MovedTo != "" {
		return fmt.Sprintf("the record file %s cannot be trusted (%s); it was moved aside to %s. Check it, delete it, then run 'procfleet apply'.",
			ue.Path, ue.Reason, ue.MovedTo)
	}
	return fmt.Sprintf("the record file %s cannot be trusted (%s); procfleet never reads it. Check it, delete it or move it away, then run 'procfleet apply'. Left as it is, the next 'procfleet apply', 'up' or 'down' moves it aside to %s.corrupt-<time>.",
		ue.Path, ue.Reason, baseName(ue.Path))
}

func baseName(p string) string {
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		return p[i+1:]
	}
	return p
}

// quarantineText is a quarantine's message for status: what was found and
// how to stop it by hand, without the "server X quarantined (R)" that the
// phase and reason already say.
func quarantineText(q *actuate.QuarantineError) string {
	msg := q.Message
	if q.Reason == actuate.Unkillable {
		msg += fmt.Sprintf(" (state %s)", q.State)
	}
	if q.Hint != "" {
		msg += "; " + q.Hint
	}
	return msg
}

// untrustedFound handles a record found untrusted (and moved aside). A
// tracked process is ours whatever its record says (its pin proves it):
// its record is written again. Anything else is quarantined until nothing
// the record could protect is left (observeRecord lifts it).
func (r *Reconciler) untrustedFound(s *server, ue *actuate.UntrustedRecordError) error {
	msg := "record rewritten: the one on disk was untrusted"
	if ue.MovedTo != "" {
		msg += " and moved aside to " + ue.MovedTo
	}
	if t := s.tracked; t != nil && !t.handle.Exited() {
		_ = r.writeTrackedRecord(s, t, msg)
		r.resolveOwnUntrusted(s, ue, "its process is held by procfleet since it started or adopted it; its record was written again")
		return nil
	}
	if s.startCancel != nil {
		// Being started by this reconciler: ours, pinned since its spawn.
		s.recordLost = msg
		r.resolveOwnUntrusted(s, ue, "its process is being started by procfleet, pinned since its spawn; its record is written again")
		return nil
	}
	q := &actuate.QuarantineError{Name: s.name, Reason: actuate.UntrustedRecord, Message: UntrustedAdvice(ue)}
	return r.change(s, func(st *state) ([]Event, error) {
		return st.quarantined(s.name, quarantineInput{reason: string(q.Reason), message: q.Message, q: q, untrusted: ue}, r.clock.Now())
	})
}

func closeHandle(ob *observation) {
	if ob.handle != nil {
		_ = ob.handle.Close()
		ob.handle = nil
	}
}

// pinQuarantined pins a quarantined server's process, for its exit only
// (a pin never signals): when it goes (stopped by hand, as the quarantine
// said), the server is looked at again at once, not at the next resync.
func (r *Reconciler) pinQuarantined(s *server, rec actuate.Record) {
	if s.pinned != nil && s.pinned.PID() == rec.PID && !s.pinned.Exited() {
		return
	}
	r.unpin(s)
	h, err := observe.Pin(rec.PID)
	if err != nil {
		return // gone already, or not pinnable: the resync looks again
	}
	if id, err := h.Identity(); err != nil || (rec.StartTime != 0 && id.StartTime != rec.StartTime) {
		_ = h.Close()
		return
	}
	s.pinned = h
	r.exits.Watch(h, func() { r.queue.AddFirst(s.name) })
}

func (r *Reconciler) unpin(s *server) {
	if s.pinned != nil {
		r.exits.Unwatch(s.pinned)
		_ = s.pinned.Close()
		s.pinned = nil
	}
}

// PortHolder describes who holds port now ("pid 123 (python3 -m http.server)",
// or "a process of uid 0" when its owner is not visible), "" when nobody
// does. It is the one wording of a port's holder.
func PortHolder(port int) string {
	if port <= 0 {
		return ""
	}
	ls, err := observe.Listeners(port)
	if err != nil || len(ls) == 0 {
		return ""
	}
	var parts []string
	for _, l := range ls {
		if len(l.PIDs) > 0 && l.OwnerVisible {
			parts = append(parts, fmt.Sprintf("pid %d (%s)", l.PIDs[0], observe.FormatCmdline(l.Cmdline)))
		} else {
			parts = append(parts, fmt.Sprintf("a process of uid %d", l.UID))
		}
	}
	return strings.Join(parts, ", ")
}

// handleExit records that a tracked process exited: how (when it was our
// child), its record removed, its readiness lost, the restart it gets. It
// never signals anything.
//
// An adopted process is not our child: its status is unknown (-1) when it
// is seen to exit, and the restart is not held back for it. Its parent
// (init, or whoever started the earlier procfleet) reaps it, and then its
// pidfd tells the status (Linux >= 6.15): learnExit looks for it off the
// worker, keeping the pidfd open until then, and posts it.
func (r *Reconciler) handleExit(ctx context.Context, s *server, d Desired, t *tracked) error {
	r.prepareRestart(s, d) // written while the exit is handled
	r.exits.Unwatch(t.handle)
	le := &LastExit{Code: -1, Reason: "exited (status unknown: not started by this procfleet)"}
	learn := t.running == nil && t.handle.Mode() == observe.PinPidfd
	if t.running != nil {
		wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		select {
		case <-t.running.Done():
		case <-wctx.Done():
		}
		cancel()
		if st, ok := t.running.Exit(); ok {
			// The out-of-memory hint only on the kernel's word, read
			// before the cleanup removes the cgroup and its counters.
			le = &LastExit{Code: st.Code, Signal: st.Signal, Reason: actuate.ExitMessage(t.rec, st)}
		}
	}
	r.cleanupAfterExit(ctx, s, t)
	if !learn {
		_ = t.handle.Close()
	}
	// Replaced by a restart's intent record, or removed at the end of
	// this pass (deadrecord.go).
	s.deadRecord, s.deadStarted = true, true
	now := r.clock.Now()
	le.At = now
	s.tracked = nil
	s.gen++
	if s.probeCancel != nil {
		s.probeCancel()
		s.probeCancel = nil
	}
	if s.learnCancel != nil {
		s.learnCancel() // an earlier exit's status no longer matters
		s.learnCancel = nil
	}
	s.exitSeq++
	r.mu.Lock()
	readyFor := time.Duration(0)
	if s.st.isReady {
		readyFor = now.Sub(s.st.readySince)
	}
	restart := r.backoff.After(s.st.crashes, readyFor)
	r.mu.Unlock()
	tail := r.logTail(s.name, t.logOffset)
	err := r.change(s, func(st *state) ([]Event, error) {
		return st.exited(s.name, exitInput{exit: le, hash: t.rec.SpecHash, restart: restart, pid: t.rec.PID, logTail: tail})
	})
	if learn {
		lctx, lcancel := context.WithCancel(ctx)
		s.learnCancel = lcancel
		seq := s.exitSeq
		// teardown cancels lctx (learnCancel) and waits for r.starts.
		r.starts.Go(func() {
			defer lcancel()
			r.learnExit(lctx, s.name, t.handle, t.rec, le, seq)
		})
	}
	return err
}

// ReasonExitLearned: the exit status of a process that was not our child
// (adopted) was learned after its parent reaped it; the last exit says it.
const ReasonExitLearned = "ExitLearned"

// exitLearnBound bounds how long learnExit looks for an exit status: the
// exited process's parent must reap it first (PID 1 took about 1.9 s once,
// see process-mechanics.md 2.9). Looks are 10 ms apart at first, doubling
// up to 1 s.
const exitLearnBound = 5 * time.Second

// learnExit asks the pidfd h of an exited process that was not our child
// for its exit status until it is known (its parent reaped it), ctx ends, or
// exitLearnBound has passed; then closes h. A status learned is posted; the
// worker puts it in place of le if that exit is still the server's last.
func (r *Reconciler) learnExit(ctx context.Context, name string, h *observe.Handle, rec actuate.Record, le *LastExit, seq uint64) {
	defer h.Close()
	pid := rec.PID
	wait, waited := 10*time.Millisecond, time.Duration(0)
	for {
		if st, ok := h.ExitStatus(); ok {
			learned := &LastExit{Code: st.Code, Signal: st.Signal, At: le.At}
			msg := actuate.ExitMessage(rec, actuate.ExitStatus{Code: st.Code, Signal: st.Signal})
			learned.Reason = msg + " (learned after its parent reaped it)"
			r.log.V(1).Info("Exit status learned", "server", name, "pid", pid, "status", st.String(), "waited", waited)
			r.post(name, post{kind: postExitLearned, exitSeq: seq, learned: learned, message: fmt.Sprintf("pid %d %s", pid, learned.Reason)})
			return
		}
		if waited >= exitLearnBound || ctx.Err() != nil {
			break
		}
		d := min(wait, exitLearnBound-waited)
		if !r.sleep(ctx, d) {
			break
		}
		waited += d
		wait = min(2*wait, time.Second)
	}
	r.log.V(1).Info("Exit status not learned", "server", name, "pid", pid, "waited", waited)
}

// sleep waits d on the reconciler's clock; it returns false if ctx ends
// first.
func (r *Reconciler) sleep(ctx context.Context, d time.Duration) bool {
	timer := r.clock.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-timer.C():
		return true
	}
}

// apply carries out one action, in numbered steps.
func (r *Reconciler) apply(ctx context.Context, s *server, d Desired, a Action, ob observation) (Result, error) {
	now := r.clock.Now()
	// 1. Drop a worthless record (stale, or its pid reused): signal nothing.
	// If it cannot be removed (the state folder full or read-only), nothing
	// else happens to the server in this pass (no start over a record that
	// stays): it is reported, and retried with the queue's backoff.
	if a.RemoveRecord {
		if err := r.records.RemoveRecord(s.name); err != nil {
			closeHandle(&ob)
			r.recordFailed(s, fmt.Sprintf("cannot remove the record (%s; nothing signalled; retrying): %v", ob.obs.Reason, err))
			return Result{}, err
		}
		r.recordOK(s)
		r.forgetStarted(s)
		r.event(Event{Server: s.name, Type: EventNormal, Reason: actuate.EventRecordRemoved, Message: "record removed, nothing signalled: " + ob.obs.Reason})
	}
	// 2. A pin from verification is kept only by adoption.
	if a.Kind != ActionAdopt {
		closeHandle(&ob)
	}
	// 3. A quarantine that ended.
	if a.Lifted != "" {
		r.mu.Lock()
		q := s.st.phase == PhaseQuarantined
		r.mu.Unlock()
		if q {
			if err := r.change(s, func(st *state) ([]Event, error) { return st.lift(s.name, a.Lifted, now) }); err != nil {
				return Result{}, err
			}
		} else {
			// Lifted at the first look of this process (a fresh up, an
			// apply): no phase to leave, the event still says it.
			r.event(Event{Server: s.name, Type: EventNormal, Reason: ReasonQuarantineLifted, Message: a.Lifted})
		}
	}
	// 4. The action.
	res := Result{RequeueAfter: a.RequeueAfter}
	switch a.Kind {
	case ActionNothing, ActionQuarantine:
		return res, r.settle(s, a, ob, now)
	case ActionWait:
		if a.CountReady { // a replica waiting for its rolling turn
			if err := r.change(s, func(st *state) ([]Event, error) { return st.counted(s.name, now) }); err != nil {
				return res, err
			}
			r.enqueueDependents(s.name)
		}
		return res, r.change(s, func(st *state) ([]Event, error) {
			if a.Phase == PhaseCrashLoopBackOff {
				return st.backOff(s.name, a.Reason)
			}
			return st.wait(s.name, a.Reason, a.Quiet)
		})
	case ActionAdopt:
		return res, r.adopt(ctx, s, d, *ob.rec, ob.handle)
	case ActionStart:
		return r.start(ctx, s, d, a)
	case ActionStop, ActionReplace:
		return r.stop(ctx, s, d, a, ob.rec)
	}
	return Result{}, fmt.Errorf("reconcile %s: unknown action %s", s.name, a.Kind)
}

// settle carries out an action that changes no process: the phase it names.
func (r *Reconciler) settle(s *server, a Action, ob observation, now time.Time) error {
	switch a.Phase {
	case PhaseQuarantined:
		in := quarantineInput{reason: a.QuarantineReason, message: a.Message, rec: ob.rec, holder: ob.obs.PortHolder}
		if in.reason == "" {
			in.reason = a.Reason
		}
		if in.message == "" && a.Reason != in.reason {
			in.message = a.Reason
		}
		return r.change(s, func(st *state) ([]Event, error) { return st.quarantined(s.name, in, now) })
	case PhaseFailed:
		return r.change(s, func(st *state) ([]Event, error) { return st.fail(s.name, a.Reason, a.Message, now) })
	case PhaseStopped:
		err := r.change(s, func(st *state) ([]Event, error) {
			if st.phase == PhaseStopped && st.reason == a.Reason {
				return nil, nil
			}
			return st.rest(s.name, a.Reason, now)
		})
		r.mu.Lock()
		_, declared := r.desired[s.name]
		if !declared && s.tracked == nil && !s.st.starting && !r.held[s.name] {
			// Gone from the files and from the world: forgotten.
			r.unpin(s)
			delete(r.servers, s.name)
		}
		r.mu.Unlock()
		if !declared {
			r.kickStatus()
		}
		return err
	}
	switch {
	case a.CountReady:
		err := r.change(s, func(st *state) ([]Event, error) { return st.counted(s.name, now) })
		r.enqueueDependents(s.name)
		return err
	case a.Reason == ReasonMinReadySeconds:
		return r.change(s, func(st *state) ([]Event, error) { return st.minReadyWait(s.name, a.Message, now) })
	}
	return r.change(s, func(st *state) ([]Event, error) { return st.observed(s.name, a.Reason) })
}

// adopt takes an owned process found from its record into the reconciler's
// care: its exit is watched, its probes run; it is never started again.
func (r *Reconciler) adopt(ctx context.Context, s *server, d Desired, rec actuate.Record, h *observe.Handle) error {
	t := &tracked{rec: rec, handle: h, spec: d.Server.Spec}
	s.tracked = t
	s.gen++
	gen := s.gen
	err := r.change(s, func(st *state) ([]Event, error) { return st.adopt(s.name, rec, r.clock.Now()) })
	r.exits.Watch(h, func() { r.queue.AddFirst(s.name) })
	// Readiness is checked off the worker until it passes (the process may
	// have been adopted mid-start), with backoff from 100 ms to 5 s; then
	// only declared probes go on.
	ready := readinessCheck(d)
	pctx, cancel := context.WithCancel(ctx)
	r.replaceProbeCancel(s, cancel)
	r.starts.Go(func() {
		wait := 10 * startupReadyPeriod
		for {
			res := observe.ProbeResult{OK: true, Message: "adopted: running"}
			if ready != nil {
				res = ready(pctx)
			}
			if pctx.Err() != nil {
				return
			}
			if res.OK {
				since := adoptedReadySince(rec.StartedAt, r.clock.Now())
				r.post(s.name, post{kind: postReadiness, gen: gen, ok: true, message: "adopted process is ready", since: since})
				return
			}
			if !r.sleep(pctx, wait) {
				return
			}
			wait = min(2*wait, 5*time.Second)
		}
	})
	r.startProbes(ctx, s, d, t)
	return err
}

// replaceProbeCancel installs cancel as the server's probe cancel, ending
// the ones before it.
func (r *Reconciler) replaceProbeCancel(s *server, cancel context.CancelFunc) {
	if s.probeCancel != nil {
		prev := s.probeCancel
		s.probeCancel = func() { prev(); cancel() }
		return
	}
	s.probeCancel = cancel
}

// startRequest turns a declared instance into what actuate needs: its
// name, port, command, args and environment (envFile and $(NAME)
// resolved).
func startRequest(d Desired) actuate.StartRequest {
	srv := d.Server
	req := actuate.StartRequest{
		Name: srv.Metadata.Name, Argv: srv.Spec.Argv(), Dir: srv.Spec.WorkingDir,
		Env: envList(srv.Spec.Env), Port: d.port(), SpecHash: d.Hash,
		StartupTimeout: srv.Spec.StartupTimeout(), Grace: srv.Spec.TerminationGracePeriod(),
		KillTimeout: srv.Spec.KillTimeout(), ReadyPeriod: startupReadyPeriod,
	}
	if in := d.Instance; in != nil {
		req.Name, req.Argv, req.Env, req.Dir = in.Name, in.Argv(), in.EnvList(), in.WorkingDir
	}
	// Without a declared readinessProbe, Ready stays nil: actuate's own
	// check that the port accepts TCP (on Linux one listener-table query a
	// tick for every starting server, not a connect per server every
	// startupReadyPeriod), or with no port, running is ready.
	if p := srv.Spec.ReadinessProbe; p != nil {
		req.Ready = readinessCheck(d)
		req.ReadyPeriod = min(p.Period(), 100*time.Millisecond)
	}
	return req
}

func envList(env []spec.EnvVar) []string {
	out := make([]string, 0, len(env))
	for _, e := range env {
		out = append(out, e.Name+"="+e.Value)
	}
	return out
}

// start spawns the server and awaits its readiness off the worker.
func (r *Reconciler) start(ctx context.Context, s *server, d Desired, a Action) (Result, error) {
	began := r.clock.Now()
	if err := r.change(s, func(st *state) ([]Event, error) {
		return st.start(s.name, startInput{hash: d.Hash, fresh: a.Fresh, reason: a.Reason, now: began})
	}); err != nil {
		return Result{}, err
	}
	req := startRequest(d)
	logOffset := r.logSize(s.name)
	running, err := r.act.Spawn(ctx, req)
	spawned := r.clock.Now()
	if err == nil {
		s.deadRecord = false // its intent record was renamed over it
	}
	if err != nil {
		var se *actuate.StartError
		if errors.As(err, &se) && se.Reason == actuate.ReasonPortConflict {
			// Look at the port again soon: the server starts once it is
			// free (Plan re-checks it, with backoff).
			return Result{RequeueAfter: portRecheck(0)}, r.startFailed(s, d, err)
		}
		return Result{}, r.startFailed(s, d, err)
	}
	r.ownRecordWritten(s.name) // Spawn wrote it
	s.gen++
	gen := s.gen
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	s.startCancel, s.startDone = cancel, done
	r.starts.Go(func() {
		defer close(done)
		defer cancel()
		err := r.act.WaitReady(wctx, req, running)
		since := r.clock.Now() // the readiness check passed
		if req.Ready == nil && req.Port <= 0 {
			since = spawned // "running": ready from the spawn
		}
		r.post(s.name, post{kind: postStarted, gen: gen, running: running, err: err, abandoned: err != nil && wctx.Err() != nil,
			since: since, logOffset: logOffset})
	})
	return Result{}, nil
}

// startFailed records a start that failed: a port conflict quarantines,
// anything else counts as an exit before Ready (the plan restarts it with
// backoff, or gives up).
func (r *Reconciler) startFailed(s *server, d Desired, err error) error {
	now := r.clock.Now()
	var se *actuate.StartError
	if !errors.As(err, &se) {
		se = &actuate.StartError{Name: s.name, Reason: actuate.ReasonFailed, ExitCode: -1, Message: "start", Err: err}
	}
	if se.Reason == actuate.ReasonPortConflict {
		holder := PortHolder(d.port())
		if holder == "" {
			holder = fmt.Sprintf("pids %v", se.HolderPIDs)
		}
		msg := fmt.Sprintf("port %d is held by %s; it starts once the port is free", d.port(), holder)
		return r.change(s, func(st *state) ([]Event, error) {
			return st.quarantined(s.name, quarantineInput{reason: ReasonPortConflict, message: msg, holder: holder}, now)
		})
	}
	why, notRunnable := programFailure(se.Err, d)
	if !notRunnable {
		why = startFailureReason(se, d)
	}
	le := &LastExit{Code: se.ExitCode, Signal: se.Signal, Reason: why, At: now}
	r.mu.Lock()
	restart := r.backoff.After(s.st.crashes, 0)
	r.mu.Unlock()
	s.exitSeq++
	cerr := r.change(s, func(st *state) ([]Event, error) {
		return st.startFailed(s.name, exitInput{exit: le, hash: d.Hash, restart: restart, logTail: strings.Join(se.LogTail, "\n"), daemonized: se.Reason == actuate.ReasonDaemonized, notRunnable: notRunnable})
	})
	r.queue.Add(s.name)
	return cerr
}

// startFailureReason says in plain words why a start failed: the cause goes
// with the message ("write record: ...: no space left on device" says what
// to fix, "write record" alone does not), and a program that cannot be run
// is named with the folder it was looked for in (programFailure).
func startFailureReason(se *actuate.StartError, d Desired) string {
	if why, ok := programFailure(se.Err, d); ok {
		return why
	}
	why := se.Message
	if se.Err != nil {
		why += ": " + se.Err.Error()
	}
	return why
}

// stop stops the server's process (abandoning a start in progress first).
func (r *Reconciler) stop(ctx context.Context, s *server, d Desired, a Action, rec *actuate.Record) (Result, error) {
	now := r.clock.Now()
	r.dropPrepared(s)
	if s.startCancel != nil {
		s.startCancel()
		<-s.startDone
		s.startCancel, s.startDone = nil, nil
		// The abandoned process keeps its record: stop it through that.
		if rr, err := r.records.ReadRecord(s.name); err == nil {
			rec = &rr
		} else if !isNotExist(err) {
			return Result{}, err
		}
	}
	t := s.tracked
	if s.probeCancel != nil {
		s.probeCancel()
		s.probeCancel = nil
	}
	if t != nil {
		rr := t.rec
		rec = &rr
		r.exits.Unwatch(t.handle)
	}
	s.gen++ // what was posted about the process being stopped is moot
	if a.Kind == ActionReplace {
		r.event(Event{Server: s.name, Type: EventNormal, Reason: ReasonReplacing, Message: "replacing: " + a.Reason})
	}
	if err := r.change(s, func(st *state) ([]Event, error) {
		return st.stopping(s.name, a.Reason, a.Kind == ActionStop)
	}); err != nil {
		if t != nil {
			r.exits.Watch(t.handle, func() { r.queue.AddFirst(s.name) })
		}
		return Result{}, err
	}
	var sp spec.ServerSpec
	switch {
	case t != nil:
		sp = t.spec
	case d.Server != nil:
		sp = d.Server.Spec
	}
	var err error
	if rec != nil {
		opts := actuate.StopOptions{Grace: sp.TerminationGracePeriod(), KillTimeout: sp.KillTimeout(), Port: rec.Port,
			// The stopped transition's event says it (a replace has none).
			CallerReportsStopped: a.Kind == ActionStop}
		if t != nil {
			// Held since spawn or adoption: stopped whatever it has
			// exec'd into or renamed itself to (issue 13).
			opts.Held = t.handle
		}
		err = r.act.Stop(ctx, *rec, opts)
	}
	if t != nil {
		_ = t.handle.Close()
	}
	s.tracked = nil
	if err == nil {
		r.forgetStarted(s)
	}
	var q *actuate.QuarantineError
	switch {
	case err == nil && a.Kind == ActionReplace:
		exit := exitInput{
			exit: &LastExit{Code: -1, Signal: "SIGTERM", Reason: "stopped: " + a.Reason, At: now},
			hash: d.Hash,
		}
		if !a.Fresh {
			// A liveness restart counts as a crash.
			r.mu.Lock()
			readyFor := time.Duration(0)
			if s.st.isReady {
				readyFor = now.Sub(s.st.readySince)
			}
			exit.restart = r.backoff.After(s.st.crashes, readyFor)
			r.mu.Unlock()
			s.exitSeq++
		}
		cerr := r.change(s, func(st *state) ([]Event, error) { return st.replaced(s.name, a.Reason, a.Fresh, exit, now) })
		r.queue.Add(s.name) // runs again right after this pass
		return Result{}, cerr
	case err == nil:
		cerr := r.change(s, func(st *state) ([]Event, error) { return st.stopped(s.name, a.Reason, now) })
		r.events.rest(s.name)
		r.queue.Add(s.name) // forgotten next pass if no longer declared
		r.stopDone(s.name, sp.DependsOn)
		return Result{}, cerr
	case errors.As(err, &q):
		// Left alone and no longer tracked; actuate has reported it.
		cerr := r.change(s, func(st *state) ([]Event, error) {
			return st.quarantined(s.name, quarantineInput{reason: string(q.Reason), message: quarantineText(q), rec: rec, q: q, silent: true}, now)
		})
		r.stopDone(s.name, sp.DependsOn)
		return Result{}, cerr
	default:
		// Not stopped, or stopped with its record left behind (the state
		// folder full or read-only): either way no process is tracked now;
		// the next pass verifies the record again (a stale one is removed
		// without a signal), with the queue's backoff.
		_ = r.change(s, func(st *state) ([]Event, error) { return st.stopFailed(s.name, err, now) })
		r.stopDone(s.name, sp.DependsOn)
		return Result{}, err // actuate's errors already say "stop server <name>: ..."
	}
}

// stopDone tells the servers a stop may have held back (a pruned or held
// dependency waits for its dependents; a replica waits for its rolling
// turn while another is not Ready) that it has ended.
func (r *Reconciler) stopDone(name string, deps []string) {
	r.mu.Lock()
	if r.stopping != nil {
		if d, ok := r.stopping[name]; ok {
			deps = append(deps, d...)
			r.unstopLocked(name)
		}
	}
	if d, ok := r.desired[name]; ok && d.replicaOf() != "" {
		deps = append(deps, r.rollingWaitersLocked(d.replicaOf())...)
	}
	r.mu.Unlock()
	r.enqueueServers(deps)
}
