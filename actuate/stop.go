package actuate

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/procfleet/procfleet/observe"
)

// StopOptions bound a stop. Zero durations take the defaults (20 s, 10 s).
type StopOptions struct {
	Grace, KillTimeout time.Duration
	// Port is waited on until nothing accepts TCP there (0: the record's).
	Port int
	// Ready, when set, is asked about a listener still on the port after the
	// stop, to tell whether it is (another copy of) the server.
	Ready func(ctx context.Context) observe.ProbeResult
	// Held is a pin the caller has kept open on the server's process since
	// it spawned or adopted it (the reconciler keeps one). The kernel
	// guarantees it is the same process whatever its command line or uid
	// has become (an exec, a retitle, a privilege drop), so Stop signals it
	// without judging it again; it still refuses init and procfleet
	// itself. Held must pin rec.PID; Stop does not close it. For Cleanup it
	// is the pin on the leader that has just exited: it lets Cleanup stop
	// the rest of the leader's process group (see Cleanup).
	Held *observe.Handle
	// CallerReportsStopped leaves the report of a stop that ended well to
	// the caller (the reconciler's Stopped event says it): Stop sends no
	// Stopped event then. Its signals, a quarantine, a removed record and
	// a record that stays are events all the same.
	CallerReportsStopped bool
}

func (o StopOptions) durations() (grace, killTimeout time.Duration) {
	return durationOr(o.Grace, DefaultGrace), durationOr(o.KillTimeout, DefaultKillTimeout)
}

// member is a pinned, verified process of a server.
type member struct {
	h        *observe.Handle
	id       observe.Identity
	evidence string
	// borrowed: h is the caller's (StopOptions.Held); it is not closed here.
	borrowed bool
}

// target is one signal destination: a pinned process, the process group
// of a pinned, live leader, or (SIGKILL only) every process of a server's
// cgroup.
type target struct {
	name      string
	h         *observe.Handle
	group     bool // the process group of h (h leads it)
	pgid      int
	cgroup    string // the cgroup path, for cgroup.kill
	cgroupDir string
	evidence  string
}

func (t target) String() string {
	switch {
	case t.cgroup != "":
		return "every process of cgroup " + t.cgroup
	case t.group:
		return fmt.Sprintf("process group %d", t.pgid)
	}
	return fmt.Sprintf("pid %d", t.h.PID())
}

// send delivers sig. A group signal goes through the leader's pidfd on Linux
// >= 6.9 (PIDFD_SIGNAL_PROCESS_GROUP), else killpg while the pinned leader
// is alive (a process group id cannot be reused while its leader lives). A
// cgroup gets SIGKILL by cgroup.kill, which also kills forks racing it.
func (t target) send(sig syscall.Signal) (how string, err error) {
	switch {
	case t.cgroup != "":
		if sig != syscall.SIGKILL {
			return "", fmt.Errorf("cgroup.kill sends SIGKILL only, not %s", signalName(sig))
		}
		return "by cgroup.kill", killCgroup(t.cgroupDir)
	case t.group:
		return signalGroupOf(t.h, t.pgid, sig)
	}
	return "through its " + t.h.Mode().String() + " pin", t.h.Signal(sig)
}

// sendSignal sends sig to t and reports it as an event naming the evidence.
// A target that has exited meanwhile is not an error (nothing was
// signalled).
func (a *Actuator) sendSignal(t target, sig syscall.Signal) error {
	var how string
	var err error
	if a.signal != nil {
		how, err = a.signal(t, sig)
	} else {
		how, err = t.send(sig)
	}
	if err != nil {
		if errors.Is(err, observe.ErrGone) || errors.Is(err, syscall.ESRCH) || errors.Is(err, os.ErrProcessDone) {
			return nil // exited meanwhile: nothing was signalled
		}
		a.Log.Error(err, "Signal failed", "server", t.name, "signal", signalName(sig), "target", t.String())
		return err
	}
	a.event(t.name, EventSignal, fmt.Sprintf("sent %s to %s %s; evidence: %s", signalName(sig), t, how, t.evidence))
	return nil
}

// Stop stops the server of a record.
//
// The server's process is pinned and verified (rules 1-6), or taken as it
// is when the caller holds it (StopOptions.Held). A quarantine returns
// *QuarantineError and keeps the record; nothing is signalled. When the
// process has exited, or its pid was reused, what it left behind is
// stopped as Cleanup does (without a held pin: its cgroup, or the
// processes carrying its instance token) and the record is removed.
//
// With a cgroup (MembershipCgroup) every member is pinned and sent
// SIGTERM, new members as they appear; after the grace period cgroup.kill
// ends whatever is left, and stopped means the cgroup is empty; the empty
// cgroup is removed. In the session mode SIGTERM goes to the group while
// the pinned leader lives, and one by one to the pinned descendants that
// left it and the processes carrying the instance token (one process-table
// scan shared by every stop running at the same time); after the grace
// period identities are re-read and SIGKILL follows likewise; once the
// leader has exited, the rest of its group is found, pinned, checked and
// signalled one by one. Anything alive after the kill timeout gives
// *QuarantineError Unkillable ("failed to terminate even after SIGKILL",
// with its state). A process that has already exited is never signalled;
// every signal sent is an event naming the evidence that allowed it.
//
// It then removes the record (an error that says the process stopped when
// that fails) and waits up to 5 s for nothing to accept TCP on the port.
// Every error other than *QuarantineError begins "stop server <name>: ".
func (a *Actuator) Stop(ctx context.Context, rec Record, opts StopOptions) error {
	name := rec.Name
	if rec.Intent() {
		return a.stopIntent(ctx, rec, opts)
	}
	if q := refuseSelf(rec); q != nil {
		a.event(name, EventQuarantined, q.Message)
		return q
	}
	grace, killTimeout := opts.durations()
	leader, gone, err := a.leaderOf(rec, opts.Held)
	if err != nil {
		return err
	}
	if leader == nil {
		// No signal on the word of the record's pid: what the server left
		// is found by its cgroup or its token (and its group, when the
		// caller held the leader through its exit).
		if err := a.cleanup(ctx, rec, opts.Held != nil, grace, killTimeout); err != nil {
			return err
		}
		if err := a.Dir.RemoveRecord(name); err != nil {
			return fmt.Errorf("stop server %s: %w", name, err)
		}
		a.event(name, EventRecordRemoved, "record removed, nothing signalled on its pid: "+gone)
		return nil
	}
	defer closeMembers([]*member{leader})
	if leader.h.Mode() == observe.PinNone {
		a.Log.Info("Process not pinned: signals use its pid after a check", "server", name, "pid", rec.PID)
	}
	if err := a.terminateServer(ctx, rec, leader, grace, killTimeout); err != nil {
		return err
	}
	if ch := a.ownChild(rec.PID); ch != nil {
		waitDone(ctx, ch.done, killTimeout)
	}
	// The process is gone: its record is stale whatever the port says.
	if err := a.Dir.RemoveRecord(name); err != nil {
		// Stopped all the same (the state folder full or read-only): say
		// so. The record left behind names an exited process, which any
		// later verification finds stale (rule 1) and removes without a
		// signal.
		a.event(name, EventStopped, fmt.Sprintf("pid %d stopped; its record could not be removed", rec.PID))
		return fmt.Errorf("stop server %s: pid %d stopped, but its record stays: %w", name, rec.PID, err)
	}
	port := opts.Port
	if port == 0 {
		port = rec.Port
	}
	if port > 0 {
		if err := a.waitPortFree(ctx, name, port, opts.Ready); err != nil {
			return err
		}
	}
	if !opts.CallerReportsStopped {
		a.event(name, EventStopped, fmt.Sprintf("pid %d stopped", rec.PID))
	}
	return nil
}

// leaderOf returns the server's live process, pinned: the caller's held
// pin, or one Verify proves owned. A nil member with a reason when it has
// exited or its pid was reused; *QuarantineError when it cannot be proven.
func (a *Actuator) leaderOf(rec Record, held *observe.Handle) (*member, string, error) {
	if held != nil {
		if held.PID() != rec.PID {
			return nil, "", fmt.Errorf("stop server %s: the held pin is on pid %d, the record names pid %d", rec.Name, held.PID(), rec.PID)
		}
		id, err := held.Identity()
		switch {
		case errors.Is(err, observe.ErrGone) || errors.Is(err, observe.ErrUntrusted) || (err == nil && id.State.Exited()) || held.Exited():
			return nil, fmt.Sprintf("pid %d (held) has exited", rec.PID), nil
		case err != nil:
			// The pin proves who it is; only the details are unknown.
			id = observe.Identity{PID: rec.PID, PGID: rec.PGID, SID: rec.PID, StartTime: rec.StartTime, UID: rec.UID}
		}
		ev := fmt.Sprintf("pid %d, held: pinned by %s since procfleet spawned or adopted it (now runs %s as uid %d)",
			rec.PID, held.Mode(), observe.FormatCmdline(id.Cmdline), id.UID)
		return &member{h: held, id: id, evidence: ev, borrowed: true}, "", nil
	}
	v := verify(rec, true)
	switch v.Verdict {
	case VerdictStale, VerdictReused:
		return nil, v.Message, nil
	case VerdictQuarantine:
		q := &QuarantineError{Name: rec.Name, Reason: v.Reason, PID: rec.PID, PGID: rec.PGID,
			State: v.Identity.State, Message: v.Message, Hint: ManualStopHint(rec)}
		a.event(rec.Name, EventQuarantined, q.Error())
		return nil, "", q
	}
	return &member{h: v.Handle, id: v.Identity, evidence: v.Evidence}, "", nil
}

// terminateServer stops a server whose leader lives and is pinned, with
// every member of it: by its cgroup, or by its session.
func (a *Actuator) terminateServer(ctx context.Context, rec Record, leader *member, grace, killTimeout time.Duration) error {
	if rec.Cgroup != "" {
		dir, err := cgroupDir(rec.Cgroup)
		if err != nil {
			return fmt.Errorf("stop server %s: find its cgroup %s: %w", rec.Name, rec.Cgroup, err)
		}
		// Its first listing also tells whether the cgroup is there.
		pids, err := observe.CgroupProcs(dir)
		switch {
		case err == nil:
			return a.terminateListed(ctx, rec, dir, leader, &pids, grace, killTimeout)
		case !errors.Is(err, fs.ErrNotExist):
			return fmt.Errorf("stop server %s: %w", rec.Name, err)
		}
		a.Log.Info("The server's cgroup is gone: its session is stopped instead", "server", rec.Name, "cgroup", rec.Cgroup)
	}
	pinned := map[int]bool{rec.PID: true}
	ms := []*member{leader}
	ms = append(ms, a.collectTree(rec, leader, pinned)...)
	ms = append(ms, a.sessionExtras(rec, pinned, false)...)
	defer closeMembers(ms[1:])
	return a.terminate(ctx, rec, ms, grace, killTimeout, true)
}

// Cleanup stops what is left of a server whose leader has exited (DESIGN.md
// "Starting": nothing is left behind before a restart or a Stopped or
// Failed report), as systemd stops the rest of a unit's cgroup when its
// main process exits. rec is the server's record; opts.Held, when the
// caller held the leader until its exit (the reconciler at the exit
// event), allows stopping the rest of the leader's process group: while
// members remain, the leader's pid number stays in use as their group id,
// so it cannot name a stranger's group. Without it only what proves itself
// is stopped: the cgroup's members, or the processes carrying the instance
// token.
//
// With a cgroup it returns at once, after one read of cgroup.events, when
// nothing is left; in the session mode "nothing left" takes one
// process-table scan (shared by every cleanup and stop running at the same
// time). What is left is stopped as Stop does (SIGTERM, the grace period,
// SIGKILL or cgroup.kill, the kill timeout), each process pinned, checked
// (in the cgroup, or carrying the token, or in the group; of procfleet's
// uid unless procfleet runs as root), and every signal an event naming
// its evidence. *QuarantineError Unkillable when something outlives it. It
// neither reads nor removes the record; the empty cgroup is removed. Call
// OOMEvidence first: the cgroup's memory.events goes with it.
func (a *Actuator) Cleanup(ctx context.Context, rec Record, opts StopOptions) error {
	if rec.Intent() {
		return fmt.Errorf("clean up after server %s: an intent record has no leader (ResolveIntent)", rec.Name)
	}
	if opts.Held != nil && (opts.Held.PID() != rec.PID || !opts.Held.Exited()) {
		return fmt.Errorf("clean up after server %s: the held pin (pid %d) is not the record's exited leader (pid %d): use Stop", rec.Name, opts.Held.PID(), rec.PID)
	}
	grace, killTimeout := opts.durations()
	return a.cleanup(ctx, rec, opts.Held != nil, grace, killTimeout)
}

// cleanup stops what rec's server left after its leader exited. group says
// the leader was held until its exit: the rest of its group may go too.
func (a *Actuator) cleanup(ctx context.Context, rec Record, group bool, grace, killTimeout time.Duration) error {
	if rec.Cgroup != "" {
		dir, err := cgroupDir(rec.Cgroup)
		if err != nil {
			return fmt.Errorf("clean up after server %s: find its cgroup %s: %w", rec.Name, rec.Cgroup, err)
		}
		populated, err := observe.CgroupPopulated(dir)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return nil
		case err != nil:
			return fmt.Errorf("clean up after server %s: %w", rec.Name, err)
		case !populated:
			return removeCgroup(dir)
		}
		return a.terminateCgroup(ctx, rec, dir, nil, grace, killTimeout)
	}
	if ch := a.ownChild(rec.PID); ch != nil {
		// Our reaper is about to take the leader's zombie out of the group.
		waitDone(ctx, ch.done, 100*time.Millisecond)
	}
	ms := a.sessionExtras(rec, map[int]bool{}, group && rec.PGID > 1)
	if len(ms) == 0 {
		return nil
	}
	defer closeMembers(ms)
	return a.terminate(ctx, rec, ms, grace, killTimeout, group)
}

// selfIDs are procfleet's pid and process group, read once: procfleet
// never calls setsid or setpgid on itself, and a parent may change a
// child's group only before the child's exec (setpgid(2): EACCES after
// it), so both are fixed for the life of the process.
var selfIDs = sync.OnceValues(func() (pid, pgid int) { return os.Getpid(), ownPGID() })

// refuseSelf refuses records that would make procfleet signal itself, its own
// group, or init.
func refuseSelf(rec Record) *QuarantineError {
	self, mine := selfIDs()
	if rec.PID > 1 && rec.PID != self && rec.PGID != 1 && (rec.PGID == 0 || rec.PGID != mine) {
		return nil
	}
	return &QuarantineError{Name: rec.Name, Reason: UnverifiedOwner, PID: rec.PID, PGID: rec.PGID,
		Message: fmt.Sprintf("refusing to signal pid %d / group %d: it is init or procfleet itself", rec.PID, rec.PGID),
		Hint:    ManualStopHint(rec)}
}

// mayKill reports whether procfleet may signal a process of uid: its own
// uid, or any as root. A process it may not signal is left alone and said
// so, never guessed at.
func mayKill(uid int) bool {
	euid := os.Geteuid()
	return euid == 0 || uid == euid
}

// collectTree lists the server's descendants (which finds a descendant that
// left the group with setsid or setpgid, while its parent chain still leads
// to the server), pins each and keeps those whose identity, read through the
// pin, shows them in the group or below a process of the tree, and not older
// than the server. Members of the group outside the tree are reached by the
// group signal while the leader lives, and looked for (addStragglers) once
// it has exited. pinned gains the pids kept.
func (a *Actuator) collectTree(rec Record, leader *member, pinned map[int]bool) []*member {
	pids, err := descendantsOf(rec.PID)
	if errors.Is(err, errNoChildrenFiles) {
		pids, err = observe.Descendants(rec.PID)
	}
	if err != nil {
		a.Log.Error(err, "Cannot list descendants", "server", rec.Name, "pid", rec.PID)
	}
	known := map[int]bool{rec.PID: true}
	for _, p := range pids {
		known[p] = true
	}
	var out []*member
	for _, pid := range pids {
		if pinned[pid] {
			continue
		}
		h, id, ok := pinLive(pid, rec.StartTime)
		if !ok {
			continue
		}
		var how string
		switch {
		case rec.PGID > 1 && id.PGID == rec.PGID:
			how = fmt.Sprintf("member of process group %d", rec.PGID)
		case known[id.PPID]:
			how = fmt.Sprintf("descendant of pid %d (parent %d, own group %d)", rec.PID, id.PPID, id.PGID)
		default:
			_ = h.Close()
			continue
		}
		pinned[pid] = true
		ev := fmt.Sprintf("pid %d, start time %d, %s, pinned by %s; server %s", pid, id.StartTime, how, h.Mode(), leader.evidence)
		out = append(out, &member{h: h, id: id, evidence: ev})
	}
	return out
}

// sessionExtras pins, from one process-table scan shared with every stop
// running at the same time, the processes of rec's server not pinned yet:
// those whose environment carries its instance token (a double-forked
// daemon that left the session) and, with group, the live members of its
// process group (the leader held until its exit). Each is re-checked
// through its pin: alive, not older than the server, of a uid procfleet
// may signal, and still carrying the token or still in the group. pinned
// gains the pids kept.
func (a *Actuator) sessionExtras(rec Record, pinned map[int]bool, group bool) []*member {
	if rec.Instance == "" && !group {
		return nil
	}
	table, err := procs.processes(rec.StartTime)
	if err != nil {
		a.Log.Error(err, "Cannot scan the processes", "server", rec.Name)
		return nil
	}
	var out []*member
	for _, e := range table {
		byToken := rec.Instance != "" && e.EnvFound && e.Env == rec.Instance
		byGroup := group && rec.PGID > 1 && e.PGID == rec.PGID
		if !byToken && !byGroup || pinned[e.PID] {
			continue
		}
		h, id, ok := pinLive(e.PID, rec.StartTime)
		if !ok {
			continue
		}
		if !mayKill(id.UID) {
			a.Log.Info("Process of the server runs as a uid procfleet may not signal: left alone", "server", rec.Name, "pid", e.PID, "uid", id.UID)
			_ = h.Close()
			continue
		}
		var hows []string
		if byGroup && id.PGID == rec.PGID {
			hows = append(hows, fmt.Sprintf("member of process group %d, found after its leader pid %d exited", rec.PGID, rec.PID))
		}
		if byToken && tokenOf(h, rec.Instance) == TokenOurs {
			hows = append(hows, "carries the instance token "+rec.Instance)
		}
		if len(hows) == 0 {
			_ = h.Close()
			continue
		}
		how := strings.Join(hows, ", ")
		pinned[e.PID] = true
		ev := fmt.Sprintf("pid %d, start time %d, %s (%s, uid %d), pinned by %s", e.PID, id.StartTime, how, observe.FormatCmdline(id.Cmdline), id.UID, h.Mode())
		out = append(out, &member{h: h, id: id, evidence: ev})
	}
	return out
}

// pinLive pins pid and reads its identity through the pin: false (and
// nothing held) when it is init or procfleet itself, has exited, or
// started before notBefore (a start time as in Identity; 0: any), which
// no process of a server started at notBefore can have.
func pinLive(pid int, notBefore uint64) (*observe.Handle, observe.Identity, bool) {
	if self, _ := selfIDs(); pid <= 1 || pid == self {
		return nil, observe.Identity{}, false
	}
	h, err := observe.Pin(pid)
	if err != nil {
		return nil, observe.Identity{}, false
	}
	id, err := h.Identity()
	if err != nil || id.State.Exited() || (notBefore != 0 && id.StartTime < notBefore) {
		_ = h.Close()
		return nil, observe.Identity{}, false
	}
	return h, id, true
}

func closeMembers(ms []*member) {
	for _, m := range ms {
		if !m.borrowed {
			_ = m.h.Close()
		}
	}
}

// terminate runs the signal sequence over a server's pinned processes in
// the session mode: the first may be the leader (pid == rec.PID); the group
// is signalled as a whole only while the leader is alive, else each pinned
// process is. With group, once the leader has exited, group members outside
// the pinned set are looked for, pinned and handled too.
func (a *Actuator) terminate(ctx context.Context, rec Record, ms []*member, grace, killTimeout time.Duration, group bool) error {
	extra := a.addStragglers(ctx, rec, ms, group)
	defer closeMembers(extra)
	ms = append(ms, extra...)
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		wait := grace
		if sig == syscall.SIGKILL {
			wait = killTimeout
		}
		deadline := time.Now().Add(wait)
		alive := liveMembers(ms)
		if len(alive) == 0 {
			return nil
		}
		if sig == syscall.SIGKILL {
			// Re-check identities before escalating: for a pidfd pin this
			// only confirms; for an unpinned one it catches a reused pid.
			alive = a.reverify(alive)
			if len(alive) == 0 {
				return nil
			}
		}
		if err := a.signalMembers(rec, alive, sig); err != nil {
			return err
		}
		waitMembers(ctx, alive, deadline)
		// The leader may have gone, leaving members it no longer reaches.
		more := a.addStragglers(ctx, rec, ms, group)
		if len(more) > 0 {
			defer closeMembers(more)
			ms = append(ms, more...)
			if !sentToGroupOf(rec, alive) {
				if err := a.signalMembers(rec, more, sig); err != nil {
					return err
				}
			}
			waitMembers(ctx, more, deadline)
		}
		if ctx.Err() != nil {
			return fmt.Errorf("stop server %s: %w", rec.Name, ctx.Err())
		}
	}
	alive := liveMembers(ms)
	if len(alive) == 0 {
		return nil
	}
	return a.unkillable(rec, alive)
}

// unkillable reports processes that outlived SIGKILL and the kill timeout.
func (a *Actuator) unkillable(rec Record, alive []*member) error {
	m := alive[0]
	state := m.id.State
	if id, err := observe.ReadIdentity(m.h.PID()); err == nil && id.StartTime == m.id.StartTime {
		state = id.State
	}
	var pids []string
	for _, x := range alive {
		pids = append(pids, fmt.Sprint(x.h.PID()))
	}
	q := &QuarantineError{Name: rec.Name, Reason: Unkillable, PID: m.h.PID(), PGID: rec.PGID, State: state,
		Message: fmt.Sprintf("failed to terminate even after SIGKILL (pid %s still alive)", strings.Join(pids, ", ")),
		Hint:    ManualStopHint(rec)}
	a.event(rec.Name, EventQuarantined, q.Error())
	return q
}

// sentToGroupOf reports whether the last signal went to the group: the
// live set held the leader, leading the group.
func sentToGroupOf(rec Record, alive []*member) bool {
	for _, m := range alive {
		if leadsGroup(rec, m) {
			return true
		}
	}
	return false
}

// leadsGroup reports whether m is the record's leader, leading its group.
func leadsGroup(rec Record, m *member) bool {
	return m.h.PID() == rec.PID && rec.PGID == rec.PID && m.id.PGID == rec.PGID
}

// addStragglers looks, with group and once the leader has exited, for live
// members of the server's process group that are not pinned yet (a member
// whose parent died, re-parented out of the tree). While the leader lives
// the group signal reaches them, and an empty group (kill(-pgid, 0) fails
// with ESRCH) needs no scan, so the scan runs only when something may be
// left.
func (a *Actuator) addStragglers(ctx context.Context, rec Record, ms []*member, group bool) []*member {
	if !group || rec.PGID <= 1 {
		return nil
	}
	pinned := map[int]bool{}
	for _, m := range ms {
		pinned[m.h.PID()] = true
		if m.h.PID() == rec.PID && !m.h.Exited() {
			return nil // the leader lives: the group signal reaches them
		}
	}
	if ch := a.ownChild(rec.PID); ch != nil {
		// Our reaper is about to take the leader's zombie out of the group.
		waitDone(ctx, ch.done, 100*time.Millisecond)
	}
	if !groupExists(rec.PGID) {
		return nil
	}
	return a.sessionExtras(rec, pinned, true)
}

func liveMembers(ms []*member) []*member {
	var out []*member
	for _, m := range ms {
		if !m.h.Exited() {
			out = append(out, m)
		}
	}
	return out
}

// reverify drops processes whose identity, read again through their pin,
// shows they exited or are no longer the process first seen.
func (a *Actuator) reverify(ms []*member) []*member {
	var out []*member
	for _, m := range ms {
		id, err := m.h.Identity()
		switch {
		case err == nil && id.StartTime == m.id.StartTime && !id.State.Exited():
			out = append(out, m)
		case err == nil || errors.Is(err, observe.ErrGone) || errors.Is(err, observe.ErrUntrusted):
			// exited, or (unpinned) another process now: not ours to signal
		case m.borrowed:
			out = append(out, m) // held: the pin proves it, /proc need not
		default:
			a.Log.Error(err, "Cannot re-check identity before SIGKILL; not signalling it", "pid", m.h.PID())
		}
	}
	return out
}

// signalMembers sends sig to the group while its pinned leader lives, and to
// each pinned process outside it (or to every pinned process once the leader
// has gone). A process the kernel does not let procfleet signal (another
// uid, and procfleet is not root) fails the stop, naming it.
func (a *Actuator) signalMembers(rec Record, alive []*member, sig syscall.Signal) error {
	groupSent := false
	var denied []string
	note := func(m *member, err error) {
		if errors.Is(err, syscall.EPERM) {
			denied = append(denied, fmt.Sprintf("pid %d (uid %d)", m.h.PID(), m.id.UID))
		}
	}
	for _, m := range alive {
		if leadsGroup(rec, m) {
			t := target{name: rec.Name, h: m.h, group: true, pgid: rec.PGID, evidence: m.evidence + ", group led by the pinned pid"}
			err := a.sendSignal(t, sig)
			groupSent = err == nil
			note(m, err)
		}
	}
	for _, m := range alive {
		if groupSent && m.id.PGID == rec.PGID {
			continue // the group signal reached it
		}
		note(m, a.sendSignal(target{name: rec.Name, h: m.h, evidence: m.evidence}, sig))
	}
	if len(denied) > 0 {
		return fmt.Errorf("stop server %s: the kernel does not let procfleet (uid %d) signal %s: %w; run procfleet as that user or as root",
			rec.Name, os.Geteuid(), strings.Join(denied, ", "), syscall.EPERM)
	}
	return nil
}

// waitMembers waits on the pins until all exited or the deadline passed.
func waitMembers(ctx context.Context, ms []*member, deadline time.Time) {
	wctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	for _, m := range ms {
		if m.h.Wait(wctx) != nil {
			return
		}
	}
}

// terminateCgroup stops every process of the server's cgroup at dir: each
// member pinned (checked to be in the cgroup through its pin) and sent
// SIGTERM, members that appear meanwhile too, until the cgroup is empty or
// the grace period ends; then cgroup.kill, and a wait of up to killTimeout
// for cgroup.events to say it is empty; then the empty cgroup is removed.
// leader, when set, is the pinned leader (its pin is not closed here).
func (a *Actuator) terminateCgroup(ctx context.Context, rec Record, dir string, leader *member, grace, killTimeout time.Duration) error {
	return a.terminateListed(ctx, rec, dir, leader, nil, grace, killTimeout)
}

// terminateListed is terminateCgroup with first, when set, the cgroup's
// members as the caller has just read them, taken as its first listing.
func (a *Actuator) terminateListed(ctx context.Context, rec Record, dir string, leader *member, first *[]int, grace, killTimeout time.Duration) error {
	pinned := map[int]*member{}
	var ms []*member
	if leader != nil {
		pinned[rec.PID] = leader
		ms = append(ms, leader)
	}
	var opened []*member
	defer func() { closeMembers(opened) }()
	// join pins the cgroup's members not pinned yet.
	join := func() (fresh []*member, listed int, err error) {
		var pids []int
		if first != nil {
			pids, first = *first, nil
		} else if pids, err = observe.CgroupProcs(dir); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil, 0, nil
			}
			return nil, 0, err
		}
		for _, pid := range pids {
			if pinned[pid] != nil {
				continue
			}
			h, id, ok := pinLive(pid, 0)
			if !ok {
				continue // exited meanwhile
			}
			if cg, err := h.Cgroup(); err != nil || !inCgroup(cg, rec.Cgroup) {
				_ = h.Close()
				continue
			}
			m := &member{h: h, id: id, evidence: fmt.Sprintf("pid %d, start time %d, in cgroup %s, which procfleet made for this server and which no process leaves by itself (%s, uid %d), pinned by %s",
				pid, id.StartTime, rec.Cgroup, observe.FormatCmdline(id.Cmdline), id.UID, h.Mode())}
			pinned[pid] = m
			opened = append(opened, m)
			fresh = append(fresh, m)
		}
		return fresh, len(pids), nil
	}
	fresh, _, err := join()
	if err != nil {
		return fmt.Errorf("stop server %s: %w", rec.Name, err)
	}
	ms = append(ms, fresh...)
	deadline := time.Now().Add(grace)
	toSignal := liveMembers(ms)
	for {
		for _, m := range toSignal {
			if err := a.sendSignal(target{name: rec.Name, h: m.h, evidence: m.evidence}, syscall.SIGTERM); errors.Is(err, syscall.EPERM) {
				return fmt.Errorf("stop server %s: the kernel does not let procfleet (uid %d) signal pid %d (uid %d): %w", rec.Name, os.Geteuid(), m.h.PID(), m.id.UID, err)
			}
		}
		waitMembers(ctx, liveMembers(ms), deadline)
		if ctx.Err() != nil {
			return fmt.Errorf("stop server %s: %w", rec.Name, ctx.Err())
		}
		if len(liveMembers(ms)) == 0 && removeEmptyCgroup(dir) {
			// The kernel removes only a cgroup without a process: the
			// server's was empty, and nothing can join it now.
			return nil
		}
		fresh, listed, err := join()
		if err != nil {
			return fmt.Errorf("stop server %s: %w", rec.Name, err)
		}
		ms = append(ms, fresh...)
		if listed == 0 || !time.Now().Before(deadline) {
			break
		}
		if len(fresh) == 0 {
			// Every pinned member has exited but the cgroup still lists
			// some (they leave it as they finish exiting): wait for it to
			// empty, up to the grace period; a process that appears
			// meanwhile gets cgroup.kill.
			wctx, cancel := context.WithDeadline(ctx, deadline)
			_ = observe.WaitCgroupEmpty(wctx, dir)
			cancel()
			break
		}
		toSignal = fresh
	}
	if populated, err := observe.CgroupPopulated(dir); err == nil && populated {
		ev := fmt.Sprintf("cgroup %s, which procfleet made for this server and which no process leaves by itself", rec.Cgroup)
		if leader != nil {
			ev += "; server " + leader.evidence
		}
		if err := a.sendSignal(target{name: rec.Name, cgroup: rec.Cgroup, cgroupDir: dir, evidence: ev}, syscall.SIGKILL); err != nil {
			return fmt.Errorf("stop server %s: cgroup.kill of %s: %w", rec.Name, rec.Cgroup, err)
		}
		wctx, cancel := context.WithTimeout(ctx, killTimeout)
		werr := observe.WaitCgroupEmpty(wctx, dir)
		cancel()
		if werr != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("stop server %s: %w", rec.Name, ctx.Err())
			}
			_, _, _ = join()
			var alive []*member
			if pids, err := observe.CgroupProcs(dir); err == nil {
				for _, pid := range pids {
					if m := pinned[pid]; m != nil {
						alive = append(alive, m)
					}
				}
			}
			if len(alive) == 0 {
				return fmt.Errorf("stop server %s: cgroup %s is not empty %s after cgroup.kill: %w", rec.Name, rec.Cgroup, formatSeconds(killTimeout), werr)
			}
			return a.unkillable(rec, alive)
		}
	}
	if err := removeCgroup(dir); err != nil {
		a.Log.Error(err, "Cannot remove the server's empty cgroup", "server", rec.Name)
	}
	return nil
}

// waitPortFree waits until nothing accepts TCP on port, up to
// PortReleaseTimeout.
func (a *Actuator) waitPortFree(ctx context.Context, name string, port int, ready func(context.Context) observe.ProbeResult) error {
	deadline := time.NewTimer(PortReleaseTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(portPollPeriod)
	defer tick.Stop()
	for {
		if portFree(ctx, port) {
			return nil
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return fmt.Errorf("stop server %s: wait for port %d: %w", name, port, ctx.Err())
		case <-deadline.C:
			msg := fmt.Sprintf("port %d still accepts connections %s after the server stopped", port, formatSeconds(PortReleaseTimeout))
			if h := observe.HolderOf(ctx, port); h != nil {
				msg += "; held by " + h.String()
			}
			if ready != nil {
				res := ready(ctx)
				if res.OK {
					msg += "; the listener answers the readiness probe"
				} else {
					msg += "; the listener does not answer the readiness probe (" + res.Message + ")"
				}
			}
			return fmt.Errorf("stop server %s: %s", name, msg)
		}
	}
}
