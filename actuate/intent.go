package actuate

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"time"

	"github.com/procfleet/procfleet/observe"
)

// IntentResolution is what ResolveIntent found for an intent record.
type IntentResolution struct {
	// Adopted: a live process carries the record's token as the server's
	// leader (its own session and group). Record is the full record now
	// written for it, and Verification (VerdictOwned) holds its pin, which
	// the caller closes.
	Adopted      bool
	Record       Record
	Verification Verification
	// Stopped lists processes that carried the token with no leader among
	// them (what a start left when its leader died); they were stopped,
	// and the intent record removed.
	Stopped []int
}

// ResolveIntent resolves an intent record (rule 8: a crash between the
// intent record and the full one). It looks for the live processes of the
// instance: the members of the record's cgroup, or (session) the processes
// whose environment carries its token (one process-table scan), each
// pinned and checked through the pin, and of a uid procfleet may signal
// (its own; any as root).
//
//   - One of them leads its own session and group (the spawned process; the
//     oldest such, should a daemon have made a session too): it is adopted.
//     A full record is written from its identity read through the pin, with
//     an Adopted event, and returned with its pin.
//   - Some, but no leader: the leader died; they are stopped as Cleanup
//     stops leftovers, and the intent record is removed.
//   - None: the intent record is removed (and its empty cgroup).
//
// A process whose token was wiped (a retitling program) and that has no
// cgroup cannot be found; the port gate of the next start names it if it
// holds the port.
func (a *Actuator) ResolveIntent(ctx context.Context, rec Record, opts StopOptions) (IntentResolution, error) {
	var res IntentResolution
	if !rec.Intent() {
		return res, fmt.Errorf("resolve intent record of server %s: not an intent record (pid %d)", rec.Name, rec.PID)
	}
	cands, cgDir, err := a.instanceProcesses(rec)
	if err != nil {
		return res, fmt.Errorf("resolve intent record of server %s: %w", rec.Name, err)
	}
	var leader *member
	for _, m := range cands {
		id := m.id
		if id.PGID == id.PID && (id.SID == id.PID || id.SID == 0) && (leader == nil || id.StartTime < leader.id.StartTime) {
			leader = m
		}
	}
	if leader != nil {
		for _, m := range cands {
			if m != leader {
				_ = m.h.Close()
			}
		}
		return a.adopt(rec, leader)
	}
	grace, killTimeout := opts.durations()
	if len(cands) > 0 {
		for _, m := range cands {
			res.Stopped = append(res.Stopped, m.h.PID())
		}
		var err error
		if cgDir != "" {
			closeMembers(cands)
			err = a.terminateCgroup(ctx, rec, cgDir, nil, grace, killTimeout)
		} else {
			err = a.terminate(ctx, rec, cands, grace, killTimeout, false)
			closeMembers(cands)
		}
		if err != nil {
			return res, err
		}
	} else if cgDir != "" {
		_ = removeCgroup(cgDir)
	}
	if err := a.Dir.RemoveRecord(rec.Name); err != nil {
		return res, fmt.Errorf("resolve intent record of server %s: %w", rec.Name, err)
	}
	msg := "intent record removed: no live process carries its instance token " + rec.Instance
	if len(res.Stopped) > 0 {
		msg = fmt.Sprintf("intent record removed: its leader is gone; pids %v carried its instance token and were stopped", res.Stopped)
	}
	a.event(rec.Name, EventRecordRemoved, msg)
	return res, nil
}

// instanceProcesses pins the live processes of an intent record's
// instance: its cgroup's members, or the carriers of its token. cgDir is
// the cgroup's folder when the record names one that exists.
func (a *Actuator) instanceProcesses(rec Record) (ms []*member, cgDir string, err error) {
	var pids []int
	how := ""
	if rec.Cgroup != "" {
		dir, err := cgroupDir(rec.Cgroup)
		if err != nil {
			return nil, "", fmt.Errorf("find cgroup %s: %w", rec.Cgroup, err)
		}
		pids, err = observe.CgroupProcs(dir)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, "", nil
		}
		if err != nil {
			return nil, "", err
		}
		cgDir, how = dir, "in cgroup "+rec.Cgroup+", which procfleet made for this instance"
	} else {
		table, err := procs.processes(0)
		if err != nil {
			return nil, "", err
		}
		for _, e := range table {
			if e.EnvFound && e.Env == rec.Instance {
				pids = append(pids, e.PID)
			}
		}
		how = "carries the instance token " + rec.Instance
	}
	for _, pid := range pids {
		h, id, ok := pinLive(pid, 0)
		if !ok {
			continue
		}
		ok = mayKill(id.UID)
		if ok && cgDir != "" {
			cg, cerr := h.Cgroup()
			ok = cerr == nil && inCgroup(cg, rec.Cgroup)
		} else if ok {
			ok = tokenOf(h, rec.Instance) == TokenOurs
		}
		if !ok {
			_ = h.Close()
			continue
		}
		ms = append(ms, &member{h: h, id: id, evidence: fmt.Sprintf("pid %d, start time %d, %s (%s, uid %d), pinned by %s",
			pid, id.StartTime, how, observe.FormatCmdline(id.Cmdline), id.UID, h.Mode())})
	}
	return ms, cgDir, nil
}

// adopt writes the full record for the leader of an intent record's
// instance.
func (a *Actuator) adopt(intent Record, m *member) (IntentResolution, error) {
	boot, err := observe.BootID()
	if err != nil {
		_ = m.h.Close()
		return IntentResolution{}, fmt.Errorf("resolve intent record of server %s: %w", intent.Name, err)
	}
	inode, _ := m.h.PidfdInode()
	rec := intent
	if rec.StartedAt.IsZero() {
		// Prepared before its spawn (PrepareNext): the adoption is the
		// first moment known to follow the start.
		rec.StartedAt = a.now().UTC().Truncate(time.Second)
	}
	rec.PID, rec.PGID, rec.StartTime, rec.BootID, rec.UID = m.id.PID, m.id.PID, m.id.StartTime, boot, m.id.UID
	rec.Cmdline, rec.SpawnCmdline, rec.PidfdInode = slices.Clone(m.id.Cmdline), slices.Clone(m.id.Cmdline), inode
	if err := a.Dir.WriteRecord(rec); err != nil {
		_ = m.h.Close()
		return IntentResolution{}, fmt.Errorf("resolve intent record of server %s: %w", intent.Name, err)
	}
	a.event(intent.Name, EventAdopted, fmt.Sprintf("adopted pid %d, left by a start interrupted before its record: %s", m.id.PID, m.evidence))
	v := Verification{Verdict: VerdictOwned, Identity: m.id, Handle: m.h, Message: fmt.Sprintf("pid %d is this server", m.id.PID),
		Evidence: m.evidence}
	return IntentResolution{Adopted: true, Record: rec, Verification: v}, nil
}

// stopIntent is Stop of an intent record: the instance is resolved, and
// an adopted leader stopped with everything of its server.
func (a *Actuator) stopIntent(ctx context.Context, rec Record, opts StopOptions) error {
	res, err := a.ResolveIntent(ctx, rec, opts)
	if err != nil || !res.Adopted {
		return err
	}
	defer res.Verification.Handle.Close()
	opts.Held = res.Verification.Handle
	return a.Stop(ctx, res.Record, opts)
}
