package actuate

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/procfleet/procfleet/observe"
)

// Verdict is the outcome of checking a record against the process at its pid.
type Verdict int

// Verdicts.
const (
	// VerdictOwned (rule 2): the process is the one the record describes; it
	// may be signalled, through Verification.Handle.
	VerdictOwned Verdict = iota
	// VerdictStale (rule 1, and rule 5 for an exited process): no such
	// process, or a zombie or dead one; remove the record, signal nothing.
	VerdictStale
	// VerdictReused (rule 3, and rule 5 for another command line): the pid
	// belongs to another process now; remove the record, signal nothing.
	VerdictReused
	// VerdictQuarantine (rules 4, 5, 6): leave it alone, keep the record.
	VerdictQuarantine
)

// String returns "Owned", "Stale", "Reused" or "Quarantine".
func (v Verdict) String() string {
	switch v {
	case VerdictOwned:
		return "Owned"
	case VerdictStale:
		return "Stale"
	case VerdictReused:
		return "Reused"
	case VerdictQuarantine:
		return "Quarantine"
	}
	return "Verdict(" + strconv.Itoa(int(v)) + ")"
}

// Verification is the answer of Verify for one record.
type Verification struct {
	Verdict Verdict
	// Reason is set for VerdictQuarantine.
	Reason QuarantineReason
	// Message says, for a person, why.
	Message string
	// Identity is what was read of the process (zero when nothing could be).
	Identity observe.Identity
	// Handle pins the process; set only when Owned, and the caller closes it.
	Handle *observe.Handle
	// Evidence names what proved ownership (pid, start time, boot id, pidfd
	// inode, and the pinning path used); it goes with every signal sent.
	Evidence string
}

// Verify applies ownership rules 1-6 to a record: it pins the process at the
// record's pid first (pidfd on Linux, kqueue on macOS), then reads its
// identity through the pin, so that an identity read after the pinned
// process exited is never trusted, then decides with Decide. Rule 7 (an
// untrusted record file) is StateDir.ReadRecord's.
func Verify(rec Record) Verification {
	h, err := observe.Pin(rec.PID)
	if err != nil {
		if errors.Is(err, observe.ErrGone) {
			return Decide(rec, observe.Identity{}, err, "", 0, false)
		}
		return Verification{
			Verdict: VerdictQuarantine,
			Reason:  UnverifiedOwner,
			Message: fmt.Sprintf("cannot pin pid %d to check its identity: %v", rec.PID, err),
		}
	}
	id, idErr := h.Identity()
	boot, bootErr := observe.BootID()
	if idErr == nil && bootErr != nil {
		idErr = fmt.Errorf("read boot id: %w", bootErr)
	}
	inode, haveInode := h.PidfdInode()
	v := Decide(rec, id, idErr, boot, inode, haveInode)
	if v.Verdict != VerdictOwned {
		_ = h.Close()
		return v
	}
	v.Handle = h
	v.Evidence += ", pinned by " + h.Mode().String()
	return v
}

// Decide is the ownership decision (DESIGN.md rules 1-6) for a record and
// what was read of the process at its pid: id and idErr from reading its
// identity through a pin, the current boot id, and the pidfs inode of the pin
// when the kernel has one. Beyond the rules, a process must run as the uid
// the record holds and as this process's effective uid: procfleet starts
// servers as itself, so a process of another uid is never one of them
// (IdentityMismatch). It reads nothing but os.Geteuid; decideAs is the pure
// form.
func Decide(rec Record, id observe.Identity, idErr error, bootID string, inode uint64, haveInode bool) Verification {
	return decideAs(os.Geteuid(), rec, id, idErr, bootID, inode, haveInode)
}

func decideAs(euid int, rec Record, id observe.Identity, idErr error, bootID string, inode uint64, haveInode bool) Verification {
	v := Verification{Identity: id}
	switch {
	case idErr != nil && (errors.Is(idErr, observe.ErrGone) || errors.Is(idErr, observe.ErrUntrusted)):
		// Rule 1 (and rule 5 for an exited process).
		v.Verdict = VerdictStale
		v.Message = fmt.Sprintf("pid %d has exited", rec.PID)
		return v
	case idErr != nil:
		// Rule 6.
		v.Verdict = VerdictQuarantine
		v.Reason = UnverifiedOwner
		v.Message = fmt.Sprintf("cannot read the identity of pid %d: %v", rec.PID, idErr)
		return v
	case id.State.Exited():
		v.Verdict = VerdictStale
		v.Message = fmt.Sprintf("pid %d has exited (%s)", rec.PID, id.State)
		return v
	}
	cmdMatch := slices.Equal(rec.Cmdline, id.Cmdline)
	if rec.StartTime == 0 || rec.BootID == "" {
		// Rule 5: the record cannot prove ownership.
		missing := "start time"
		if rec.StartTime != 0 {
			missing = "boot id"
		}
		if !cmdMatch {
			v.Verdict = VerdictReused
			v.Message = fmt.Sprintf("record has no %s and pid %d runs another command line (%s)", missing, rec.PID, quoteArgv(id.Cmdline))
			return v
		}
		v.Verdict = VerdictQuarantine
		v.Reason = UnverifiedOwner
		v.Message = fmt.Sprintf("record has no %s, so pid %d (%s) cannot be proven to be this server", missing, rec.PID, quoteArgv(id.Cmdline))
		return v
	}
	if bootID == "" {
		v.Verdict = VerdictQuarantine
		v.Reason = UnverifiedOwner
		v.Message = "cannot read the current boot id"
		return v
	}
	// Rule 3.
	switch {
	case rec.BootID != bootID:
		v.Verdict = VerdictReused
		v.Message = fmt.Sprintf("record is from another boot (%s, now %s)", rec.BootID, bootID)
		return v
	case rec.StartTime != id.StartTime:
		v.Verdict = VerdictReused
		v.Message = fmt.Sprintf("pid %d was reused: start time %d, record says %d", rec.PID, id.StartTime, rec.StartTime)
		return v
	case rec.PidfdInode != 0 && haveInode && rec.PidfdInode != inode:
		v.Verdict = VerdictReused
		v.Message = fmt.Sprintf("pid %d was reused: pidfd inode %d, record says %d", rec.PID, inode, rec.PidfdInode)
		return v
	}
	// Not ours whatever else matches: another uid.
	if id.UID != euid || id.UID != rec.UID {
		v.Verdict = VerdictQuarantine
		v.Reason = IdentityMismatch
		v.Message = fmt.Sprintf("pid %d runs as uid %d; the record says uid %d and procfleet runs as uid %d", rec.PID, id.UID, rec.UID, euid)
		return v
	}
	// Rule 4.
	if !cmdMatch {
		v.Verdict = VerdictQuarantine
		v.Reason = IdentityMismatch
		v.Message = fmt.Sprintf("pid %d has the recorded start time but runs %s, record says %s", rec.PID, quoteArgv(id.Cmdline), quoteArgv(rec.Cmdline))
		return v
	}
	// Rule 2.
	v.Verdict = VerdictOwned
	v.Message = fmt.Sprintf("pid %d is this server", rec.PID)
	v.Evidence = fmt.Sprintf("pid %d, start time %d, boot id %s", rec.PID, id.StartTime, bootID)
	if rec.PidfdInode != 0 && haveInode {
		v.Evidence += fmt.Sprintf(", pidfd inode %d", inode)
	}
	return v
}

// quoteArgv renders an argv for messages.
func quoteArgv(argv []string) string {
	if len(argv) == 0 {
		return "[]"
	}
	q := make([]string, len(argv))
	for i, a := range argv {
		q[i] = strconv.Quote(a)
	}
	return "[" + strings.Join(q, " ") + "]"
}

// ManualStopHint tells a person how to stop a server's process by hand, for a
// quarantined server procfleet will not signal.
func ManualStopHint(rec Record) string {
	pgid := rec.PGID
	if pgid <= 0 {
		pgid = rec.PID
	}
	return fmt.Sprintf("if pid %d (%s) is yours, stop its process group by hand with: kill -TERM -- -%d, then remove %s.json from the state folder's servers/",
		rec.PID, quoteArgv(rec.Cmdline), pgid, rec.Name)
}
