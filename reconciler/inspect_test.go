package reconciler

import (
	"strings"
	"testing"
	"time"

	"github.com/procfleet/procfleet/actuate"
	"github.com/procfleet/procfleet/observe"
	"github.com/procfleet/procfleet/spec"
)

var goldenNow = time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)

// view makes a RecordView as Inspect does: Observed from the verdict.
func view(rv *RecordView) *RecordView {
	var readErr error
	switch {
	case rv.Untrusted != nil:
		readErr = rv.Untrusted
	case rv.Newer != nil:
		readErr = rv.Newer
	}
	rv.Observed = ObservedFromRecord(rv.Record, readErr, actuate.Verification{Verdict: rv.Verdict, Reason: rv.Reason, Message: rv.Message})
	return rv
}

func TestSummarize(t *testing.T) {
	decl := &spec.Server{Metadata: spec.ObjectMeta{Name: "api"}, Spec: spec.ServerSpec{Command: []string{"./api"}, Port: 8080}}
	rec := actuate.Record{Name: "api", PID: 100, PGID: 100, Port: 8080, Cmdline: []string{"./api"}, StartedAt: goldenNow.Add(-time.Hour)}
	owned := func(ready *observe.ProbeResult) *RecordView {
		return view(&RecordView{Record: rec, Verdict: actuate.VerdictOwned, Ready: ready})
	}
	stale := view(&RecordView{Record: rec, Verdict: actuate.VerdictStale, Message: "pid 100 has exited"})
	crashLoop := &ServerStatus{Name: "api", Phase: PhaseCrashLoopBackOff, Reason: "back-off 2s", Restarts: 3,
		LastExit: &LastExit{Code: 2, Reason: "exited with code 2"}}
	starting := &ServerStatus{Name: "api", Phase: PhaseStarting, Reason: "not running"}
	failed := &ServerStatus{Name: "api", Phase: PhaseFailed, Reason: "exited with code 2",
		LastExit: &LastExit{Code: 2, Reason: "exited with code 2"}}
	// Readiness "running" (no port, no probe): minReadySeconds is 1.
	runningOnly := &spec.Server{Metadata: spec.ObjectMeta{Name: "api"}, Spec: spec.ServerSpec{Command: []string{"./api"}}}
	youngRec := rec
	youngRec.StartedAt = goldenNow.Add(-500 * time.Millisecond)
	young := view(&RecordView{Record: youngRec, Verdict: actuate.VerdictOwned})

	tests := []struct {
		name        string
		in          summaryInput
		wantPhase   Phase
		wantReady   bool
		wantPID     int
		wantReason  string
		wantMessage string // substring
		wantRestart int
	}{
		{"owned, ready", summaryInput{Declared: decl, Record: owned(&observe.ProbeResult{OK: true})},
			PhaseRunning, true, 100, "ready", "", 0},
		{"owned, no readiness check", summaryInput{Declared: decl, Record: owned(nil)},
			PhaseRunning, true, 100, "ready", "", 0},
		{"owned, not ready", summaryInput{Declared: decl, Record: owned(&observe.ProbeResult{Message: "connect: connection refused"})},
			PhaseRunning, false, 100, "not ready", "connection refused", 0},
		{"owned, starting under up", summaryInput{Declared: decl, Record: owned(&observe.ProbeResult{}), Saved: starting, UpRunning: true},
			PhaseStarting, false, 100, "not running", "", 0},
		{"owned, no longer declared", summaryInput{Undeclared: true, Record: owned(nil)},
			PhaseRunning, true, 100, ReasonNotDeclared, "procfleet down api", 0},
		{"stale record, no up", summaryInput{Declared: decl, Record: stale},
			PhaseFailed, false, 0, ReasonExited, "no procfleet up is running", 0},
		{"stale record, up backing off", summaryInput{Declared: decl, Record: stale, Saved: crashLoop, UpRunning: true},
			PhaseCrashLoopBackOff, false, 0, "back-off 2s", "", 3},
		{"crash loop left by a dead up", summaryInput{Declared: decl, Saved: crashLoop},
			PhaseFailed, false, 0, ReasonExited, "exited with code 2; no procfleet up", 3},
		{"failed kept", summaryInput{Declared: decl, Saved: failed},
			PhaseFailed, false, 0, "exited with code 2", "", 0},
		{"never started", summaryInput{Declared: decl},
			PhaseStopped, false, 0, ReasonNotStarted, "procfleet apply", 0},
		{"never started, up running", summaryInput{Declared: decl, UpRunning: true},
			PhasePending, false, 0, ReasonNotRunning, "up will start it", 0},
		{"quarantined", summaryInput{Declared: decl, Record: view(&RecordView{Record: rec, Verdict: actuate.VerdictQuarantine,
			Reason: actuate.IdentityMismatch, Message: "command line differs"})},
			PhaseQuarantined, false, 100, "IdentityMismatch", "kill -TERM -- -100", 0},
		{"untrusted record", summaryInput{Declared: decl, Record: view(&RecordView{Record: actuate.Record{Name: "api"},
			Untrusted: &actuate.UntrustedRecordError{Name: "api", Path: "/s/servers/api.json", Reason: "does not parse"}})},
			PhaseQuarantined, false, 0, "UntrustedRecord", "/s/servers/api.json cannot be trusted (does not parse); procfleet never reads it", 0},
		{"args edit refused: the old process's pid and port", summaryInput{Declared: &spec.Server{Metadata: spec.ObjectMeta{Name: "api"}, Spec: spec.ServerSpec{Command: []string{"./api"}, Port: 9090}},
			Record: view(&RecordView{Record: rec, Verdict: actuate.VerdictQuarantine, Reason: actuate.IdentityMismatch, Message: "command line differs"})},
			PhaseQuarantined, false, 100, "IdentityMismatch", "", 0},
		{"program not found, left by a dead up", summaryInput{Declared: decl, Saved: &ServerStatus{Name: "api", Phase: PhaseCrashLoopBackOff,
			LastExit: &LastExit{Code: -1, Reason: "program ./api not found (workingDir /w)"}}},
			PhaseFailed, false, 0, ReasonStartFailed, "program ./api not found", 0},
		{"stale and undeclared", summaryInput{Undeclared: true, Record: stale},
			PhaseStopped, false, 0, ReasonNotDeclared, "has exited", 0},
		{"running for 0.5s, minReadySeconds 1: not Ready yet", summaryInput{Declared: runningOnly, Record: young},
			PhaseRunning, false, 100, ReasonMinReadySeconds, "Ready once ready for 1s", 0},
		{"running for 0.5s, counted Ready by apply", summaryInput{Declared: runningOnly, Record: young,
			Saved: &ServerStatus{Name: "api", Phase: PhaseRunning, Ready: true, PID: 100, Reason: "ready"}},
			PhaseRunning, true, 100, "ready", "", 0},
		{"running for an hour, minReadySeconds 1", summaryInput{Declared: runningOnly, Record: owned(nil)},
			PhaseRunning, true, 100, "ready", "", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.in.Name = "api"
			got := summarize(tt.in, goldenNow)
			if got.Phase != tt.wantPhase || got.Ready != tt.wantReady || got.PID != tt.wantPID || got.Reason != tt.wantReason || got.Restarts != tt.wantRestart {
				t.Errorf("got phase %s ready %v pid %d reason %q restarts %d; want %s %v %d %q %d",
					got.Phase, got.Ready, got.PID, got.Reason, got.Restarts, tt.wantPhase, tt.wantReady, tt.wantPID, tt.wantReason, tt.wantRestart)
			}
			if !strings.Contains(got.Message, tt.wantMessage) {
				t.Errorf("message %q, want it to contain %q", got.Message, tt.wantMessage)
			}
			if tt.wantPID != 0 && got.Port != rec.Port {
				t.Errorf("port %d, want the record's %d", got.Port, rec.Port)
			}
			if len(got.Conditions) != 1 || got.Conditions[0].Type != ConditionReady {
				t.Fatalf("conditions = %+v, want one Ready condition", got.Conditions)
			}
			if c := got.Conditions[0]; (c.Status == ConditionTrue) != got.Ready || c.LastTransitionTime.IsZero() {
				t.Errorf("Ready condition %+v does not match ready=%v or has no transition time", c, got.Ready)
			}
		})
	}
}
