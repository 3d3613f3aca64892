package reconciler

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/go-logr/logr"

	"github.com/procfleet/procfleet/actuate"
	"github.com/procfleet/procfleet/observe"
	"github.com/procfleet/procfleet/spec"
)

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

// reconcile is one level-triggered pass over one server: read its whole
// state anew, plan, apply.
func (r *Reconciler) reconcile(ctx context.Context, name string) (Result, error) {
	defer r.cfg.Metrics.observeReconcile(time.Now())
	log := logr.FromContextOrDiscard(ctx)
	r.mu.Lock()
	s := r.serverLocked(name)
	desired := r.desired
	if len(r.held) > 0 {
		desired = withHeld(desired, r.held)
	}
	r.mu.Unlock()
	d, declared := desired[name]

	ob, err := r.observe(ctx, s, d, declared)
	if err != nil {
		return Result{}, err
	}
	observed := r.observedFor(name, ob.obs, desired, declared && !d.Held)
	a := PlanServer(name, desired, observed)
	log.V(1).Info("Planned", "action", a.Kind.String(), "reason", a.Reason, "phase", a.Phase.String())
	res, err := r.apply(ctx, s, d, a, ob)
	if werr := r.rewriteRecord(s); werr != nil && err == nil {
		err = werr // tried again with the queue's backoff
	}
	r.mu.Lock()
	r.passes++
	s.lastPass = r.passes
	r.mu.Unlock()
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

// observedFor builds the observed map Plan reads: this server, the
// readiness of its dependencies, and (for a server being stopped: pruned,
// or held by down, declared false) the other servers still running.
func (r *Reconciler) observedFor(name string, self Observed, desired map[string]Desired, declared bool) map[string]Observed {
	m := map[string]Observed{name: self}
	r.mu.Lock()
	defer r.mu.Unlock()
	if declared {
		if d := desired[name]; d.Server != nil {
			for _, dep := range d.Server.Spec.DependsOn {
				if s := r.servers[dep]; s != nil {
					m[dep] = Observed{Ready: s.isReady && s.tracked != nil}
				}
			}
		}
		return m
	}
	for n, s := range r.servers {
		if n == name || s.tracked == nil {
			continue
		}
		if d, ok := desired[n]; ok && !d.Held && !r.held[n] {
			continue
		}
		m[n] = Observed{Ownership: OwnOwned, Tracked: true, DependsOn: s.tracked.spec.DependsOn}
	}
	return m
}

// observe reads the state of one server: its tracked process (exited?), or
// its record verified against the kernel, its port when a conflict kept it
// from starting, and what the reconciler remembers (exit, backoff).
func (r *Reconciler) observe(ctx context.Context, s *server, d Desired, declared bool) (observation, error) {
	var ob observation
	r.mu.Lock()
	t, starting := s.tracked, s.starting
	if starting {
		ob.obs = Observed{Ownership: OwnOwned, Tracked: true, Starting: true, SpecHash: s.startHash}
	}
	r.mu.Unlock()

	switch {
	case starting:
	case t != nil && t.handle.Exited():
		r.handleExit(ctx, s, t)
	case t != nil:
		rec := t.rec
		ob.rec = &rec
		ob.obs = Observed{Ownership: OwnOwned, Tracked: true, SpecHash: rec.SpecHash, DependsOn: t.spec.DependsOn}
	}

	if !starting && ob.rec == nil {
		if err := r.observeRecord(s, d, &ob); err != nil {
			return ob, err
		}
	}

	r.mu.Lock()
	defer r.mu.Unlock()
	o := &ob.obs
	o.Phase = s.phase
	o.Ready = s.isReady
	o.LivenessFailed = s.livenessFailed
	if s.exitPending {
		o.Exit, o.ExitHash = s.lastExit, s.exitHash
		if rem := s.restartAt.Sub(r.clock.Now()); rem > 0 {
			o.BackoffRemaining = rem
		}
	}
	if s.portHolder != "" && o.Ownership == OwnNone {
		port := 0
		if d.Server != nil {
			port = d.Server.Spec.Port
		}
		r.mu.Unlock()
		holder := portHolderOf(port)
		r.mu.Lock()
		s.portHolder = holder
		o.PortHolder = holder
	}
	return ob, nil
}

// recordGone observes a server without a record. A quarantine found at a
// stop (Unkillable, UnverifiedOwner) ends: the process it protected is
// gone. An UntrustedRecord quarantine
// (its record was moved aside: whatever it described may still run) is
// lifted only once nothing it could protect is left, so that a second copy
// is never started blindly; nothing is ever signalled on the word of that
// record.
func (r *Reconciler) recordGone(s *server, d Desired, ob *observation) {
	r.mu.Lock()
	q, ue := s.quarantine, s.untrusted
	if q != nil && q.Reason != actuate.UntrustedRecord {
		s.quarantine = nil // the unkillable process is gone
	}
	r.mu.Unlock()
	if q == nil || q.Reason != actuate.UntrustedRecord {
		return
	}
	why, gone := untrustedGone(ue, d)
	if !gone {
		r.log.V(1).Info("Untrusted record quarantine kept", "server", s.name, "why", why)
		ob.obs = Observed{Ownership: OwnQuarantined, Reason: string(q.Reason), Message: q.Message}
		return
	}
	r.mu.Lock()
	if s.quarantine == q {
		s.quarantine, s.untrusted = nil, nil
	}
	r.mu.Unlock()
	r.event(s.name, EventNormal, ReasonQuarantineLifted, "untrusted record quarantine lifted, nothing signalled: "+why, false)
}

// observeRecord reads and verifies the server's record.
func (r *Reconciler) observeRecord(s *server, d Desired, ob *observation) error {
	rec, err := r.records.ReadRecord(s.name)
	if err != nil {
		var ue *actuate.UntrustedRecordError
		switch {
		case isNotExist(err):
			r.recordGone(s, d, ob)
			return nil
		case errors.As(err, &ue):
			r.mu.Lock()
			s.setUntrusted(ue)
			r.mu.Unlock()
			ob.obs = Observed{Ownership: OwnQuarantined, Reason: string(actuate.UntrustedRecord), Message: ue.Error()}
			return nil
		case errors.As(err, new(*actuate.NewerRecordError)):
			// Rule 6: a record this procfleet cannot read may still prove
			// that the server runs; keep it, signal nothing, start nothing.
			ob.obs = Observed{Ownership: OwnQuarantined, Reason: string(actuate.UnverifiedOwner), Message: err.Error()}
			return nil
		}
		return fmt.Errorf("observe server %s: %w", s.name, err)
	}
	ob.rec = &rec
	v := r.verify(rec)
	switch v.Verdict {
	case actuate.VerdictOwned:
		ob.obs = Observed{Ownership: OwnOwned, SpecHash: rec.SpecHash}
		ob.handle = v.Handle
		r.mu.Lock()
		q := s.quarantine
		if q != nil && q.Reason != actuate.Unkillable && q.Reason != actuate.UntrustedRecord {
			// Quarantined by a stop that could not verify it (rule 6: its
			// identity could not be read then): verified now, the
			// quarantine is over.
			s.quarantine, q = nil, nil
		}
		r.mu.Unlock()
		if q != nil && q.Reason == actuate.Unkillable && q.PID == rec.PID {
			// Found unkillable before: leave it alone.
			ob.obs = Observed{Ownership: OwnQuarantined, Reason: string(q.Reason), Message: q.Message}
			closeHandle(ob)
		}
	case actuate.VerdictStale:
		ob.obs = Observed{Ownership: OwnStale, Reason: v.Message, SpecHash: rec.SpecHash}
	case actuate.VerdictReused:
		ob.obs = Observed{Ownership: OwnReused, Reason: v.Message, SpecHash: rec.SpecHash}
	default:
		ob.obs = Observed{Ownership: OwnQuarantined, Reason: string(v.Reason), Message: v.Message + "; " + actuate.ManualStopHint(rec)}
	}
	return nil
}

func closeHandle(ob *observation) {
	if ob.handle != nil {
		_ = ob.handle.Close()
		ob.handle = nil
	}
}

// portHolderOf describes who holds port now, "" when nobody does.
func portHolderOf(port int) string {
	if port <= 0 {
		return ""
	}
	ls, err := observe.Listeners(port)
	if err != nil || len(ls) == 0 {
		return ""
	}
	var parts []string
	for _, l := range ls {
		if len(l.PIDs) > 0 {
			parts = append(parts, fmt.Sprintf("pid %d (%s)", l.PIDs[0], strings.Join(l.Cmdline, " ")))
		} else {
			parts = append(parts, fmt.Sprintf("a process of uid %d", l.UID))
		}
	}
	return strings.Join(parts, ", ")
}

// handleExit records that a tracked process exited: how (when it was our
// child), its record removed, its readiness lost, the next restart's
// backoff computed. It never signals anything.
//
// An adopted process is not our child: its status is unknown (-1) when it
// is seen to exit, and the restart is not held back for it. Its parent
// (init, or whoever started the earlier procfleet) reaps it, and then its
// pidfd tells the status (Linux >= 6.15): learnExit looks for it off the
// worker, keeping the pidfd open until then, and puts it in the last exit
// if that is still this exit.
func (r *Reconciler) handleExit(ctx context.Context, s *server, t *tracked) {
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
			le = &LastExit{Code: st.Code, Signal: st.Signal, Reason: st.String()}
			if st.Signal == "SIGKILL" {
				le.Reason += " (the out-of-memory killer may have ended it)"
			}
		}
	}
	if !learn {
		_ = t.handle.Close()
	}
	if err := r.records.RemoveRecord(s.name); err != nil {
		r.log.Error(err, "Cannot remove the record of an exited server", "server", s.name)
	}
	now := r.clock.Now()
	le.At = now
	r.mu.Lock()
	if s.learnCancel != nil {
		s.learnCancel() // an earlier exit's status no longer matters
		s.learnCancel = nil
	}
	lctx, lcancel := context.WithCancel(ctx)
	if learn {
		s.learnCancel = lcancel
	} else {
		lcancel()
	}
	if s.tracked == t {
		s.tracked = nil
	}
	if s.probeCancel != nil {
		s.probeCancel()
		s.probeCancel = nil
	}
	s.livenessFailed = false
	s.lastExit, s.exitPending, s.exitHash = le, true, t.rec.SpecHash
	s.restartAt = now.Add(r.backoff.When(s.name))
	r.setReadyLocked(s, false, ReasonExited, le.Reason)
	r.setPhaseLocked(s, PhasePending, "exited: "+le.Reason)
	r.mu.Unlock()
	r.event(s.name, EventWarning, ReasonExited, fmt.Sprintf("pid %d %s", t.rec.PID, le.Reason), false)
	if learn {
		// Run's teardown cancels lctx (learnCancel) and waits for r.starts.
		r.starts.Go(func() {
			defer lcancel()
			r.learnExit(lctx, s, t.handle, t.rec.PID, le)
		})
	}
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
// exitLearnBound has passed; then closes h. A status learned replaces le as
// the server's last exit if le still is (the server did not exit again
// meanwhile), with an ExitLearned event; else le stays (-1, unknown).
func (r *Reconciler) learnExit(ctx context.Context, s *server, h *observe.Handle, pid int, le *LastExit) {
	defer h.Close()
	wait, waited := 10*time.Millisecond, time.Duration(0)
	for {
		if st, ok := h.ExitStatus(); ok {
			r.exitLearned(s, pid, le, st, waited)
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
	r.log.V(1).Info("Exit status not learned", "server", s.name, "pid", pid, "waited", waited)
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

// exitLearned puts a learned exit status in place of le, if le is still the
// server's last exit. The copy keeps le's time: it is the same exit.
func (r *Reconciler) exitLearned(s *server, pid int, le *LastExit, st observe.ExitStatus, waited time.Duration) {
	learned := &LastExit{Code: st.Code, Signal: st.Signal, At: le.At}
	learned.Reason = st.String() + " (learned after its parent reaped it)"
	if st.Signal == "SIGKILL" {
		learned.Reason = st.String() + " (learned after its parent reaped it; the out-of-memory killer may have ended it)"
	}
	r.mu.Lock()
	current := s.lastExit == le
	if current {
		// A new value, not an edit of le: Status hands le out to readers.
		s.lastExit = learned
		r.kickStatus()
	}
	r.mu.Unlock()
	r.log.V(1).Info("Exit status learned", "server", s.name, "pid", pid, "status", st.String(), "waited", waited, "current", current)
	if !current {
		return
	}
	typ := EventNormal
	if learned.Failed() {
		typ = EventWarning
	}
	r.event(s.name, typ, ReasonExitLearned, fmt.Sprintf("pid %d %s", pid, learned.Reason), false)
}

// apply carries out one action, in numbered steps.
func (r *Reconciler) apply(ctx context.Context, s *server, d Desired, a Action, ob observation) (Result, error) {
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
		r.mu.Lock()
		r.recordOKLocked(s)
		r.mu.Unlock()
		r.event(s.name, EventNormal, actuate.EventRecordRemoved, "record removed, nothing signalled: "+ob.obs.Reason, false)
	}
	// 2. A pin from verification is kept only by adoption.
	if a.Kind != ActionAdopt {
		closeHandle(&ob)
	}
	// 3. The action.
	switch a.Kind {
	case ActionNothing:
		r.mu.Lock()
		if a.Phase == PhaseQuarantined {
			r.setQuarantinedLocked(s, a)
		} else {
			r.setPhaseLocked(s, a.Phase, a.Reason)
		}
		_, declared := r.desired[s.name]
		if !declared && a.Phase == PhaseStopped && s.tracked == nil && !s.starting {
			delete(r.servers, s.name) // gone from files and from the world
			r.kickStatus()
		}
		r.mu.Unlock()
		return Result{}, nil
	case ActionWait:
		r.mu.Lock()
		was, wasReason := s.phase, s.reason
		r.setPhaseLocked(s, a.Phase, a.Reason)
		r.mu.Unlock()
		if a.Phase == PhaseCrashLoopBackOff && was != PhaseCrashLoopBackOff {
			r.event(s.name, EventWarning, ReasonBackOff, a.Reason, false)
		}
		if a.Phase == PhasePending && wasReason != a.Reason {
			r.event(s.name, EventNormal, ReasonWaiting, a.Reason, false) // "waiting for db to be Ready"
		}
		return Result{RequeueAfter: a.RequeueAfter}, nil
	case ActionQuarantine:
		r.mu.Lock()
		r.setQuarantinedLocked(s, a)
		r.mu.Unlock()
		r.event(s.name, EventWarning, ReasonQuarantined, a.Reason+" (nothing signalled)", false)
		return Result{}, nil
	case ActionAdopt:
		r.adopt(ctx, s, d, *ob.rec, ob.handle)
		return Result{}, nil
	case ActionStart:
		return r.start(ctx, s, d, a)
	case ActionStop:
		return r.stop(ctx, s, d, a, ob.rec)
	case ActionReplace:
		r.event(s.name, EventNormal, ReasonReplacing, "replacing: "+a.Reason, false)
		res, err := r.stop(ctx, s, d, a, ob.rec)
		if err == nil {
			r.mu.Lock()
			if a.Fresh {
				r.backoff.Forget(s.name)
				s.exitPending = false
			} else {
				// A liveness restart counts as a crash: restart count and
				// backoff go on.
				now := r.clock.Now()
				s.lastExit = &LastExit{Code: -1, Signal: "SIGTERM", Reason: "stopped: " + a.Reason, At: now}
				s.exitPending, s.exitHash = true, d.Hash
				s.restartAt = now.Add(r.backoff.When(s.name))
			}
			r.mu.Unlock()
			r.queue.Add(s.name) // runs again right after this pass
		}
		return res, err
	}
	return Result{}, fmt.Errorf("reconcile %s: unknown action %s", s.name, a.Kind)
}

// setQuarantinedLocked reports s Quarantined: the reason is the quarantine
// reason (PortConflict, UnverifiedOwner...), the message says the rest.
func (r *Reconciler) setQuarantinedLocked(s *server, a Action) {
	reason := a.QuarantineReason
	if reason == "" {
		reason = a.Reason
	}
	r.setPhaseLocked(s, PhaseQuarantined, reason)
	if s.message != a.Reason {
		s.message = a.Reason
		r.kickStatus()
	}
}

// adopt takes an owned process found from its record into the reconciler's
// care: its exit is watched, its probes run; it is never started again.
func (r *Reconciler) adopt(ctx context.Context, s *server, d Desired, rec actuate.Record, h *observe.Handle) {
	t := &tracked{rec: rec, handle: h, spec: d.Server.Spec, startedAt: rec.StartedAt}
	r.mu.Lock()
	s.tracked = t
	s.exitPending, s.rewrite = false, false
	// What was said of it before (a quarantine lifted by this proof, a
	// record that could not be removed) is over.
	s.message, s.recordErr = "", ""
	r.setPhaseLocked(s, PhaseRunning, "adopted")
	r.mu.Unlock()
	r.exits.Watch(h, func() { r.queue.Add(s.name) })
	r.event(s.name, EventNormal, ReasonAdopted, fmt.Sprintf("adopted pid %d (%s)", rec.PID, rec.StartedAt.Format(time.RFC3339)), false)
	// Readiness is checked off the worker until it passes (the process may
	// have been adopted mid-start), with backoff from 100 ms to 5 s; then
	// only declared probes go on.
	ready := readinessCheck(d.Server)
	r.starts.Go(func() {
		wait := 10 * startupReadyPeriod
		for {
			ok, msg := true, ""
			if ready != nil {
				res := ready(ctx)
				ok, msg = res.OK, res.Message
			}
			r.mu.Lock()
			current := s.tracked == t
			if current {
				r.setReadyLocked(s, ok, "", msg)
			}
			r.mu.Unlock()
			if !current || ctx.Err() != nil {
				return
			}
			if ok {
				r.queue.Add(s.name)
				r.enqueueDependents(s.name)
				return
			}
			if !r.sleep(ctx, wait) {
				return
			}
			wait = min(2*wait, 5*time.Second)
		}
	})
	r.startProbes(ctx, s, d.Server, t)
}

// startRequest turns a declared server into what actuate needs.
func startRequest(srv *spec.Server, hash string) actuate.StartRequest {
	req := actuate.StartRequest{
		Name: srv.Metadata.Name, Argv: srv.Spec.Argv(), Dir: srv.Spec.WorkingDir,
		Env: envList(srv.Spec.Env), Port: srv.Spec.Port, SpecHash: hash,
		StartupTimeout: srv.Spec.StartupTimeout(), Grace: srv.Spec.TerminationGracePeriod(),
		KillTimeout: srv.Spec.KillTimeout(), ReadyPeriod: startupReadyPeriod,
	}
	if p := srv.Spec.ReadinessProbe; p != nil {
		req.Ready = probeFunc(p, srv)
		req.ReadyPeriod = min(p.Period(), 100*time.Millisecond)
	} else {
		req.Ready = readinessCheck(srv)
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
	if r.cfg.OneShot && !a.Fresh {
		r.mu.Lock()
		reason := "exited"
		if s.lastExit != nil {
			reason = s.lastExit.Reason
		}
		r.setPhaseLocked(s, PhaseFailed, reason)
		r.mu.Unlock()
		return Result{}, nil
	}
	r.mu.Lock()
	if a.Fresh {
		r.backoff.Forget(s.name)
	} else {
		s.restarts++
	}
	s.exitPending = false
	s.portHolder = ""
	s.livenessFailed = false
	if s.phase == PhaseRunning || s.phase == PhaseStopping {
		r.setPhaseLocked(s, PhasePending, a.Reason)
	}
	r.setPhaseLocked(s, PhaseStarting, a.Reason)
	r.mu.Unlock()
	r.event(s.name, EventNormal, ReasonStarting, "starting", false)

	req := startRequest(d.Server, d.Hash)
	began := r.clock.Now()
	running, err := r.act.Spawn(ctx, req)
	if err != nil {
		return r.startFailed(s, d, err)
	}
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	r.mu.Lock()
	s.starting, s.startHash, s.startBegan = true, d.Hash, began
	s.startCancel, s.startDone = cancel, done
	r.mu.Unlock()
	r.starts.Go(func() {
		defer close(done)
		defer cancel()
		r.awaitReady(wctx, ctx, s, d, req, running)
	})
	return Result{}, nil
}

// startFailed records a start that failed: a port conflict quarantines,
// anything else counts as an exit (restart with backoff, or Failed).
func (r *Reconciler) startFailed(s *server, d Desired, err error) (Result, error) {
	var se *actuate.StartError
	if !errors.As(err, &se) {
		r.setPhase(s, PhasePending, err.Error())
		return Result{}, fmt.Errorf("start server %s: %w", s.name, err)
	}
	if se.Reason == actuate.ReasonPortConflict {
		holder := strings.TrimPrefix(se.Message, fmt.Sprintf("port %d is held by ", d.Server.Spec.Port))
		r.mu.Lock()
		s.portHolder = holder
		r.setPhaseLocked(s, PhasePending, se.Message)
		r.setQuarantinedLocked(s, Action{QuarantineReason: ReasonPortConflict, Reason: se.Message})
		r.mu.Unlock()
		r.event(s.name, EventWarning, ReasonQuarantined, "PortConflict: "+se.Message+" (nothing signalled)", false)
		return Result{}, nil
	}
	// The cause goes with the message: "write record: ...: no space left
	// on device" says what to fix, "write record" alone does not.
	why := se.Message
	if se.Err != nil {
		why += ": " + se.Err.Error()
	}
	now := r.clock.Now()
	le := &LastExit{Code: se.ExitCode, Signal: se.Signal, Reason: why, At: now}
	r.mu.Lock()
	s.lastExit, s.exitPending, s.exitHash = le, true, d.Hash
	s.restartAt = now.Add(r.backoff.When(s.name))
	s.message = strings.Join(se.LogTail, "\n")
	r.setReadyLocked(s, false, ReasonFailed, why)
	r.setPhaseLocked(s, PhasePending, "failed: "+why)
	if r.cfg.OneShot {
		r.setPhaseLocked(s, PhaseFailed, why)
	}
	r.mu.Unlock()
	msg := "failed: " + why
	if len(se.LogTail) > 0 {
		msg += "; last log line: " + se.LogTail[len(se.LogTail)-1]
	}
	r.event(s.name, EventWarning, ReasonFailed, msg, false)
	r.queue.Add(s.name)
	return Result{}, nil
}

// awaitReady runs on its own goroutine for each start. ctx ends the wait
// (replacement, shutdown); runCtx, the reconciler's, bounds the probes that
// follow.
func (r *Reconciler) awaitReady(ctx, runCtx context.Context, s *server, d Desired, req actuate.StartRequest, running *actuate.Running) {
	err := r.act.WaitReady(ctx, req, running)
	r.mu.Lock()
	s.starting = false
	s.startCancel = nil
	if err != nil {
		r.mu.Unlock()
		if ctx.Err() != nil {
			// Abandoned (shutdown or replacement): the process keeps
			// running with its record and is adopted or stopped by the
			// next pass.
			r.queue.Add(s.name)
			return
		}
		_, _ = r.startFailed(s, d, err)
		return
	}
	t := &tracked{rec: running.Record, handle: running.Handle, running: running, spec: d.Server.Spec, startedAt: running.Record.StartedAt}
	s.tracked, s.rewrite = t, false
	r.recordOKLocked(s) // its record was written
	r.setReadyLocked(s, true, "", "")
	r.setPhaseLocked(s, PhaseRunning, "ready")
	took := r.clock.Since(s.startBegan)
	r.mu.Unlock()
	r.exits.Watch(running.Handle, func() { r.queue.Add(s.name) })
	r.event(s.name, EventNormal, ReasonReady, fmt.Sprintf("ready in %.2fs (pid %d)", took.Seconds(), running.Record.PID), false)
	r.startProbes(runCtx, s, d.Server, t)
	r.queue.Add(s.name)
	r.enqueueDependents(s.name)
}

// stop stops the server's process (abandoning a start in progress first).
func (r *Reconciler) stop(ctx context.Context, s *server, d Desired, a Action, rec *actuate.Record) (Result, error) {
	r.mu.Lock()
	cancel, done := s.startCancel, s.startDone
	r.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
		if rr, err := r.records.ReadRecord(s.name); err == nil {
			rec = &rr
		} else if !isNotExist(err) {
			return Result{}, err
		}
	}
	r.mu.Lock()
	t := s.tracked
	if s.probeCancel != nil {
		s.probeCancel()
		s.probeCancel = nil
	}
	if t != nil {
		rr := t.rec
		rec = &rr
	}
	r.setPhaseLocked(s, PhaseStopping, a.Reason)
	r.mu.Unlock()
	if t != nil {
		r.exits.Unwatch(t.handle)
	}
	var sp spec.ServerSpec
	switch {
	case t != nil:
		sp = t.spec
	case d.Server != nil:
		sp = d.Server.Spec
	}
	if a.Kind == ActionStop {
		r.event(s.name, EventNormal, ReasonStopping, "stopping: "+a.Reason, false)
	}
	var err error
	if rec != nil {
		opts := actuate.StopOptions{Grace: sp.TerminationGracePeriod(), KillTimeout: sp.KillTimeout(), Port: rec.Port}
		err = r.act.Stop(ctx, *rec, opts)
	}
	if t != nil {
		_ = t.handle.Close()
	}
	var q *actuate.QuarantineError
	r.mu.Lock()
	if s.tracked == t {
		s.tracked = nil
	}
	switch {
	case err == nil:
		r.setReadyLocked(s, false, ReasonStopped, a.Reason)
		if a.Kind == ActionReplace {
			r.setPhaseLocked(s, PhasePending, a.Reason)
		} else {
			r.setPhaseLocked(s, PhaseStopped, a.Reason)
			s.exitPending = false
		}
	case errors.As(err, &q):
		// Left alone and no longer tracked: its readiness is not known.
		s.quarantine = q
		r.setReadyLocked(s, false, string(q.Reason), q.Message)
		r.setPhaseLocked(s, PhaseQuarantined, string(q.Reason))
		s.message = q.Error()
	default:
		// Not stopped, or stopped with its record left behind (the state
		// folder full or read-only): either way no process is tracked or
		// ready now; the next pass verifies the record again (a stale one
		// is removed without a signal), with the queue's backoff.
		r.setReadyLocked(s, false, ReasonFailed, err.Error())
		r.setPhaseLocked(s, PhaseFailed, err.Error())
	}
	r.mu.Unlock()

	switch {
	case err == nil:
		if a.Kind == ActionStop {
			r.event(s.name, EventNormal, ReasonStopped, "stopped", false)
			r.queue.Add(s.name) // forgotten next pass if no longer declared
		}
		for _, dep := range sp.DependsOn {
			r.queue.Add(dep) // a pruned or held dependency may wait for us
		}
		return Result{}, nil
	case q != nil:
		r.event(s.name, EventWarning, ReasonQuarantined, q.Error(), false)
		return Result{}, nil
	default:
		r.event(s.name, EventWarning, ReasonFailed, "stop failed: "+err.Error(), false)
		return Result{}, err // actuate's errors already say "stop server <name>: ..."
	}
}
