package reconciler

import (
	"fmt"
	"time"

	"github.com/procfleet/procfleet/actuate"
)

// state is what the reconciler knows of one server. Only the worker that
// reconciles the server changes it, and only through the named transitions
// below: each checks that it may happen in the current phase, sets every
// field that goes with it, and returns the events to emit once the
// reconciler's lock is released. An illegal transition is an error (a bug),
// and changes nothing.
type state struct {
	phase   Phase
	reason  string
	message string
	ready   Condition
	// isReady mirrors ready.Status == True: the server counts as Ready
	// (for dependsOn, apply --wait and status), its readiness having held
	// for minReadySeconds.
	isReady bool
	// readySince is when readiness (the probe, or for "running" the spawn)
	// began to hold without a break; zero while it does not hold. Between
	// it and isReady lies the minReadySeconds window.
	readySince time.Time
	// readyNote is the message of the Ready event once the window ends
	// ("" for "ready in Ns (pid N)").
	readyNote string

	restarts int
	// crashes counts exits in a row within the loop window of Ready.
	crashes int
	// The last exit (or failed start) not yet followed by a new start.
	lastExit    *LastExit
	exitPending bool
	exitHash    string
	// exitsBeforeReady counts exits before Ready since the last fresh
	// start or the last time it counted as Ready (apply --wait gives up at
	// two).
	exitsBeforeReady int
	// everReady: Ready at least once since the last fresh start.
	everReady bool
	// lastExitAfterReady: the last exit ended a process that was Ready.
	lastExitAfterReady bool
	restartAt          time.Time
	// restartRule says which restart rule the last exit met.
	restartRule string
	// exitDaemonized: the last failed start daemonized.
	exitDaemonized bool
	// exitNotRunnable: the last failed start could not execute the
	// program (not found, not executable).
	exitNotRunnable bool

	// starting: spawned, readiness awaited off the worker.
	starting   bool
	startHash  string
	startBegan time.Time

	// The process shown: tracked, or found from a record (quarantined);
	// hash is the spec hash it runs (tracked only).
	pid       int
	port      int
	startedAt time.Time
	hash      string
	// membership is how the shown process's members are found (its
	// record's mode; DESIGN.md "Membership"), "" without a process.
	membership actuate.MembershipMode

	portHolder string
	// portChecks counts the re-checks of a held port (PortConflict).
	portChecks int

	livenessFailed bool

	// quarantine holds a quarantine found while stopping (Unkillable,
	// UnverifiedOwner) or an UntrustedRecord one, so that it is not acted
	// on again while its record stands.
	quarantine *actuate.QuarantineError
	// untrusted is the record moved aside that caused an UntrustedRecord
	// quarantine: what is re-examined to lift it.
	untrusted *actuate.UntrustedRecordError
	// recordErr says why a record could not be written or removed.
	recordErr string
	// rewrite: the tracked process's record must be written again.
	rewrite bool
}

// transition names one move of a server's state.
type transition uint8

// The transitions. Each lists, in legalFrom, the phases it may start from.
const (
	tStart        transition = iota // spawned; readiness awaited
	tReady                          // readiness held for the first time after a start
	tStartFailed                    // the start failed (exit before Ready, timeout, spawn error)
	tExit                           // a Running process exited
	tAdopt                          // an owned process found from its record is watched
	tReadiness                      // a probe changed readiness of a Running server
	tLiveness                       // the liveness probe failed its threshold
	tStopping                       // a stop begins
	tStopped                        // a stop ended; the server stays stopped
	tReplaced                       // a stop ended; the server starts again
	tStopFailed                     // a stop failed (not stopped, or record left)
	tQuarantine                     // left alone: nothing signalled
	tLift                           // a quarantine ended
	tWait                           // nothing to do yet (dependencies)
	tBackOff                        // a restart waits (CrashLoopBackOff)
	tFail                           // given up (restartPolicy, one-shot)
	tRest                           // at rest, stopped (exited under its policy, not declared, held)
	tObserved                       // a pass found nothing to change; the reason may move
	tExitLearned                    // an adopted process's exit status was learned
	tRecordFailed                   // a record could not be written or removed
	tRecordOK                       // a record was written or removed after failures
	tMinReadyWait                   // readiness holds, not yet for minReadySeconds
	tCounted                        // readiness held for minReadySeconds: Ready
	numTransitions
)

var transitionNames = [numTransitions]string{
	"start", "ready", "startFailed", "exit", "adopt", "readiness", "liveness",
	"stopping", "stopped", "replaced", "stopFailed", "quarantine", "lift",
	"wait", "backOff", "fail", "rest", "observed", "exitLearned",
	"recordFailed", "recordOK", "minReadyWait", "counted",
}

func (t transition) String() string {
	if t < numTransitions {
		return transitionNames[t]
	}
	return fmt.Sprintf("transition(%d)", t)
}

// phases is a set of phases.
type phases uint16

func setOf(ps ...Phase) phases {
	var s phases
	for _, p := range ps {
		s |= 1 << p
	}
	return s
}

func (s phases) has(p Phase) bool { return s&(1<<p) != 0 }

var allPhases = setOf(PhasePending, PhaseStarting, PhaseRunning, PhaseStopping, PhaseStopped, PhaseFailed, PhaseCrashLoopBackOff, PhaseQuarantined)

// legalFrom is the transition table. Its rules: Running is reached only
// through a readiness wait (ready) or by adopting a process that is there;
// a Quarantined server is never stopped; a stop ends only from Stopping;
// a server starts from any phase at rest, never from Running, Starting or
// Stopping (those stop first).
var legalFrom = [numTransitions]phases{
	tStart:        setOf(PhasePending, PhaseStopped, PhaseFailed, PhaseCrashLoopBackOff, PhaseQuarantined),
	tReady:        setOf(PhaseStarting),
	tStartFailed:  setOf(PhasePending, PhaseStarting, PhaseStopped, PhaseFailed, PhaseCrashLoopBackOff, PhaseQuarantined),
	tExit:         setOf(PhaseRunning, PhaseStarting, PhaseQuarantined, PhaseFailed),
	tAdopt:        setOf(PhasePending, PhaseStopped, PhaseFailed, PhaseCrashLoopBackOff, PhaseQuarantined),
	tReadiness:    setOf(PhaseRunning),
	tLiveness:     setOf(PhaseRunning),
	tStopping:     allPhases &^ setOf(PhaseQuarantined),
	tStopped:      setOf(PhaseStopping),
	tReplaced:     setOf(PhaseStopping),
	tStopFailed:   setOf(PhaseStopping),
	tQuarantine:   allPhases,
	tLift:         setOf(PhaseQuarantined),
	tWait:         setOf(PhasePending, PhaseStopped, PhaseFailed, PhaseCrashLoopBackOff, PhaseQuarantined, PhaseRunning, PhaseStopping),
	tBackOff:      setOf(PhasePending, PhaseCrashLoopBackOff),
	tFail:         setOf(PhasePending, PhaseCrashLoopBackOff, PhaseFailed, PhaseStopped),
	tRest:         setOf(PhasePending, PhaseStopped, PhaseFailed, PhaseCrashLoopBackOff, PhaseQuarantined),
	tObserved:     allPhases,
	tExitLearned:  allPhases,
	tRecordFailed: allPhases,
	tRecordOK:     allPhases,
	tMinReadyWait: setOf(PhaseRunning),
	tCounted:      setOf(PhaseRunning),
}

// TransitionError is a refused transition: a bug in the reconciler, never
// a user error.
type TransitionError struct {
	Server     string
	Transition string
	From       Phase
}

func (e *TransitionError) Error() string {
	return fmt.Sprintf("server %s: transition %s is not allowed from phase %s", e.Server, e.Transition, e.From)
}

// may returns a *TransitionError when t may not happen now.
func (s *state) may(name string, t transition) error {
	if !legalFrom[t].has(s.phase) {
		return &TransitionError{Server: name, Transition: t.String(), From: s.phase}
	}
	return nil
}

// ev makes an event of the server (time and name are the emitter's).
func ev(typ, reason, message string) Event {
	return Event{Type: typ, Reason: reason, Message: message}
}

func (s *state) setPhase(p Phase, reason string) {
	s.phase, s.reason = p, reason
}

// setReady sets the Ready condition; it reports whether its status moved.
func (s *state) setReady(ready bool, reason, message string, now time.Time) bool {
	st := ConditionFalse
	if ready {
		st = ConditionTrue
	}
	if s.ready.Type == "" {
		s.ready = Condition{Type: ConditionReady, Status: ConditionUnknown}
	}
	changed := setCondition(&s.ready, st, reason, message, now)
	if ready && s.readySince.IsZero() {
		s.readySince = now
	}
	if !ready {
		s.readySince = time.Time{}
	}
	s.isReady = ready
	return changed
}

// noProcess forgets the process shown.
func (s *state) noProcess() {
	s.pid, s.port, s.startedAt, s.hash = 0, 0, time.Time{}, ""
	s.membership = ""
}

// startInput is what a start needs to know.
type startInput struct {
	hash   string
	fresh  bool // a new spec, a first start or restart NAME: the count resets
	reason string
	now    time.Time
}

// start: spawned; readiness is awaited off the worker. A fresh start resets
// the restart count and the crash loop; a restart counts one more.
func (s *state) start(name string, in startInput) ([]Event, error) {
	if err := s.may(name, tStart); err != nil {
		return nil, err
	}
	if in.fresh {
		s.restarts, s.crashes, s.exitsBeforeReady, s.everReady = 0, 0, 0, false
	} else {
		s.restarts++
	}
	s.exitPending, s.restartAt, s.restartRule = false, time.Time{}, ""
	s.portHolder, s.portChecks = "", 0
	s.livenessFailed = false
	s.quarantine, s.untrusted = nil, nil
	s.starting, s.startHash, s.startBegan = true, in.hash, in.now
	s.message = ""
	s.noProcess()
	s.setReady(false, ReasonStarting, "", in.now)
	s.setPhase(PhaseStarting, in.reason)
	return []Event{ev(EventNormal, ReasonStarting, "starting")}, nil
}

// readyInput describes the process whose readiness held.
type readyInput struct {
	rec actuate.Record
	// since is when its readiness first held: when the check passed, or
	// for "running" the spawn.
	since time.Time
	// window is the server's minReadySeconds, and windowMsg what a server
	// inside it waits for: a window not over yet shows at once.
	window    time.Duration
	windowMsg string
	now       time.Time
}

// becameReady: the started process passed its readiness check. It runs;
// it counts as Ready once the plan finds that readiness has held for
// minReadySeconds (counted), in this pass for a window of 0.
func (s *state) becameReady(name string, in readyInput) ([]Event, error) {
	if err := s.may(name, tReady); err != nil {
		return nil, err
	}
	s.starting = false
	s.pid, s.port, s.startedAt, s.hash = in.rec.PID, in.rec.Port, in.rec.StartedAt, in.rec.SpecHash
	s.membership = actuate.MembershipOf(in.rec)
	s.recordErr, s.rewrite = "", false
	s.message, s.readyNote = "", ""
	s.readySince = in.since
	s.setPhase(PhaseRunning, "running")
	if in.window > 0 && in.now.Sub(in.since) < in.window {
		return s.enterWindow(in.windowMsg, in.now), nil
	}
	return nil, nil
}

// minReadyWait: readiness holds, for less than minReadySeconds so far; the
// server runs and is not Ready yet. msg says how long it must hold.
func (s *state) minReadyWait(name, msg string, now time.Time) ([]Event, error) {
	if err := s.may(name, tMinReadyWait); err != nil {
		return nil, err
	}
	if s.isReady || s.readySince.IsZero() {
		return nil, nil // not in a window: nothing to wait for
	}
	return s.enterWindow(msg, now), nil
}

// enterWindow shows a running server inside its minReadySeconds window:
// not Ready, reason MinReadySeconds, announced once.
func (s *state) enterWindow(msg string, now time.Time) []Event {
	first := s.reason != ReasonMinReadySeconds
	if s.ready.Type == "" {
		s.ready = Condition{Type: ConditionReady, Status: ConditionUnknown}
	}
	setCondition(&s.ready, ConditionFalse, ReasonMinReadySeconds, msg, now)
	s.reason = ReasonMinReadySeconds
	if !first {
		return nil
	}
	return []Event{ev(EventNormal, ReasonMinReadySeconds, fmt.Sprintf("running (pid %d); %s", s.pid, msg))}
}

// counted: readiness has held for minReadySeconds without an exit: the
// server counts as Ready, and its exits before Ready are forgotten.
func (s *state) counted(name string, now time.Time) ([]Event, error) {
	if err := s.may(name, tCounted); err != nil {
		return nil, err
	}
	if s.isReady || s.readySince.IsZero() {
		return nil, nil
	}
	msg := s.readyNote
	if msg == "" {
		msg = fmt.Sprintf("ready in %.2fs (pid %d)", now.Sub(s.startBegan).Seconds(), s.pid)
	}
	s.readyNote, s.message = "", ""
	s.everReady = true
	s.exitsBeforeReady = 0
	s.setReady(true, "", "", now)
	s.reason = "ready"
	return []Event{ev(EventNormal, ReasonReady, msg)}, nil
}

// exitInput describes an exit (or a failed start) and its restart.
type exitInput struct {
	exit    *LastExit
	hash    string
	restart Restart
	// logTail is the last lines the process wrote (the status message).
	logTail string
	// pid is the process that exited, 0 for a start that never ran.
	pid int
	// daemonized: the start failed because the server daemonized.
	daemonized bool
	// notRunnable: the start failed because the program could not be
	// executed.
	notRunnable bool
}

// startFailed: the start ended without a Ready process (it exited, timed
// out, or could not be spawned). What follows is the plan's.
func (s *state) startFailed(name string, in exitInput) ([]Event, error) {
	if err := s.may(name, tStartFailed); err != nil {
		return nil, err
	}
	s.recordExit(in)
	s.lastExitAfterReady = false
	s.exitsBeforeReady++
	s.message = in.logTail
	s.setReady(false, ReasonFailed, in.exit.Reason, in.exit.At)
	s.setPhase(PhasePending, "failed: "+in.exit.Reason)
	msg := "failed: " + in.exit.Reason
	if in.logTail != "" {
		msg += "; last log line: " + lastLine(in.logTail)
	}
	return []Event{ev(EventWarning, ReasonFailed, msg)}, nil
}

// exited: the server's process exited; the plan restarts it (or not).
func (s *state) exited(name string, in exitInput) ([]Event, error) {
	if err := s.may(name, tExit); err != nil {
		return nil, err
	}
	if !s.isReady && s.phase != PhaseQuarantined {
		s.exitsBeforeReady++
	}
	s.recordExit(in)
	s.lastExitAfterReady = s.isReady
	s.livenessFailed = false
	s.quarantine = nil
	s.message = in.logTail
	s.setReady(false, ReasonExited, in.exit.Reason, in.exit.At)
	s.setPhase(PhasePending, "exited: "+in.exit.Reason)
	return []Event{ev(EventWarning, ReasonExited, fmt.Sprintf("pid %d %s", in.pid, in.exit.Reason))}, nil
}

func (s *state) recordExit(in exitInput) {
	s.starting = false
	s.noProcess()
	s.lastExit, s.exitPending, s.exitHash = in.exit, true, in.hash
	s.crashes = in.restart.Crashes
	s.restartAt = in.exit.At.Add(in.restart.Delay)
	s.restartRule = in.restart.Rule
	s.exitDaemonized = in.daemonized
	s.exitNotRunnable = in.notRunnable
}

// adopt: an owned process found from its record is watched from now on.
func (s *state) adopt(name string, rec actuate.Record, now time.Time) ([]Event, error) {
	if err := s.may(name, tAdopt); err != nil {
		return nil, err
	}
	s.exitPending, s.rewrite, s.recordErr = false, false, ""
	s.quarantine, s.untrusted = nil, nil
	s.portHolder, s.portChecks = "", 0
	s.livenessFailed, s.starting = false, false
	s.message = ""
	s.pid, s.port, s.startedAt, s.hash = rec.PID, rec.Port, rec.StartedAt, rec.SpecHash
	s.membership = actuate.MembershipOf(rec)
	s.readyNote = ""
	s.setReady(false, "Adopted", "readiness not checked yet", now)
	if s.ready.Status != ConditionUnknown { // not known until checked
		s.ready.Status, s.ready.LastTransitionTime = ConditionUnknown, now
	}
	s.setPhase(PhaseRunning, "adopted")
	return []Event{ev(EventNormal, ReasonAdopted, fmt.Sprintf("adopted pid %d (%s)", rec.PID, rec.StartedAt.Format(time.RFC3339)))}, nil
}

// readinessInput is what a probe (or the adoption's check) found.
type readinessInput struct {
	ok          bool
	reason, msg string
	// since is when readiness began to hold (zero: now). The adoption's
	// check gives the process's start: it ran without exiting since.
	since time.Time
	now   time.Time
}

// readiness: a probe (or the adoption's check) changed readiness. Readiness
// that begins to hold starts the minReadySeconds window (the plan counts
// it Ready once it has held long enough); readiness lost ends it.
func (s *state) readiness(name string, in readinessInput) ([]Event, error) {
	if err := s.may(name, tReadiness); err != nil {
		return nil, err
	}
	was, held := s.isReady, !s.readySince.IsZero()
	switch {
	case in.ok && !held:
		s.readySince = in.since
		if s.readySince.IsZero() || s.readySince.After(in.now) {
			s.readySince = in.now
		}
		s.readyNote = in.msg
		s.message = ""
	case !in.ok && (was || held):
		s.setReady(false, in.reason, in.msg, in.now)
		s.reason = "not ready"
		return []Event{ev(EventWarning, ReasonNotReady, in.msg)}, nil
	}
	return nil, nil
}

// liveness: the liveness probe failed; the plan replaces the process.
func (s *state) liveness(name, msg string) ([]Event, error) {
	if err := s.may(name, tLiveness); err != nil {
		return nil, err
	}
	s.livenessFailed = true
	return []Event{ev(EventWarning, ReasonUnhealthy, msg)}, nil
}

// stopping: a stop begins (of a process, or of a start in progress).
func (s *state) stopping(name, reason string, announce bool) ([]Event, error) {
	if err := s.may(name, tStopping); err != nil {
		return nil, err
	}
	s.livenessFailed = false
	s.setPhase(PhaseStopping, reason)
	if !announce {
		return nil, nil
	}
	if reason == ReasonStoppedByUser {
		return []Event{ev(EventNormal, ReasonStopping, "stopping")}, nil
	}
	return []Event{ev(EventNormal, ReasonStopping, "stopping: "+reason)}, nil
}

// stopped: the stop ended and the server stays stopped.
func (s *state) stopped(name, reason string, now time.Time) ([]Event, error) {
	if err := s.may(name, tStopped); err != nil {
		return nil, err
	}
	s.starting, s.exitPending = false, false
	s.noProcess()
	s.message = ""
	s.setReady(false, ReasonStopped, reason, now)
	s.setPhase(PhaseStopped, reason)
	return []Event{ev(EventNormal, ReasonStopped, "stopped")}, nil
}

// replaced: the stop of a replacement ended; the plan starts the new one.
// A fresh replacement (new spec, restart NAME) resets the crash loop; a
// liveness restart counts as a crash.
func (s *state) replaced(name, reason string, fresh bool, exit exitInput, now time.Time) ([]Event, error) {
	if err := s.may(name, tReplaced); err != nil {
		return nil, err
	}
	s.starting = false
	s.noProcess()
	if fresh {
		s.exitPending, s.crashes, s.restartAt, s.restartRule = false, 0, time.Time{}, ""
	} else {
		s.recordExit(exit)
	}
	s.setReady(false, ReasonStopped, reason, now)
	s.setPhase(PhasePending, reason)
	return nil, nil
}

// stopFailed: the stop did not stop it, or left its record behind.
func (s *state) stopFailed(name string, err error, now time.Time) ([]Event, error) {
	if terr := s.may(name, tStopFailed); terr != nil {
		return nil, terr
	}
	s.starting = false
	s.noProcess()
	s.setReady(false, ReasonFailed, err.Error(), now)
	s.setPhase(PhaseFailed, err.Error())
	return []Event{ev(EventWarning, ReasonFailed, "stop failed: "+err.Error())}, nil
}

// quarantineInput says why a server is left alone.
type quarantineInput struct {
	// reason is the quarantine reason (PortConflict, UntrustedRecord...).
	reason string
	// message says the rest, for a person.
	message string
	// rec is the record of the process left alone, when there is one: its
	// pid and port are shown.
	rec *actuate.Record
	// q is kept when the quarantine must outlive this pass (Unkillable,
	// UntrustedRecord).
	q *actuate.QuarantineError
	// untrusted is the moved-aside record of an UntrustedRecord quarantine.
	untrusted *actuate.UntrustedRecordError
	// holder names who holds the port (PortConflict).
	holder string
	// silent: the event was already sent (by actuate, with its evidence).
	silent bool
}

// quarantine: the server is left alone; nothing is signalled.
func (s *state) quarantined(name string, in quarantineInput, now time.Time) ([]Event, error) {
	if err := s.may(name, tQuarantine); err != nil {
		return nil, err
	}
	was := s.phase == PhaseQuarantined && s.reason == in.reason && s.message == in.message
	s.starting = false
	if in.q != nil {
		s.quarantine = in.q
	}
	if in.untrusted != nil {
		s.untrusted = in.untrusted
	}
	if in.holder != "" {
		if s.portHolder == "" {
			s.portChecks = 0
		} else {
			s.portChecks++
		}
		s.portHolder = in.holder
	}
	s.noProcess()
	if in.rec != nil {
		s.pid, s.port, s.startedAt = in.rec.PID, in.rec.Port, in.rec.StartedAt
		s.membership = actuate.MembershipOf(*in.rec)
	}
	s.message = in.message
	s.setReady(false, in.reason, in.message, now)
	s.setPhase(PhaseQuarantined, in.reason)
	if was || in.silent {
		return nil, nil
	}
	return []Event{ev(EventWarning, ReasonQuarantined, joinReason(in.reason, in.message)+" (nothing signalled)")}, nil
}

// lift: a quarantine ended (its process is gone, the port is free).
func (s *state) lift(name, why string, now time.Time) ([]Event, error) {
	if err := s.may(name, tLift); err != nil {
		return nil, err
	}
	s.quarantine, s.untrusted = nil, nil
	s.portHolder, s.portChecks = "", 0
	s.noProcess()
	s.message = ""
	s.setReady(false, "QuarantineLifted", why, now)
	s.setPhase(PhasePending, "quarantine lifted")
	return []Event{ev(EventNormal, ReasonQuarantineLifted, why)}, nil
}

// wait: nothing can be done yet (a dependency is not Ready, dependents
// still run). Running and Stopping servers keep their phase. quiet: no
// event (a stop that waits for its dependents says so when it stops).
func (s *state) wait(name, reason string, quiet bool) ([]Event, error) {
	if err := s.may(name, tWait); err != nil {
		return nil, err
	}
	changed := s.reason != reason
	if s.phase != PhaseRunning && s.phase != PhaseStopping {
		changed = changed || s.phase != PhasePending
		s.setPhase(PhasePending, reason)
	} else {
		s.reason = reason
	}
	if !changed || quiet || s.phase != PhasePending {
		return nil, nil
	}
	return []Event{ev(EventNormal, ReasonWaiting, reason)}, nil
}

// backOff: the restart waits; the reason names the rule that applied.
func (s *state) backOff(name, reason string) ([]Event, error) {
	if err := s.may(name, tBackOff); err != nil {
		return nil, err
	}
	was := s.phase
	s.setPhase(PhaseCrashLoopBackOff, reason)
	if was == PhaseCrashLoopBackOff {
		return nil, nil
	}
	return []Event{ev(EventWarning, ReasonBackOff, reason)}, nil
}

// fail: the reconciler gives up on the server (restartPolicy, one-shot,
// Daemonized); a message, when given, replaces the status message.
func (s *state) fail(name, reason, message string, now time.Time) ([]Event, error) {
	if err := s.may(name, tFail); err != nil {
		return nil, err
	}
	s.starting = false
	s.noProcess()
	if message != "" {
		s.message = message
	}
	s.setReady(false, ReasonFailed, reason, now)
	s.setPhase(PhaseFailed, reason)
	return nil, nil
}

// rest: stopped and staying so (its policy ends it, not declared, held).
func (s *state) rest(name, reason string, now time.Time) ([]Event, error) {
	if err := s.may(name, tRest); err != nil {
		return nil, err
	}
	s.starting = false
	s.quarantine, s.untrusted = nil, nil
	s.portHolder, s.portChecks = "", 0
	s.noProcess()
	if s.phase == PhaseQuarantined {
		s.message = ""
	}
	s.setReady(false, ReasonStopped, reason, now)
	s.setPhase(PhaseStopped, reason)
	return nil, nil
}

// observed: a pass found nothing to change (Running, Starting); the reason
// may move ("ready", "not ready").
func (s *state) observed(name, reason string) ([]Event, error) {
	if err := s.may(name, tObserved); err != nil {
		return nil, err
	}
	if reason != "" && (s.phase == PhaseRunning || s.phase == PhaseStarting) {
		s.reason = reason
	}
	return nil, nil
}

func lastLine(s string) string {
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == '\n' && i < len(s)-1 {
			return s[i+1:]
		}
	}
	return s
}

// exitLearned: the exit status of an adopted process, learned after its
// parent reaped it, replaces the unknown one (the caller checked that this
// exit is still the last).
func (s *state) exitLearned(name string, learned *LastExit, message string) ([]Event, error) {
	if err := s.may(name, tExitLearned); err != nil {
		return nil, err
	}
	s.lastExit = learned
	typ := EventNormal
	if learned.Failed() {
		typ = EventWarning
	}
	return []Event{ev(typ, ReasonExitLearned, message)}, nil
}

// recordFailed: a record could not be written or removed (the state folder
// full or read-only). The message says so until it works; the event is
// sent when a run of failures begins. rewrite marks a tracked process's
// record to be written again at each pass.
func (s *state) recordFailed(name, msg string, rewrite bool) ([]Event, error) {
	if err := s.may(name, tRecordFailed); err != nil {
		return nil, err
	}
	first := s.recordErr == ""
	s.recordErr, s.message = msg, msg
	if rewrite {
		s.rewrite = true
	}
	if !first {
		return nil, nil
	}
	return []Event{ev(EventWarning, ReasonRecordFailed, msg)}, nil
}

// recordOK ends a run of record failures: their message goes. rewritten
// reports a record written again from the pinned process.
func (s *state) recordOK(name, rewritten string) ([]Event, error) {
	if err := s.may(name, tRecordOK); err != nil {
		return nil, err
	}
	if s.recordErr != "" && s.message == s.recordErr {
		s.message = ""
	}
	s.recordErr, s.rewrite = "", false
	if rewritten == "" {
		return nil, nil
	}
	return []Event{ev(EventWarning, ReasonRecordRewritten, rewritten)}, nil
}

// shownState is what status shows of a state, and what waiters wait on.
type shownState struct {
	phase            Phase
	reason, message  string
	ready            Condition
	restarts         int
	lastExit         *LastExit
	pid, port        int
	startedAt        time.Time
	starting         bool
	exitsBeforeReady int
}

func (s *state) shown() shownState {
	return shownState{s.phase, s.reason, s.message, s.ready, s.restarts, s.lastExit, s.pid, s.port, s.startedAt, s.starting, s.exitsBeforeReady}
}
