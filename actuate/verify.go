package actuate

import (
	"errors"
	"fmt"
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
	// VerdictQuarantine (rules 4, 5, 6, and an unresolved intent record):
	// leave it alone, keep the record.
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
	// inode, instance token, cgroup, command line, and the pinning path
	// used); it goes with every signal sent.
	Evidence string
}

// TokenState is what a process's environment says of an instance token.
type TokenState int

// Token states.
const (
	// TokenUnknown: the environment could not be read (another user's or a
	// non-dumpable process), holds no token (a retitling program wiped it,
	// or env -i, sudo or su - dropped it), or the record has none to
	// compare: no evidence either way.
	TokenUnknown TokenState = iota
	// TokenOurs: the process carries the record's token.
	TokenOurs
	// TokenOther: the process carries another instance's token: it is not
	// this record's process.
	TokenOther
)

func (s TokenState) String() string {
	switch s {
	case TokenOurs:
		return "carries its instance token"
	case TokenOther:
		return "carries another instance token"
	}
	return "instance token unknown"
}

// CgroupState is what a process's cgroup says of a record that names one.
type CgroupState int

// Cgroup states.
const (
	// CgroupUnknown: the record names no cgroup, or the process's could not
	// be read.
	CgroupUnknown CgroupState = iota
	// CgroupMember: the process is in the record's cgroup (or below it).
	// A process cannot leave its cgroup by itself; only a privileged one can
	// move it out.
	CgroupMember
	// CgroupElsewhere: the process is in another cgroup. Not decisive: a
	// privileged process may have moved it.
	CgroupElsewhere
)

// Seen is what was read of the process at a record's pid, through a pin:
// Decide's input.
type Seen struct {
	// Identity and IdentityErr are the result of reading the identity
	// through the pin (IdentityErr wraps observe.ErrUntrusted when the
	// pinned process exited by the end of the read).
	Identity    observe.Identity
	IdentityErr error
	// BootID is the current boot id ("" when it could not be read).
	BootID string
	// Inode is the pidfs inode of the pin, when HaveInode.
	Inode     uint64
	HaveInode bool
	Token     TokenState
	Cgroup    CgroupState
	// CmdlineUnread: the command line was not read (Identity.Cmdline is
	// nil), the pidfs inode having proven the process; it proves nothing.
	CmdlineUnread bool
}

// Verify applies ownership rules 1-6 to a record whose process is not
// held: it pins the process at the record's pid first (pidfd on Linux,
// kqueue on macOS), then reads through the pin its identity and, unless
// equal pidfd inodes already prove it, the instance token in its
// environment (when the record has one) and its cgroup (when the record
// names one), so that nothing read after the pinned process exited is
// trusted, then decides with Decide. An intent record (rule 8) is
// not verified here: ResolveIntent resolves it; Verify reports it as a
// quarantine that signals nothing. Rule 7 (an untrusted record file) is
// StateDir.ReadRecord's.
func Verify(rec Record) Verification { return verify(rec, false) }

// verify is Verify; brief reads the least the decision needs when the
// pinned process's pidfs inode is the record's (which proves it is the
// record's process): its start time, state and uid, not its command
// line, environment or cgroup. The verdict is the same; the evidence
// names the inode, not the command line. Stop verifies briefly: it
// signals on that proof and shows no command line.
func verify(rec Record, brief bool) Verification {
	if rec.Intent() {
		return Verification{Verdict: VerdictQuarantine, Reason: UnverifiedOwner,
			Message: "an intent record (a start was interrupted between the spawn and its record): Actuator.ResolveIntent looks for the process carrying its instance token"}
	}
	h, err := observe.Pin(rec.PID)
	if err != nil {
		if errors.Is(err, observe.ErrGone) {
			return Decide(rec, Seen{IdentityErr: err})
		}
		return Verification{
			Verdict: VerdictQuarantine,
			Reason:  UnverifiedOwner,
			Message: fmt.Sprintf("cannot pin pid %d to check its identity: %v", rec.PID, err),
		}
	}
	seen := readSeen(h, rec, brief)
	v := Decide(rec, seen)
	if v.Verdict != VerdictOwned {
		_ = h.Close()
		return v
	}
	v.Handle = h
	v.Evidence += ", pinned by " + h.Mode().String()
	return v
}

// readSeen reads through h what Decide needs of rec's process; brief as
// for verify.
func readSeen(h *observe.Handle, rec Record, brief bool) Seen {
	var s Seen
	s.Inode, s.HaveInode = h.PidfdInode()
	sameInode := rec.PidfdInode != 0 && s.HaveInode && rec.PidfdInode == s.Inode
	if brief && sameInode && rec.StartTime != 0 && rec.BootID != "" {
		s.Identity, s.IdentityErr = h.IdentityBrief()
		s.CmdlineUnread = true
	} else {
		s.Identity, s.IdentityErr = h.Identity()
	}
	boot, bootErr := observe.BootID()
	if s.IdentityErr == nil && bootErr != nil {
		s.IdentityErr = fmt.Errorf("read boot id: %w", bootErr)
	}
	s.BootID = boot
	if s.IdentityErr != nil {
		return s
	}
	if sameInode {
		// The pidfs inode names this very process; the token and the
		// cgroup could only agree (two reads saved per verification).
		return s
	}
	if rec.Instance != "" {
		s.Token = tokenOf(h, rec.Instance)
	}
	if rec.Cgroup != "" {
		s.Cgroup = cgroupOf(h, rec.Cgroup)
	}
	// A read of the environment or the cgroup after the process exited
	// says nothing of it.
	if h.Exited() {
		s.IdentityErr = fmt.Errorf("pid %d: %w", rec.PID, observe.ErrUntrusted)
	}
	return s
}

// tokenOf reads the instance token of the pinned process.
func tokenOf(h *observe.Handle, want string) TokenState {
	v, found, err := h.Env(InstanceEnv)
	switch {
	case err != nil || !found:
		return TokenUnknown
	case v == want:
		return TokenOurs
	}
	return TokenOther
}

// cgroupOf says whether the pinned process is in the cgroup cg (or below).
func cgroupOf(h *observe.Handle, cg string) CgroupState {
	p, err := h.Cgroup()
	switch {
	case err != nil:
		return CgroupUnknown
	case inCgroup(p, cg):
		return CgroupMember
	}
	return CgroupElsewhere
}

// inCgroup reports whether cgroup path p is cg or below it.
func inCgroup(p, cg string) bool {
	return p == cg || strings.HasPrefix(p, cg+"/")
}

// Decide is the ownership decision (DESIGN.md rules 1-6) for a record and
// what was read of the process at its pid (a process not held: see
// StopOptions.Held for one that is). It reads nothing: a pure function of
// its arguments.
//
//   - gone, a zombie, or exited by the end of the reads: Stale (rule 1);
//   - identity unreadable: Quarantine UnverifiedOwner (rule 6);
//   - a record without start time or boot id: Quarantine UnverifiedOwner
//     when the command line is the recorded one, else Reused (rule 5);
//   - another boot, start time or pidfd inode, or another instance's
//     token: Reused (rule 3);
//   - the pidfd inodes equal, the token ours, membership of the recorded
//     cgroup, or the recorded command line: Owned, whatever uid the
//     process runs as now (rule 2); the evidence names what matched;
//   - none of these: Quarantine IdentityMismatch (rule 4).
//
// The uid is evidence, never a verdict: servers drop privileges
// (memcached -u nobody, nginx and postgres started as root, setpriv).
// Whether procfleet may signal the process is the kernel's to say at the
// signal.
func Decide(rec Record, s Seen) Verification {
	id := s.Identity
	v := Verification{Identity: id}
	switch {
	case s.IdentityErr != nil && (errors.Is(s.IdentityErr, observe.ErrGone) || errors.Is(s.IdentityErr, observe.ErrUntrusted)):
		v.Verdict = VerdictStale
		v.Message = fmt.Sprintf("pid %d has exited", rec.PID)
		return v
	case s.IdentityErr != nil:
		v.Verdict = VerdictQuarantine
		v.Reason = UnverifiedOwner
		v.Message = fmt.Sprintf("cannot read the identity of pid %d: %v", rec.PID, s.IdentityErr)
		return v
	case id.State.Exited():
		v.Verdict = VerdictStale
		v.Message = fmt.Sprintf("pid %d has exited (%s)", rec.PID, id.State)
		return v
	}
	cmdMatch := !s.CmdlineUnread && slices.Equal(rec.Cmdline, id.Cmdline)
	if rec.StartTime == 0 || rec.BootID == "" {
		missing := "start time"
		if rec.StartTime != 0 {
			missing = "boot id"
		}
		if !cmdMatch {
			v.Verdict = VerdictReused
			v.Message = fmt.Sprintf("record has no %s and pid %d runs another command line (%s)", missing, rec.PID, observe.FormatCmdline(id.Cmdline))
			return v
		}
		v.Verdict = VerdictQuarantine
		v.Reason = UnverifiedOwner
		v.Message = fmt.Sprintf("record has no %s, so pid %d (%s) cannot be proven to be this server", missing, rec.PID, observe.FormatCmdline(id.Cmdline))
		return v
	}
	if s.BootID == "" {
		v.Verdict = VerdictQuarantine
		v.Reason = UnverifiedOwner
		v.Message = "cannot read the current boot id"
		return v
	}
	inodeKnown := rec.PidfdInode != 0 && s.HaveInode
	switch {
	case rec.BootID != s.BootID:
		v.Verdict = VerdictReused
		v.Message = fmt.Sprintf("record is from another boot (%s, now %s)", rec.BootID, s.BootID)
		return v
	case rec.StartTime != id.StartTime:
		v.Verdict = VerdictReused
		v.Message = fmt.Sprintf("pid %d was reused: start time %d, record says %d", rec.PID, id.StartTime, rec.StartTime)
		return v
	case inodeKnown && rec.PidfdInode != s.Inode:
		v.Verdict = VerdictReused
		v.Message = fmt.Sprintf("pid %d was reused: pidfd inode %d, record says %d", rec.PID, s.Inode, rec.PidfdInode)
		return v
	case s.Token == TokenOther:
		v.Verdict = VerdictReused
		v.Message = fmt.Sprintf("pid %d was reused: it carries another instance token", rec.PID)
		return v
	}
	var proof []string
	if inodeKnown {
		proof = append(proof, fmt.Sprintf("pidfd inode %d", s.Inode))
	}
	if s.Token == TokenOurs {
		proof = append(proof, "instance token "+rec.Instance)
	}
	if s.Cgroup == CgroupMember {
		proof = append(proof, "member of cgroup "+rec.Cgroup)
	}
	if cmdMatch {
		proof = append(proof, "command line "+observe.FormatCmdline(id.Cmdline))
	}
	if len(proof) == 0 {
		v.Verdict = VerdictQuarantine
		v.Reason = IdentityMismatch
		v.Message = fmt.Sprintf("pid %d has the recorded start time but runs %s, record says %s, and shows no instance token, pidfd inode or cgroup that proves it is this server",
			rec.PID, observe.FormatCmdline(id.Cmdline), observe.FormatCmdline(rec.Cmdline))
		return v
	}
	v.Verdict = VerdictOwned
	v.Message = fmt.Sprintf("pid %d is this server", rec.PID)
	v.Evidence = fmt.Sprintf("pid %d, start time %d, boot id %s, %s; runs as uid %d", rec.PID, id.StartTime, s.BootID, strings.Join(proof, ", "), id.UID)
	return v
}

// ManualStopHint tells a person how to stop a server's process by hand, for a
// quarantined server procfleet will not signal.
func ManualStopHint(rec Record) string {
	if rec.Intent() {
		return fmt.Sprintf("if a process of yours carries %s=%s in its environment (grep -l %s /proc/*/environ), stop it by hand, then remove %s.json from the state folder's servers/",
			InstanceEnv, rec.Instance, rec.Instance, rec.Name)
	}
	pgid := rec.PGID
	if pgid <= 0 {
		pgid = rec.PID
	}
	hint := fmt.Sprintf("if pid %d (%s) is yours, stop its process group by hand with: kill -TERM -- -%d", rec.PID, observe.FormatCmdline(rec.Cmdline), pgid)
	if rec.Cgroup != "" {
		dir, err := cgroupDir(rec.Cgroup)
		if err != nil {
			dir = "<cgroup v2 mount>" + rec.Cgroup
		}
		hint += fmt.Sprintf(" (or every process of its cgroup: echo 1 > %s/cgroup.kill)", dir)
	} else if rec.Instance != "" {
		// A child that left the group (setsid, a double fork) still
		// carries the token, unless it rewrote its environment.
		hint += fmt.Sprintf(", and any process of its that left the group and carries %s=%s (grep -l %s /proc/*/environ)", InstanceEnv, rec.Instance, rec.Instance)
	}
	return hint + fmt.Sprintf(", then remove %s.json from the state folder's servers/", rec.Name)
}
