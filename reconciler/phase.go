package reconciler

import (
	"fmt"
	"time"
)

// Phase is where a server is in its lifecycle, as reported by status.
type Phase uint8

// Phases, as named in DESIGN.md.
const (
	PhasePending Phase = iota
	PhaseStarting
	PhaseRunning
	PhaseStopping
	PhaseStopped
	PhaseFailed
	PhaseCrashLoopBackOff
	PhaseQuarantined
)

var phaseNames = [...]string{
	PhasePending:          "Pending",
	PhaseStarting:         "Starting",
	PhaseRunning:          "Running",
	PhaseStopping:         "Stopping",
	PhaseStopped:          "Stopped",
	PhaseFailed:           "Failed",
	PhaseCrashLoopBackOff: "CrashLoopBackOff",
	PhaseQuarantined:      "Quarantined",
}

// String returns the phase's name as DESIGN.md spells it.
func (p Phase) String() string {
	if int(p) < len(phaseNames) {
		return phaseNames[p]
	}
	return fmt.Sprintf("Phase(%d)", p)
}

// MarshalText makes a Phase a JSON string.
func (p Phase) MarshalText() ([]byte, error) { return []byte(p.String()), nil }

// UnmarshalText parses a phase name.
func (p *Phase) UnmarshalText(b []byte) error {
	for i, n := range phaseNames {
		if n == string(b) {
			*p = Phase(i)
			return nil
		}
	}
	return fmt.Errorf("unknown phase %q", b)
}

// ConditionStatus is "True", "False" or "Unknown".
type ConditionStatus string

// Condition statuses.
const (
	ConditionTrue    ConditionStatus = "True"
	ConditionFalse   ConditionStatus = "False"
	ConditionUnknown ConditionStatus = "Unknown"
)

// ConditionReady is the one condition type procfleet reports.
const ConditionReady = "Ready"

// Condition is a Kubernetes-style condition.
type Condition struct {
	Type               string          `json:"type"`
	Status             ConditionStatus `json:"status"`
	Reason             string          `json:"reason"`
	Message            string          `json:"message"`
	LastTransitionTime time.Time       `json:"lastTransitionTime"`
}

// setCondition updates c in place and moves LastTransitionTime only when the
// status changes. It reports whether the status changed.
func setCondition(c *Condition, status ConditionStatus, reason, message string, now time.Time) bool {
	changed := c.Status != status
	if changed || c.LastTransitionTime.IsZero() {
		c.LastTransitionTime = now
	}
	c.Status, c.Reason, c.Message = status, reason, message
	return changed
}

// LastExit describes how a server's last process ended.
type LastExit struct {
	// Code is the exit code; -1 when the process was killed by a signal or
	// its status could not be read. A process procfleet did not start in
	// this run (adopted) is not its child: its exit is reported at once
	// with -1 and "status unknown", and on Linux >= 6.15 replaced by the
	// real status once its parent has reaped it (an ExitLearned event),
	// within 5 s or not at all. The restart decision is made on the -1.
	Code   int       `json:"code"`
	Signal string    `json:"signal"`
	Reason string    `json:"reason"`
	At     time.Time `json:"at"`
}

// Failed reports whether the exit counts as a failure for restartPolicy
// OnFailure: any exit other than code 0 that was seen.
func (e *LastExit) Failed() bool { return e.Code != 0 || e.Signal != "" }
