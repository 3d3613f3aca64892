package observe

import "fmt"

// ExitStatus is how a process ended, as its parent's wait would tell. It
// has the shape of actuate.ExitStatus (actuate imports observe, so observe
// cannot use that type).
type ExitStatus struct {
	// Code is the exit code, or -1 when the process was killed by a signal.
	Code int
	// Signal is the name of the signal that killed it ("SIGKILL"), or "".
	Signal string
	// SignalNumber is that signal's number, 0 when it exited.
	SignalNumber int
	// CoreDumped: the signal made it dump core.
	CoreDumped bool
}

// String is "exited with code N" or "killed by signal N (NAME)", with
// " (core dumped)" when it did.
func (s ExitStatus) String() string {
	if s.Signal == "" {
		return fmt.Sprintf("exited with code %d", s.Code)
	}
	out := fmt.Sprintf("killed by signal %d (%s)", s.SignalNumber, s.Signal)
	if s.CoreDumped {
		out += " (core dumped)"
	}
	return out
}
