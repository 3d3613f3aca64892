package actuate

import (
	"fmt"
	"strings"

	"github.com/procfleet/procfleet/observe"
)

// QuarantineReason says why a server is left alone. The values are the
// quarantine reasons of DESIGN.md.
type QuarantineReason string

// Quarantine reasons.
const (
	// UnverifiedOwner: the record cannot prove ownership (no start time or
	// boot id), or the identity of the process could not be read at all.
	UnverifiedOwner QuarantineReason = "UnverifiedOwner"
	// IdentityMismatch: the start time matches but the command line does not.
	IdentityMismatch QuarantineReason = "IdentityMismatch"
	// PortConflict: the declared port is held by a process that is not this server.
	PortConflict QuarantineReason = "PortConflict"
	// Unkillable: the process outlived SIGKILL and the kill timeout.
	Unkillable QuarantineReason = "Unkillable"
	// UntrustedRecord: the record did not parse, or was owned by another
	// user, or was readable or writable by group or others.
	UntrustedRecord QuarantineReason = "UntrustedRecord"
)

// QuarantineError is returned when a server is left alone: nothing was
// signalled (or, for Unkillable, nothing more will be), and the record is
// kept byte for byte. Hint tells a person how to stop it by hand.
type QuarantineError struct {
	Name    string
	Reason  QuarantineReason
	PID     int
	PGID    int
	State   observe.State // process state when known (Unkillable)
	Message string
	Hint    string // manual-stop instruction, see ManualStopHint
}

func (e *QuarantineError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "server %s quarantined (%s): %s", e.Name, e.Reason, e.Message)
	if e.Reason == Unkillable {
		fmt.Fprintf(&b, " (state %s)", e.State)
	}
	if e.Hint != "" {
		fmt.Fprintf(&b, "; %s", e.Hint)
	}
	return b.String()
}

// StartError reports a start that failed. Reason is "PortConflict" (nothing
// was started) or "Failed" (the process was started, and is gone again, with
// its record and log handle, by the time the error is returned).
type StartError struct {
	Name       string
	Reason     string // "PortConflict" or "Failed"
	ExitCode   int    // exit code when it exited on its own, else -1
	Signal     string // "SIGKILL" when killed by a signal, else ""
	Message    string
	LogTail    []string // the last lines the process wrote to its log in this run
	HolderPIDs []int    // PortConflict: pids holding the port, when visible
	Err        error    // underlying error, if any (for example a failed stop)
}

// Reasons of StartError.
const (
	ReasonPortConflict = "PortConflict"
	ReasonFailed       = "Failed"
)

func (e *StartError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "start server %s: %s", e.Name, e.Message)
	if e.Err != nil {
		fmt.Fprintf(&b, ": %v", e.Err)
	}
	if len(e.LogTail) > 0 {
		fmt.Fprintf(&b, "\nlast %d log lines:\n%s", len(e.LogTail), strings.Join(e.LogTail, "\n"))
	}
	return b.String()
}

func (e *StartError) Unwrap() error { return e.Err }

// LockedError is returned by Lock when another process holds the state
// folder's lock. PID is the holder's pid as written in the lock file (0 when
// it could not be read).
type LockedError struct {
	Path string
	PID  int
}

func (e *LockedError) Error() string {
	if e.PID > 0 {
		return fmt.Sprintf("state folder is locked by pid %d (%s)", e.PID, e.Path)
	}
	return fmt.Sprintf("state folder is locked by another process (%s)", e.Path)
}

// UntrustedRecordError reports a record that is never trusted: it did not
// parse, or its file was owned by another user or accessible to group or
// others, or it was not a regular file. ReadRecord and Records (the lock
// holder's) moved the file aside to MovedTo; MovedTo is empty when even that
// failed (Reason says so) and always for InspectRecord and InspectRecords,
// which leave the file at Path.
type UntrustedRecordError struct {
	Name    string
	Path    string
	MovedTo string
	Reason  string
}

func (e *UntrustedRecordError) Error() string {
	if e.MovedTo == "" {
		return fmt.Sprintf("record of server %s not trusted (%s): %s", e.Name, e.Path, e.Reason)
	}
	return fmt.Sprintf("record of server %s not trusted (%s): %s; moved aside to %s", e.Name, e.Path, e.Reason, e.MovedTo)
}

// NewerRecordError reports a record written by a newer procfleet (a record
// format this one cannot read). The record is left where it is: it may prove
// that a server runs, and the procfleet that wrote it can still use it. No
// process is signalled on its account, and the server is not started again
// beside it (rule 6: its owner cannot be checked).
type NewerRecordError struct {
	Name    string
	Path    string
	Version int
}

func (e *NewerRecordError) Error() string {
	return fmt.Sprintf("record of server %s (%s) was written by a newer procfleet (record version %d; this one reads up to %d): its process cannot be checked; use that procfleet, or stop the process by hand and delete the record",
		e.Name, e.Path, e.Version, RecordVersion)
}
