package actuate

import (
	"fmt"
	"io/fs"
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

// StartError reports a start that failed. Reason is "PortConflict"
// (nothing was started), "Daemonized" (the first process exited 0 and left
// a daemon, which was stopped) or "Failed"; in the last two, the process,
// whatever it left, its record and its log handle are gone by the time the
// error is returned.
type StartError struct {
	Name     string
	Reason   string // ReasonPortConflict, ReasonDaemonized or ReasonFailed
	ExitCode int    // exit code when it exited on its own, else -1
	Signal   string // "SIGKILL" when killed by a signal, else ""
	Message  string
	LogTail  []string // the last lines the process wrote to its log in this run
	// Holder is who holds the port: for PortConflict, and for Daemonized
	// when the daemon held it. Callers use it as data, never the Message.
	Holder *observe.PortHolder
	// HolderPIDs is Holder.PIDs (kept for older callers).
	HolderPIDs []int
	// DaemonPID is the daemon a Daemonized server left (now stopped).
	DaemonPID int
	// OOM is the kernel's evidence that the out-of-memory killer ended the
	// process ("" when the kernel says nothing of it: no guess is made).
	OOM string
	Err error // underlying error, if any (for example a failed stop)
}

// Reasons of StartError.
const (
	ReasonPortConflict = "PortConflict"
	ReasonDaemonized   = "Daemonized"
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

// ForeignRecordError reports a record written in another state folder: a
// copied project (cp -a) carries the original's records, and a copy never
// acts on the original's processes. It is not damage: nothing is
// quarantined, and the server counts as having no record, which is why the
// error wraps fs.ErrNotExist. The lock holder moved it to MovedTo
// (<name>.json.foreign-<time>); MovedTo is empty for the read-only readers
// and when the move failed (MoveErr).
type ForeignRecordError struct {
	Name    string
	Path    string
	Folder  FolderID // the folder the record names
	Here    FolderID // the folder it was read from
	MovedTo string
	MoveErr error
}

func (e *ForeignRecordError) Error() string {
	msg := fmt.Sprintf("record of server %s (%s) was written in another state folder (%s; this one is %s), as in a copied project: it is never acted on, and the server counts as having no record",
		e.Name, e.Path, e.Folder, e.Here)
	switch {
	case e.MovedTo != "":
		msg += "; moved aside to " + e.MovedTo
	case e.MoveErr != nil:
		msg += fmt.Sprintf("; moving it aside failed: %v", e.MoveErr)
	}
	return msg
}

// Unwrap makes errors.Is(err, fs.ErrNotExist) hold: the server has no
// record of this folder.
func (e *ForeignRecordError) Unwrap() error { return fs.ErrNotExist }

// StateDirChangedError reports that a state folder's path no longer names
// the folder that was opened (and locked): it was deleted, or replaced by
// another folder. The holder must stop acting on it.
type StateDirChangedError struct {
	Path string
	Was  FolderID
	// Now is the folder at Path now (zero when nothing is there: Err).
	Now FolderID
	Err error
}

func (e *StateDirChangedError) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("state folder %s (%s) is gone: %v", e.Path, e.Was, e.Err)
	}
	return fmt.Sprintf("state folder %s was replaced: it was %s, now %s", e.Path, e.Was, e.Now)
}

func (e *StateDirChangedError) Unwrap() error { return e.Err }
