package reconciler

import "testing"

// TestSettled covers every row of settled: each mode, each phase, and the
// apply --wait rules of DESIGN.md (give up at Failed or two exits before
// Ready, fail on an exit after Ready).
func TestSettled(t *testing.T) {
	running := settleView{declared: true, passed: true, phase: PhaseRunning, running: true}
	readyRunning := running
	readyRunning.ready = true
	with := func(v settleView, f func(*settleView)) settleView { f(&v); return v }
	tests := []struct {
		name string
		v    settleView
		mode settleMode
		want settleVerdict
	}{
		{"not reconciled yet", settleView{declared: true, phase: PhaseRunning, running: true, ready: true}, settleWait, pending},
		{"not reconciled yet, down", settleView{phase: PhaseStopped}, settleDown, pending},

		{"down: stopped", settleView{passed: true, phase: PhaseStopped}, settleDown, ok},
		{"down: never known", settleView{passed: true, phase: PhasePending}, settleDown, ok},
		{"down: still running", with(running, func(v *settleView) { v.held = true }), settleDown, pending},
		{"down: starting", settleView{passed: true, phase: PhaseStarting, starting: true}, settleDown, pending},
		{"down: stopping", settleView{passed: true, phase: PhaseStopping}, settleDown, pending},
		{"down: waits for its dependents, never looked at as running", settleView{passed: true, phase: PhasePending, toStop: true}, settleDown, pending},
		{"down: quarantined", settleView{passed: true, phase: PhaseQuarantined}, settleDown, failedBecause("")},
		{"down: stop failed", settleView{passed: true, phase: PhaseFailed}, settleDown, failedBecause("")},

		{"undeclared: pruned", settleView{passed: true, phase: PhaseStopped}, settleApply, ok},
		{"undeclared: being pruned", settleView{passed: true, phase: PhaseStopping, running: true}, settleWait, pending},
		{"undeclared: quarantined", settleView{passed: true, phase: PhaseQuarantined}, settleApply, failedBecause("")},
		{"held: stopped", settleView{declared: true, held: true, passed: true, phase: PhaseStopped}, settleWait, ok},

		{"quarantined", settleView{declared: true, passed: true, phase: PhaseQuarantined}, settleWait, failedBecause("")},
		{"failed", settleView{declared: true, passed: true, phase: PhaseFailed}, settleApply, failedBecause("")},
		{"two exits before Ready", settleView{declared: true, passed: true, phase: PhaseStarting, starting: true, exitsBeforeReady: 2}, settleWait, failedBecause("exited twice before it was Ready")},
		{"two exits before Ready, the deciding pass not made yet", settleView{declared: true, passed: true, phase: PhasePending, exitsBeforeReady: 2}, settleWait, pending},
		{"two exits before Ready, backing off under up", settleView{declared: true, passed: true, phase: PhaseCrashLoopBackOff, exitsBeforeReady: 2}, settleWait, failedBecause("exited twice before it was Ready")},
		{"one exit before Ready: its restart is awaited", settleView{declared: true, passed: true, phase: PhaseStarting, starting: true, exitsBeforeReady: 1}, settleWait, pending},
		{"exited after Ready, wait", with(readyRunning, func(v *settleView) { v.exitedAfterReady = true }), settleWait, failedBecause("exited after it was Ready")},
		{"exited after Ready, no wait: running again is enough", with(running, func(v *settleView) { v.exitedAfterReady = true }), settleApply, ok},
		{"ran to completion", settleView{declared: true, passed: true, phase: PhaseStopped, completed: true}, settleWait, ok},
		{"stopped, to be started", settleView{declared: true, passed: true, phase: PhaseStopped}, settleApply, pending},

		{"wait: ready", readyRunning, settleWait, ok},
		{"wait: running, not ready", running, settleWait, pending},
		{"wait: ready flag without a process", settleView{declared: true, passed: true, phase: PhaseRunning, ready: true}, settleWait, pending},
		{"wait: starting", settleView{declared: true, passed: true, phase: PhaseStarting, starting: true}, settleWait, pending},
		{"wait: pending", settleView{declared: true, passed: true, phase: PhasePending}, settleWait, pending},
		{"wait: backing off", settleView{declared: true, passed: true, phase: PhaseCrashLoopBackOff}, settleWait, pending},

		{"apply: running", running, settleApply, ok},
		{"apply: starting", settleView{declared: true, passed: true, phase: PhaseStarting, starting: true}, settleApply, ok},
		{"apply: starting, a dependent waits", settleView{declared: true, passed: true, phase: PhaseStarting, starting: true, waitedOn: true}, settleApply, pending},
		{"apply: pending", settleView{declared: true, passed: true, phase: PhasePending}, settleApply, pending},
		{"apply: stopping (replace)", settleView{declared: true, passed: true, phase: PhaseStopping, running: true}, settleApply, pending},
		{"apply: backing off", settleView{declared: true, passed: true, phase: PhaseCrashLoopBackOff}, settleApply, pending},

		{"replica waiting for its rolling turn, apply", with(readyRunning, func(v *settleView) { v.outdated = true }), settleApply, pending},
		{"replica waiting for its rolling turn, wait", with(readyRunning, func(v *settleView) { v.outdated = true }), settleWait, pending},
		{"replica whose turn waits for one given up on", with(readyRunning, func(v *settleView) { v.outdated, v.blockedBy = true, "api-1" }), settleWait,
			failedBecause("its rolling replace waits for api-1, which was given up on")},
		{"replica waiting for its turn, down", with(running, func(v *settleView) { v.outdated, v.held = true, true }), settleDown, pending},
		{"waits for a dependency given up on", settleView{declared: true, passed: true, phase: PhasePending, depFailed: "db"}, settleWait, failedBecause("its dependency db failed")},
		{"waits for a dependency given up on, no wait", settleView{declared: true, passed: true, phase: PhasePending, depFailed: "db"}, settleApply, failedBecause("its dependency db failed")},
		{"started before its dependency failed: judged on its own", with(readyRunning, func(v *settleView) { v.depFailed = "db" }), settleWait, ok},
		{"inside its minReadySeconds window: not Ready yet", running, settleWait, pending},
	}
	for _, tt := range tests {
		if got := settled(tt.v, tt.mode); got != tt.want {
			t.Errorf("%s: settled(%+v, %d) = %+v, want %+v", tt.name, tt.v, tt.mode, got, tt.want)
		}
	}
}
