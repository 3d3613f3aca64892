package reconciler

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/procfleet/procfleet/actuate"
)

var allPhaseList = []Phase{PhasePending, PhaseStarting, PhaseRunning, PhaseStopping, PhaseStopped, PhaseFailed, PhaseCrashLoopBackOff, PhaseQuarantined}

// callTransition runs transition t on s with representative inputs.
func callTransition(t transition, s *state, now time.Time) ([]Event, error) {
	rec := actuate.Record{PID: 42, Port: 8080, StartedAt: now.Add(-time.Minute)}
	exit := exitInput{exit: &LastExit{Code: 1, Reason: "exited with code 1", At: now}, hash: "h1", restart: Restart{Crashes: 1, Rule: "r"}, pid: 42}
	switch t {
	case tStart:
		return s.start("api", startInput{hash: "h1", reason: "not running", now: now})
	case tReady:
		return s.becameReady("api", readyInput{rec: rec, since: now})
	case tStartFailed:
		return s.startFailed("api", exit)
	case tExit:
		return s.exited("api", exit)
	case tAdopt:
		return s.adopt("api", rec, now)
	case tReadiness:
		return s.readiness("api", readinessInput{reason: "ReadinessProbeFailed", msg: "failed 3 times", now: now})
	case tLiveness:
		return s.liveness("api", "liveness probe failed")
	case tStopping:
		return s.stopping("api", "removed from the fleet files", true)
	case tStopped:
		return s.stopped("api", "removed", now)
	case tReplaced:
		return s.replaced("api", "spec changed", true, exitInput{}, now)
	case tStopFailed:
		return s.stopFailed("api", errors.New("stop server api: no"), now)
	case tQuarantine:
		return s.quarantined("api", quarantineInput{reason: "IdentityMismatch", message: "pid 42 runs x", rec: &rec}, now)
	case tLift:
		return s.lift("api", "pid 42 is gone", now)
	case tWait:
		return s.wait("api", "waiting for db to be Ready", false)
	case tBackOff:
		return s.backOff("api", "back-off 1s")
	case tFail:
		return s.fail("api", "exited with code 1", "", now)
	case tRest:
		return s.rest("api", "not declared", now)
	case tObserved:
		return s.observed("api", "ready")
	case tExitLearned:
		return s.exitLearned("api", &LastExit{Code: 3, Reason: "exited with code 3"}, "pid 42 exited with code 3")
	case tRecordFailed:
		return s.recordFailed("api", "cannot write", true)
	case tRecordOK:
		return s.recordOK("api", "")
	case tMinReadyWait:
		return s.minReadyWait("api", minReadyMessage(time.Second), now)
	case tCounted:
		return s.counted("api", now)
	}
	panic("unknown transition " + t.String())
}

// TestTransitionTable checks every transition from every phase against
// the table below (written out here, not read from legalFrom): a legal one
// lands in its phase, an illegal one is a *TransitionError and changes
// nothing. Columns: Pending Starting Running Stopping Stopped Failed
// CrashLoopBackOff Quarantined; x allowed, . refused; the phase after.
func TestTransitionTable(t *testing.T) {
	table := map[transition]struct {
		from string
		to   int // a Phase; -1: unchanged
	}{
		tStart:        {"x...xxxx", int(PhaseStarting)},
		tReady:        {".x......", int(PhaseRunning)},
		tStartFailed:  {"xx..xxxx", int(PhasePending)},
		tExit:         {".xx..x.x", int(PhasePending)},
		tAdopt:        {"x...xxxx", int(PhaseRunning)},
		tReadiness:    {"..x.....", -1},
		tLiveness:     {"..x.....", -1},
		tStopping:     {"xxxxxxx.", int(PhaseStopping)},
		tStopped:      {"...x....", int(PhaseStopped)},
		tReplaced:     {"...x....", int(PhasePending)},
		tStopFailed:   {"...x....", int(PhaseFailed)},
		tQuarantine:   {"xxxxxxxx", int(PhaseQuarantined)},
		tLift:         {".......x", int(PhasePending)},
		tWait:         {"x.xxxxxx", -2}, // Pending, or unchanged for Running and Stopping
		tBackOff:      {"x.....x.", int(PhaseCrashLoopBackOff)},
		tFail:         {"x...xxx.", int(PhaseFailed)},
		tRest:         {"x...xxxx", int(PhaseStopped)},
		tObserved:     {"xxxxxxxx", -1},
		tExitLearned:  {"xxxxxxxx", -1},
		tRecordFailed: {"xxxxxxxx", -1},
		tRecordOK:     {"xxxxxxxx", -1},
		tMinReadyWait: {"..x.....", -1},
		tCounted:      {"..x.....", -1},
	}
	if len(table) != int(numTransitions) {
		t.Fatalf("the table has %d rows for %d transitions", len(table), numTransitions)
	}
	now := time.Unix(1_800_000_000, 0)
	for tr := transition(0); tr < numTransitions; tr++ {
		row, ok := table[tr]
		if !ok {
			t.Errorf("transition %s has no row", tr)
			continue
		}
		for i, p := range allPhaseList {
			s := &state{phase: p, reason: "before", message: "old"}
			before := *s
			_, err := callTransition(tr, s, now)
			want := row.from[i] == 'x'
			switch {
			case want && err != nil:
				t.Errorf("%s from %s: %v, want allowed", tr, p, err)
			case !want && err == nil:
				t.Errorf("%s from %s: allowed, want refused", tr, p)
			case !want:
				var te *TransitionError
				if !errors.As(err, &te) || te.From != p || te.Transition != tr.String() {
					t.Errorf("%s from %s: error %v, want a *TransitionError naming both", tr, p, err)
				}
				if !reflect.DeepEqual(*s, before) {
					t.Errorf("%s from %s: refused but changed the state to %+v", tr, p, *s)
				}
			default:
				var to Phase
				switch row.to {
				case -1:
					to = p
				case -2:
					to = PhasePending
					if p == PhaseRunning || p == PhaseStopping {
						to = p
					}
				default:
					to = Phase(row.to)
				}
				if s.phase != to {
					t.Errorf("%s from %s: phase %s, want %s", tr, p, s.phase, to)
				}
			}
		}
	}
}

// TestTransitionFields: each transition sets every field that goes with
// it, and returns its events.
func TestTransitionFields(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	rec := actuate.Record{PID: 42, Port: 8080, StartedAt: now.Add(-time.Minute)}

	s := &state{phase: PhaseFailed, restarts: 4, crashes: 3, exitsBeforeReady: 1, message: "old failure", portHolder: "pid 9 (x)", livenessFailed: true}
	evs, _ := s.start("api", startInput{hash: "h2", fresh: true, reason: "spec changed", now: now})
	if s.restarts != 0 || s.crashes != 0 || s.exitsBeforeReady != 0 || s.message != "" || s.portHolder != "" || s.livenessFailed || !s.starting || s.startHash != "h2" {
		t.Errorf("fresh start: %+v; want counts reset, message, holder and liveness cleared, starting h2", s)
	}
	if len(evs) != 1 || evs[0].Reason != ReasonStarting {
		t.Errorf("start events = %+v", evs)
	}
	s = &state{phase: PhasePending, restarts: 4, crashes: 2}
	_, _ = s.start("api", startInput{hash: "h1", now: now})
	if s.restarts != 5 || s.crashes != 2 {
		t.Errorf("restart: restarts %d crashes %d, want 5 and 2 (the loop goes on)", s.restarts, s.crashes)
	}

	evs, _ = s.becameReady("api", readyInput{rec: rec, since: now.Add(150 * time.Millisecond)})
	if s.isReady || s.phase != PhaseRunning || s.pid != 42 || s.port != 8080 || s.starting || s.readySince != now.Add(150*time.Millisecond) || len(evs) != 0 {
		t.Errorf("readiness held: %+v, events %+v; want Running, not Ready yet, no event", s, evs)
	}
	s.exitsBeforeReady = 1
	evs, _ = s.counted("api", now.Add(1150*time.Millisecond))
	if !s.isReady || !s.everReady || s.exitsBeforeReady != 0 || s.readySince != now.Add(150*time.Millisecond) || s.ready.Status != ConditionTrue || s.reason != "ready" {
		t.Errorf("counted: %+v", s)
	}
	if len(evs) != 1 || evs[0].Message != "ready in 1.15s (pid 42)" {
		t.Errorf("counted events = %+v", evs)
	}

	exit := exitInput{exit: &LastExit{Code: 1, Reason: "exited with code 1", At: now.Add(time.Second)}, hash: "h1", restart: Restart{Crashes: 3, Delay: 2 * time.Second, Rule: "exit 3"}, pid: 42}
	evs, _ = s.exited("api", exit)
	if s.isReady || s.pid != 0 || !s.exitPending || s.crashes != 3 || s.restartAt != now.Add(3*time.Second) || s.restartRule != "exit 3" || !s.lastExitAfterReady || s.exitsBeforeReady != 0 {
		t.Errorf("exit after Ready: %+v", s)
	}
	if len(evs) != 1 || evs[0].Message != "pid 42 exited with code 1" {
		t.Errorf("exit events = %+v", evs)
	}
	s = &state{phase: PhaseStarting, starting: true}
	_, _ = s.startFailed("api", exitInput{exit: &LastExit{Code: 2, Reason: "exited with code 2", At: now}, logTail: "boom\nlast words"})
	if s.starting || s.exitsBeforeReady != 1 || s.message != "boom\nlast words" || s.lastExitAfterReady {
		t.Errorf("startFailed: %+v", s)
	}

	s = &state{phase: PhasePending}
	evs, _ = s.quarantined("api", quarantineInput{reason: ReasonPortConflict, message: "port 8080 is held by pid 9 (x)", holder: "pid 9 (x)"}, now)
	if s.portHolder != "pid 9 (x)" || s.portChecks != 0 || len(evs) != 1 || !strings.Contains(evs[0].Message, "nothing signalled") {
		t.Errorf("quarantine: %+v, events %+v", s, evs)
	}
	evs, _ = s.quarantined("api", quarantineInput{reason: ReasonPortConflict, message: "port 8080 is held by pid 9 (x)", holder: "pid 9 (x)"}, now)
	if s.portChecks != 1 || len(evs) != 0 {
		t.Errorf("same quarantine again: checks %d, events %+v; want 1 and none", s.portChecks, evs)
	}
	_, _ = s.quarantined("api", quarantineInput{reason: "IdentityMismatch", message: "m", rec: &rec, silent: true}, now)
	if s.pid != 42 || s.port != 8080 {
		t.Errorf("quarantine of a recorded process shows pid %d port %d, want 42 and 8080", s.pid, s.port)
	}
	_, _ = s.lift("api", "gone", now)
	if s.pid != 0 || s.message != "" || s.quarantine != nil {
		t.Errorf("lift: %+v", s)
	}

	s = &state{phase: PhaseRunning, pid: 42, isReady: true, message: "old mismatch"}
	_, _ = s.stopping("api", "removed", true)
	evs, _ = s.stopped("api", "removed", now)
	if s.pid != 0 || s.isReady || s.message != "" || len(evs) != 1 || evs[0].Reason != ReasonStopped {
		t.Errorf("stopped: %+v, %+v", s, evs)
	}

	s = &state{phase: PhaseRunning, recordErr: "cannot write", message: "cannot write"}
	evs, _ = s.recordFailed("api", "cannot write", true)
	if len(evs) != 0 || !s.rewrite {
		t.Errorf("second record failure: events %+v rewrite %v; want none and true", evs, s.rewrite)
	}
	evs, _ = s.recordOK("api", "record rewritten")
	if s.message != "" || s.recordErr != "" || s.rewrite || len(evs) != 1 || evs[0].Reason != ReasonRecordRewritten {
		t.Errorf("recordOK: %+v, %+v", s, evs)
	}
}
