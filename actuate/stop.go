package actuate

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
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
}

// member is a pinned, verified process of a server's tree.
type member struct {
	h        *observe.Handle
	id       observe.Identity
	evidence string
}

// target is one signal destination: a pinned process, or the process group
// of a pinned, live leader.
type target struct {
	name     string
	h        *observe.Handle
	group    bool // the process group of h (h leads it)
	pgid     int
	evidence string
}

func (t target) String() string {
	if t.group {
		return fmt.Sprintf("process group %d", t.pgid)
	}
	return fmt.Sprintf("pid %d", t.h.PID())
}

// send delivers sig. A group signal goes through the leader's pidfd on Linux
// >= 6.9 (PIDFD_SIGNAL_PROCESS_GROUP), else killpg while the pinned leader
// is alive (a process group id cannot be reused while its leader lives).
func (t target) send(sig syscall.Signal) (how string, err error) {
	if t.group {
		return signalGroupOf(t.h, t.pgid, sig)
	}
	return "through its " + t.h.Mode().String() + " pin", t.h.Signal(sig)
}

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
		a.Log.Error(err, "signal failed", "server", t.name, "signal", signalName(sig), "target", t.String())
		return err
	}
	a.event(t.name, EventSignal, fmt.Sprintf("sent %s to %s %s; evidence: %s", signalName(sig), t, how, t.evidence))
	return nil
}

// Stop stops the server of a record. It pins and verifies the process
// (rules 1-6; a stale or reused record is removed and nothing is signalled;
// a quarantine returns *QuarantineError and keeps the record), collects the
// process tree (its group and its descendants, each pinned and checked),
// sends SIGTERM to the group and to descendants that left it, waits on the
// pins up to Grace, re-checks identities, sends SIGKILL likewise, waits up
// to KillTimeout, and returns *QuarantineError Unkillable if anything is
// still alive. A process that already exited is never signalled. It then
// removes the record (an error that says the process stopped when that
// fails), and waits up to 5 s for nothing to accept TCP on the port. Every
// error other than *QuarantineError begins "stop server <name>: ", so
// callers need not wrap it again.
func (a *Actuator) Stop(ctx context.Context, rec Record, opts StopOptions) error {
	name := rec.Name
	if q := refuseSelf(rec); q != nil {
		a.event(name, EventQuarantined, q.Message)
		return q
	}
	v := Verify(rec)
	switch v.Verdict {
	case VerdictStale, VerdictReused:
		if err := a.Dir.RemoveRecord(name); err != nil {
			return fmt.Errorf("stop server %s: %w", name, err)
		}
		a.event(name, EventRecordRemoved, "record removed, nothing signalled: "+v.Message)
		return nil
	case VerdictQuarantine:
		q := &QuarantineError{Name: name, Reason: v.Reason, PID: rec.PID, PGID: rec.PGID,
			State: v.Identity.State, Message: v.Message, Hint: ManualStopHint(rec)}
		a.event(name, EventQuarantined, q.Error())
		return q
	}
	leader := &member{h: v.Handle, id: v.Identity, evidence: v.Evidence}
	defer v.Handle.Close()
	if v.Handle.Mode() == observe.PinNone {
		a.Log.Info("process not pinned: signals use its pid after a check", "server", name, "pid", rec.PID)
	}
	members := a.collectTree(rec, leader)
	defer closeTargets(members)
	grace := durationOr(opts.Grace, DefaultGrace)
	killTimeout := durationOr(opts.KillTimeout, DefaultKillTimeout)
	if err := a.terminate(ctx, rec, append([]*member{leader}, members...), leader.evidence, grace, killTimeout); err != nil {
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
	a.event(name, EventStopped, fmt.Sprintf("pid %d stopped", rec.PID))
	return nil
}

// refuseSelf refuses records that would make procfleet signal itself, its own
// group, or init.
func refuseSelf(rec Record) *QuarantineError {
	self := os.Getpid()
	mine := ownPGID()
	if rec.PID > 1 && rec.PID != self && rec.PGID != 1 && (rec.PGID == 0 || rec.PGID != mine) {
		return nil
	}
	return &QuarantineError{Name: rec.Name, Reason: UnverifiedOwner, PID: rec.PID, PGID: rec.PGID,
		Message: fmt.Sprintf("refusing to signal pid %d / group %d: it is init or procfleet itself", rec.PID, rec.PGID),
		Hint:    ManualStopHint(rec)}
}

// collectTree lists the server's descendants (which finds a descendant that
// left the group with setsid or setpgid, while its parent chain still leads
// to the server), pins each and keeps those whose identity, read through the
// pin, shows them in the group or below a process of the tree, and not older
// than the server. Members of the group outside the tree are reached by the
// group signal while the leader lives, and looked for (addStragglers) once
// it has exited. leader may be nil when the server's process has exited.
func (a *Actuator) collectTree(rec Record, leader *member) []*member {
	seen := map[int]bool{rec.PID: true}
	pids, err := descendantsOf(rec.PID)
	if errors.Is(err, errNoChildrenFiles) {
		pids, err = observe.Descendants(rec.PID)
	}
	if err != nil {
		a.Log.Error(err, "cannot list descendants", "server", rec.Name, "pid", rec.PID)
	}
	known := map[int]bool{rec.PID: true}
	for _, p := range pids {
		known[p] = true
	}
	var out []*member
	for _, pid := range pids {
		if seen[pid] || pid <= 1 || pid == os.Getpid() {
			continue
		}
		seen[pid] = true
		h, err := observe.Pin(pid)
		if err != nil {
			continue
		}
		id, err := h.Identity()
		if err != nil || id.State.Exited() || (rec.StartTime != 0 && id.StartTime < rec.StartTime) {
			_ = h.Close()
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
		ev := fmt.Sprintf("pid %d, start time %d, %s, pinned by %s", pid, id.StartTime, how, h.Mode())
		if leader != nil {
			ev += "; server " + leader.evidence
		}
		out = append(out, &member{h: h, id: id, evidence: ev})
	}
	return out
}

func closeTargets(ms []*member) {
	for _, m := range ms {
		_ = m.h.Close()
	}
}

// terminate runs the signal sequence over a server's pinned processes: the
// first may be the leader (pid == rec.PID); the group is signalled as a
// whole only while the leader is alive, else each pinned process is. Once
// the leader has exited, group members outside the pinned tree are looked
// for, pinned and handled too.
func (a *Actuator) terminate(ctx context.Context, rec Record, ms []*member, leaderEvidence string, grace, killTimeout time.Duration) error {
	ms = a.addStragglers(ctx, rec, ms)
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
		a.signalMembers(rec, alive, leaderEvidence, sig)
		waitMembers(ctx, alive, deadline)
		// The leader may have gone, leaving members it no longer reaches.
		n := len(ms)
		ms = a.addStragglers(ctx, rec, ms)
		if extra := ms[n:]; len(extra) > 0 {
			if !sentToGroupOf(rec, alive) {
				a.signalMembers(rec, extra, leaderEvidence, sig)
			}
			waitMembers(ctx, extra, deadline)
		}
		if ctx.Err() != nil {
			return fmt.Errorf("stop server %s: %w", rec.Name, ctx.Err())
		}
	}
	alive := liveMembers(ms)
	if len(alive) == 0 {
		return nil
	}
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
		if m.h.PID() == rec.PID && rec.PGID == rec.PID && m.id.PGID == rec.PGID {
			return true
		}
	}
	return false
}

// addStragglers looks, once the leader has exited, for live members of the
// server's process group that are not pinned yet (a member whose parent
// died, re-parented out of the tree). While the leader lives the group
// signal reaches them, and an empty group (kill(-pgid, 0) fails with ESRCH)
// needs no /proc scan, so the scan runs only when something may be left.
func (a *Actuator) addStragglers(ctx context.Context, rec Record, ms []*member) []*member {
	if rec.PGID <= 1 {
		return ms
	}
	pinned := map[int]bool{}
	for _, m := range ms {
		pinned[m.h.PID()] = true
		if m.h.PID() == rec.PID && !m.h.Exited() {
			return ms // the leader lives: the group signal reaches them
		}
	}
	if ch := a.ownChild(rec.PID); ch != nil {
		// Our reaper is about to take the leader's zombie out of the group.
		waitDone(ctx, ch.done, 100*time.Millisecond)
	}
	if !groupExists(rec.PGID) {
		return ms
	}
	// One scan of the process table serves every stop waiting for one
	// (a fleet stopping at once), each from after its leader exited.
	pids, err := groups.members(rec.PGID)
	if err != nil {
		a.Log.Error(err, "cannot list process group", "server", rec.Name, "pgid", rec.PGID)
		return ms
	}
	for _, pid := range pids {
		if pinned[pid] || pid <= 1 || pid == os.Getpid() {
			continue
		}
		h, err := observe.Pin(pid)
		if err != nil {
			continue
		}
		id, err := h.Identity()
		if err != nil || id.State.Exited() || id.PGID != rec.PGID || (rec.StartTime != 0 && id.StartTime < rec.StartTime) {
			_ = h.Close()
			continue
		}
		ev := fmt.Sprintf("pid %d, start time %d, member of process group %d (found after its leader pid %d exited), pinned by %s",
			pid, id.StartTime, rec.PGID, rec.PID, h.Mode())
		ms = append(ms, &member{h: h, id: id, evidence: ev})
	}
	return ms
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
		default:
			a.Log.Error(err, "cannot re-check identity before SIGKILL; not signalling it", "pid", m.h.PID())
		}
	}
	return out
}

// signalMembers sends sig to the group while its pinned leader lives, and to
// each pinned process outside it (or to every pinned process once the leader
// has gone).
func (a *Actuator) signalMembers(rec Record, alive []*member, leaderEvidence string, sig syscall.Signal) {
	groupSent := false
	for _, m := range alive {
		if m.h.PID() == rec.PID && rec.PGID == rec.PID && m.id.PGID == rec.PGID {
			t := target{name: rec.Name, h: m.h, group: true, pgid: rec.PGID, evidence: leaderEvidence + ", group led by the pinned pid"}
			groupSent = a.sendSignal(t, sig) == nil
		}
	}
	for _, m := range alive {
		if groupSent && m.id.PGID == rec.PGID {
			continue // the group signal reached it
		}
		_ = a.sendSignal(target{name: rec.Name, h: m.h, evidence: m.evidence}, sig)
	}
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

// portHolderInfo describes who listens on a port.
type portHolderInfo struct {
	pids []int
	desc string
}

// portHolder reports whether something holds port, and who when visible.
func portHolder(ctx context.Context, port int) (portHolderInfo, bool) {
	ls, err := observe.Listeners(port)
	if err == nil && len(ls) > 0 {
		var info portHolderInfo
		var parts []string
		for _, l := range ls {
			switch {
			case len(l.PIDs) > 0:
				info.pids = append(info.pids, l.PIDs...)
				parts = append(parts, fmt.Sprintf("pid %d %s on %s", l.PIDs[0], quoteArgv(l.Cmdline), l.Addr))
			case !l.OwnerVisible:
				parts = append(parts, fmt.Sprintf("a process of uid %d not visible to this user, on %s", l.UID, l.Addr))
			default:
				parts = append(parts, fmt.Sprintf("a listener with no visible holder on %s", l.Addr))
			}
		}
		slices.Sort(info.pids)
		info.pids = slices.Compact(info.pids)
		info.desc = strings.Join(slices.Compact(parts), "; ")
		return info, true
	}
	if observe.PortAccepting(ctx, port) {
		return portHolderInfo{desc: "a listener whose holder cannot be seen"}, true
	}
	return portHolderInfo{}, false
}

// portFree reports whether nothing accepts TCP on port: no connect to
// loopback succeeds, and the kernel's socket tables show no listener on it
// (a connect that merely timed out on a loaded machine proves nothing).
func portFree(ctx context.Context, port int) bool {
	if observe.PortAccepting(ctx, port) {
		return false
	}
	ls, err := observe.Listeners(port)
	return err != nil || len(ls) == 0
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
			if h, busy := portHolder(ctx, port); busy {
				msg += "; held by " + h.desc
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
