package reconciler

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/procfleet/procfleet/spec"
)

// ActionKind is what the plan asks for one server.
type ActionKind uint8

// Action kinds.
const (
	// ActionNothing: the server is as declared (or must be left alone).
	ActionNothing ActionKind = iota
	// ActionStart: spawn the server and wait for it to be Ready.
	ActionStart
	// ActionStop: stop the running process (prune, or down).
	ActionStop
	// ActionReplace: stop the running process, then start the declared one
	// (spec hash changed, or liveness failed).
	ActionReplace
	// ActionQuarantine: report the server Quarantined; signal nothing, keep
	// its record.
	ActionQuarantine
	// ActionWait: nothing can be done yet (dependency not Ready, restart
	// backoff not expired, dependents still running).
	ActionWait
	// ActionAdopt: an owned process found from its record and not yet
	// watched: watch its exit and probe it; never start it again.
	ActionAdopt
)

var actionNames = [...]string{"Nothing", "Start", "Stop", "Replace", "Quarantine", "Wait", "Adopt"}

func (k ActionKind) String() string {
	if int(k) < len(actionNames) {
		return actionNames[k]
	}
	return fmt.Sprintf("ActionKind(%d)", k)
}

// Ownership is the verdict on a server's record (DESIGN.md "Ownership").
type Ownership uint8

// Ownership verdicts.
const (
	// OwnNone: no record, no process.
	OwnNone Ownership = iota
	// OwnOwned: rule 2, the process is ours.
	OwnOwned
	// OwnStale: rule 1, the process is gone; the record must be removed.
	OwnStale
	// OwnReused: rule 3, the pid belongs to a stranger now; remove the
	// record, signal nothing.
	OwnReused
	// OwnQuarantined: rules 4-7; keep the record, signal nothing.
	OwnQuarantined
)

var ownershipNames = [...]string{"None", "Owned", "Stale", "Reused", "Quarantined"}

func (o Ownership) String() string {
	if int(o) < len(ownershipNames) {
		return ownershipNames[o]
	}
	return fmt.Sprintf("Ownership(%d)", o)
}

// Reasons the plan reports.
const (
	// ReasonPortConflict: the declared port is held by another process.
	ReasonPortConflict = "PortConflict"
	// ReasonStoppedByUser: down or stop keeps the server stopped.
	ReasonStoppedByUser = "StoppedByUser"
	// ReasonDaemonized: its first process exited 0 and left a daemon
	// (stopped by actuate); restarting would only daemonize again.
	ReasonDaemonized = "Daemonized"
)

// Desired is one declared instance as the plan sees it: a server without
// replicas, or one replica of a server (keyed "api-1").
type Desired struct {
	// Server is the declared server the instance belongs to.
	Server *spec.Server
	// Instance is the instance: its name, port, command, args and env
	// after envFile and $(NAME); nil only when not made by desiredOf.
	Instance *spec.Instance
	// Hash is the instance's spec hash (Server.Hash() without one),
	// computed once per fleet load.
	Hash string
	// Held means "keep it stopped" (down or stop), until its files change,
	// apply, start or restart.
	Held bool
	// OneShot (apply): a first exit before Ready restarts at once; a
	// second exit before Ready, or an exit after Ready, is Failed.
	OneShot bool
	// StartNow (start or restart NAME, not yet carried out): if it is not
	// running it starts now, afresh: its last exit, restartPolicy, crash
	// backoff and apply's give-up rules are set aside.
	StartNow bool
	// Restart (restart NAME): if it runs, it is replaced now, afresh.
	Restart bool
}

// Observed is what the reconciler knows about one server right now: the
// verdict on its record, what it tracks in memory (start in progress,
// readiness, last exit, backoff) and what it found on its port.
type Observed struct {
	Ownership Ownership
	// Reason and Message explain a quarantine (QuarantineReason) or a stale
	// or reused record.
	Reason  string
	Message string
	// SpecHash is the hash recorded for the running process.
	SpecHash string
	// DependsOn is what the running process was started with, kept so that a
	// pruned server is stopped after its pruned dependents.
	DependsOn []string
	// Tracked: the owned process is watched by this reconciler (started or
	// adopted by it). Owned and not tracked means it must be adopted.
	Tracked bool
	// Starting: spawned, the readiness wait is in progress.
	Starting bool
	// Ready: it counts as Ready (its readiness held for minReadySeconds).
	Ready bool
	// ReadyUnknown: not checked yet (adopted): neither Ready nor down.
	ReadyUnknown bool
	// Rollout is set for a replica that runs an older spec: what its
	// rolling turn depends on.
	Rollout *Rollout
	// ReadinessHeld: its readiness probe (or its default) passes, for
	// ReadyFor so far; Ready once that reaches minReadySeconds.
	ReadinessHeld bool
	ReadyFor      time.Duration
	// LivenessFailed: the liveness probe failed failureThreshold times.
	LivenessFailed bool
	// Exit is set when the last process of this server exited (or failed to
	// start) and no new one was started since; ExitHash is the spec hash it
	// ran with.
	Exit     *LastExit
	ExitHash string
	// BackoffRemaining > 0: a restart must wait that long (CrashLoopBackOff).
	BackoffRemaining time.Duration
	// PortHolder names the process that holds the declared port when that
	// was found to keep the server from starting (pid and command);
	// PortChecks counts the re-checks since.
	PortHolder string
	PortChecks int
	// ExitsBeforeReady counts exits before Ready since the last fresh
	// start; ExitAfterReady says the last exit ended a Ready process.
	ExitsBeforeReady int
	ExitAfterReady   bool
	// RestartRule names the restart rule the last exit met.
	RestartRule string
	// Daemonized: the last start failed because the server daemonized
	// (Exit says how).
	Daemonized bool
	// NotRunnable: the last start failed because its program could not be
	// executed (not found, not executable; Exit says why).
	NotRunnable bool
	// Lifted is set when an UntrustedRecord quarantine has nothing left to
	// protect (why, for the event); the server is then not running.
	Lifted string
	// Phase is the phase reported now.
	Phase Phase
}

func (o Observed) running() bool { return o.Ownership == OwnOwned }

// Action is the plan for one server.
type Action struct {
	Server string
	Kind   ActionKind
	// Reason says why, for logs, events and status.
	Reason string
	// Phase is the phase to report while (or after) carrying it out.
	Phase Phase
	// QuarantineReason is set for ActionQuarantine.
	QuarantineReason string
	// RemoveRecord: the record is stale or reused; delete it first (signal
	// nothing).
	RemoveRecord bool
	// Fresh: a start of a new spec, not a restart; the crash backoff is
	// forgotten and the restart count is not incremented.
	Fresh bool
	// RequeueAfter > 0: look at the server again after that long.
	RequeueAfter time.Duration
	// Message is a quarantine's or a Daemonized failure's explanation,
	// for status.
	Message string
	// Lifted: a quarantine ends first (why, for the event).
	Lifted string
	// Quiet: a wait that is no news (a stop waiting for its dependents).
	Quiet bool
	// Rolling: a replica's replace waits for its turn (rollingWait).
	Rolling bool
	// CountReady: its readiness has held for minReadySeconds; it counts as
	// Ready from now on.
	CountReady bool
}

// Port re-checks of a PortConflict quarantine (DESIGN.md "Starting"): a
// socket-table read, first after portRecheckFirst, doubling to
// portRecheckMax, so the server starts within about a second of the holder
// letting go.
const (
	portRecheckFirst = 100 * time.Millisecond
	portRecheckMax   = time.Second
)

// portRecheck is the wait before the n-th re-check of a held port.
func portRecheck(n int) time.Duration {
	d := portRecheckFirst
	for i := 0; i < n && d < portRecheckMax; i++ {
		d *= 2
	}
	return min(d, portRecheckMax)
}

// Plan computes the action for every server that is declared or observed. It
// is a pure function of its inputs; the result is sorted by server name.
func Plan(desired map[string]Desired, observed map[string]Observed) []Action {
	names := make([]string, 0, len(desired)+len(observed))
	for n := range desired {
		names = append(names, n)
	}
	for n := range observed {
		if _, ok := desired[n]; !ok {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	out := make([]Action, 0, len(names))
	for _, n := range names {
		out = append(out, PlanServer(n, desired, observed))
	}
	return out
}

// PlanServer computes the action for one server. It reads the other entries
// of desired and observed only for ordering: the readiness of the server's
// dependencies, and the pruned dependents that must stop first.
func PlanServer(name string, desired map[string]Desired, observed map[string]Observed) Action {
	d, declared := desired[name]
	o := observed[name]
	a := Action{Server: name, Phase: o.Phase}

	// Rules 4-7: never signal, keep the record, report.
	if o.Ownership == OwnQuarantined {
		a.Phase = PhaseQuarantined
		a.QuarantineReason, a.Message = o.Reason, o.Message
		a.Reason = joinReason(o.Reason, o.Message)
		if o.Phase == PhaseQuarantined {
			a.Kind = ActionNothing
		} else {
			a.Kind = ActionQuarantine
		}
		return a
	}

	// Rules 1 and 3: the record is worthless; drop it and go on as if the
	// server were not running.
	if o.Ownership == OwnStale || o.Ownership == OwnReused {
		a.RemoveRecord = true
		o.Ownership = OwnNone
		o.Tracked, o.Ready, o.Starting = false, false, false
	}

	a.Lifted = o.Lifted

	if !declared || d.Server == nil {
		return planUndeclared(a, name, o, desired, observed)
	}
	if d.Held {
		if o.running() || o.Starting {
			if waiting := stoppingDependents(name, desired, observed); len(waiting) > 0 {
				a.Kind, a.Reason, a.Quiet = ActionWait, "waiting for dependents to stop: "+strings.Join(waiting, ", "), true
				return a
			}
			a.Kind, a.Phase, a.Reason = ActionStop, PhaseStopping, ReasonStoppedByUser
			return a
		}
		a.Kind, a.Phase, a.Reason = ActionNothing, PhaseStopped, ReasonStoppedByUser
		return a
	}

	if o.running() {
		return planRunning(a, d, o)
	}
	return planNotRunning(a, name, d, o, desired, observed)
}

func planUndeclared(a Action, name string, o Observed, desired map[string]Desired, observed map[string]Observed) Action {
	if !o.running() {
		a.Kind, a.Phase, a.Reason = ActionNothing, PhaseStopped, "not declared"
		return a
	}
	// Dependents first: a pruned server that another running, pruned
	// server depends on waits for it to stop.
	if waiting := stoppingDependents(name, desired, observed); len(waiting) > 0 {
		a.Kind, a.Reason, a.Quiet = ActionWait, "waiting for dependents to stop: "+strings.Join(waiting, ", "), true
		return a
	}
	a.Kind, a.Phase, a.Reason = ActionStop, PhaseStopping, "removed from the fleet files"
	if why := scaledAway(name, desired); why != "" {
		a.Reason = why
	}
	return a
}

// stoppingDependents lists, sorted, the running servers that depend on name
// (as they were started; on its server, for a replica) and are being
// stopped too: pruned, or held by down. A server that stays declared is
// not waited for.
func stoppingDependents(name string, desired map[string]Desired, observed map[string]Observed) []string {
	var waiting []string
	for other, oo := range observed {
		if other == name || !oo.running() {
			continue
		}
		if od, ok := desired[other]; ok && od.Server != nil && !od.Held {
			continue
		}
		if dependsOnServer(oo.DependsOn, name) {
			waiting = append(waiting, other)
		}
	}
	sort.Strings(waiting)
	return waiting
}

// dependsOnServer reports whether deps (a server's dependsOn) names name,
// or name's server for a replica.
func dependsOnServer(deps []string, name string) bool {
	for _, dep := range deps {
		if dep == name || isReplicaOf(name, dep) {
			return true
		}
	}
	return false
}

func planRunning(a Action, d Desired, o Observed) Action {
	if d.Restart {
		if d.replicaOf() != "" && !o.Tracked {
			// Its readiness decides its turn in the rolling restart, which
			// is still asked for (Rolling: the adoption does not carry the
			// request out).
			a.Kind, a.Phase, a.Reason, a.Rolling = ActionAdopt, PhaseRunning, "adopted: record proves ownership; a rolling restart follows", true
			return a
		}
		if why := rollingWait(d, o); why != "" {
			// A restart of api rolls; its readiness still counts while it
			// waits, as in a rolling replace.
			rd := planReadiness(Action{}, d, o)
			a.Kind, a.Reason, a.Rolling = ActionWait, why, true
			a.CountReady, a.RequeueAfter = rd.CountReady, rd.RequeueAfter
			return a
		}
		a.Kind, a.Phase, a.Reason, a.Fresh = ActionReplace, PhaseStopping, reasonRestartRequested, true
		return a
	}
	if o.Starting {
		if o.SpecHash != "" && o.SpecHash != d.Hash {
			a.Kind, a.Phase, a.Reason = ActionReplace, PhaseStopping, "spec changed while starting"
			a.Fresh = true
			return a
		}
		a.Kind, a.Phase, a.Reason = ActionNothing, PhaseStarting, "starting"
		return a
	}
	if o.SpecHash != d.Hash {
		if d.replicaOf() != "" && !o.Tracked {
			// Its readiness decides its turn in the rolling replace.
			a.Kind, a.Phase, a.Reason = ActionAdopt, PhaseRunning, "adopted: record proves ownership; a rolling replace follows"
			return a
		}
		if why := rollingWait(d, o); why != "" {
			// Its readiness still counts while it waits: the others'
			// turns wait for it to be Ready.
			rd := planReadiness(Action{}, d, o)
			a.Kind, a.Reason, a.Rolling = ActionWait, why, true
			a.CountReady, a.RequeueAfter = rd.CountReady, rd.RequeueAfter
			return a
		}
		a.Kind, a.Phase, a.Reason = ActionReplace, PhaseStopping, "spec changed"
		a.Fresh = true
		return a
	}
	if !o.Tracked {
		a.Kind, a.Phase, a.Reason = ActionAdopt, PhaseRunning, "adopted: record proves ownership"
		return a
	}
	if o.LivenessFailed {
		a.Kind, a.Phase, a.Reason = ActionReplace, PhaseStopping, "liveness probe failed"
		return a
	}
	return planReadiness(a, d, o)
}

func planNotRunning(a Action, name string, d Desired, o Observed, desired map[string]Desired, observed map[string]Observed) Action {
	if o.Exit != nil && o.Daemonized && !d.StartNow && (o.ExitHash == "" || o.ExitHash == d.Hash) {
		// DESIGN.md "Starting": Failed, whatever the restart policy,
		// until the spec changes or a start is asked for.
		a.Kind, a.Phase, a.Reason, a.Message = ActionNothing, PhaseFailed, ReasonDaemonized, o.Exit.Reason
		return a
	}
	restart := false
	if o.Exit != nil && !d.StartNow && (o.ExitHash == "" || o.ExitHash == d.Hash) {
		switch d.Server.Spec.RestartPolicy {
		case spec.RestartNever:
			a.Kind, a.Reason = ActionNothing, o.Exit.Reason
			if o.Exit.Failed() {
				a.Phase = PhaseFailed
			} else {
				a.Phase = PhaseStopped
			}
			return a
		case spec.RestartOnFailure:
			if !o.Exit.Failed() {
				a.Kind, a.Phase, a.Reason = ActionNothing, PhaseStopped, o.Exit.Reason
				return a
			}
		}
		if d.OneShot && o.NotRunnable {
			// apply gives up at once on a program that cannot be
			// executed: a second try finds it missing again. (up retries
			// with backoff: a build may yet put it there.)
			a.Kind, a.Phase, a.Reason = ActionNothing, PhaseFailed, o.Exit.Reason
			return a
		}
		if d.OneShot && (o.ExitAfterReady || o.ExitsBeforeReady >= 2) {
			// apply gives up: a second exit before Ready, or an exit
			// after it counted as Ready (DESIGN.md "Exit codes").
			a.Kind, a.Phase, a.Reason = ActionNothing, PhaseFailed, o.Exit.Reason+"; "+whyGivenUp(o.ExitAfterReady)
			return a
		}
		restart = true
	}

	if o.PortHolder != "" {
		a.Kind, a.Phase, a.QuarantineReason = ActionQuarantine, PhaseQuarantined, ReasonPortConflict
		a.Message = fmt.Sprintf("port %d is held by %s; it starts once the port is free", d.port(), o.PortHolder)
		a.Reason = joinReason(ReasonPortConflict, a.Message)
		a.RequeueAfter = portRecheck(o.PortChecks)
		return a
	}

	if restart && o.BackoffRemaining > 0 {
		a.Kind, a.Phase = ActionWait, PhaseCrashLoopBackOff
		a.Reason = fmt.Sprintf("back-off %s restarting after %s", o.BackoffRemaining.Round(time.Millisecond), o.Exit.Reason)
		if o.RestartRule != "" {
			a.Reason += " (" + o.RestartRule + ")"
		}
		a.RequeueAfter = o.BackoffRemaining
		return a
	}

	var notReady []string
	for _, dep := range d.Server.Spec.DependsOn {
		if !observed[dep].Ready {
			notReady = append(notReady, dep)
		}
	}
	if len(notReady) > 0 {
		a.Kind, a.Phase = ActionWait, PhasePending
		a.Reason = "waiting for " + strings.Join(notReady, ", ") + " to be Ready"
		return a
	}

	a.Kind, a.Phase, a.Fresh = ActionStart, PhaseStarting, !restart
	switch {
	case d.Restart:
		a.Reason = reasonRestartRequested
	case d.StartNow:
		a.Reason = reasonStartRequested
	case restart:
		a.Reason = "restarting after " + o.Exit.Reason
		if o.RestartRule != "" {
			a.Reason += " (" + o.RestartRule + ")"
		}
	case a.RemoveRecord && o.Reason != "":
		a.Reason = "not running (" + o.Reason + ")"
	default:
		a.Reason = "not running"
	}
	return a
}

func joinReason(reason, message string) string {
	switch {
	case message == "":
		return reason
	case reason == "":
		return message
	}
	return reason + ": " + message
}
