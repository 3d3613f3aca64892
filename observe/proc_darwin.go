package observe

// macOS code is compile-checked only (GOOS=darwin go build / go vet); no
// macOS machine was available to run it.

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// p_stat values from <sys/proc.h>; x/sys does not export them.
const (
	darwinSIDL   = 1
	darwinSRUN   = 2
	darwinSSLEEP = 3
	darwinSSTOP  = 4
	darwinSZOMB  = 5
)

var bootID = sync.OnceValues(func() (string, error) {
	if id, err := unix.Sysctl("kern.bootsessionuuid"); err == nil && strings.TrimSpace(id) != "" {
		return strings.TrimSpace(id), nil
	}
	tv, err := unix.SysctlTimeval("kern.boottime")
	if err != nil {
		return "", fmt.Errorf("read boot id: %w", err)
	}
	return "boottime-" + strconv.FormatInt(int64(tv.Sec), 10) + "." + strconv.FormatInt(int64(tv.Usec), 10), nil
})

// BootID returns kern.bootsessionuuid (or, where missing, a value made from
// kern.boottime), read once and cached.
func BootID() (string, error) { return bootID() }

// kinfo reads kern.proc.pid; EIO (an empty record) means no such process.
func kinfo(pid int) (*unix.KinfoProc, error) {
	kp, err := unix.SysctlKinfoProc("kern.proc.pid", pid)
	if errors.Is(err, unix.EIO) || errors.Is(err, unix.ESRCH) || (err == nil && int(kp.Proc.P_pid) != pid) {
		return nil, fmt.Errorf("sysctl kern.proc.pid %d: %w", pid, ErrGone)
	}
	if err != nil {
		return nil, fmt.Errorf("sysctl kern.proc.pid %d: %w", pid, err)
	}
	return kp, nil
}

func darwinState(s int8) State {
	switch s {
	case darwinSIDL, darwinSRUN:
		return StateRunning
	case darwinSSLEEP:
		return StateSleeping
	case darwinSSTOP:
		return StateStopped
	case darwinSZOMB:
		return StateZombie
	}
	return StateUnknown
}

func kinfoStat(kp *unix.KinfoProc) procStat {
	comm := kp.Proc.P_comm[:]
	if i := strings.IndexByte(string(comm), 0); i >= 0 {
		comm = comm[:i]
	}
	return procStat{
		PID:       int(kp.Proc.P_pid),
		PPID:      int(kp.Eproc.Ppid),
		PGID:      int(kp.Eproc.Pgid),
		State:     darwinState(kp.Proc.P_stat),
		StartTime: uint64(kp.Proc.P_starttime.Sec)*1e6 + uint64(kp.Proc.P_starttime.Usec),
		Comm:      string(comm),
	}
}

func startTimeOf(pid int) (uint64, error) {
	kp, err := kinfo(pid)
	if err != nil {
		return 0, err
	}
	return kinfoStat(kp).StartTime, nil
}

// ReadIdentity reads kern.proc.pid and kern.procargs2. Cmdline is nil for
// zombies and for processes whose arguments this user may not read (the
// kernel answers EINVAL for both). SID is not available and left 0.
func ReadIdentity(pid int) (Identity, error) {
	if pid <= 0 {
		return Identity{}, fmt.Errorf("read identity of pid %d: %w", pid, ErrGone)
	}
	kp, err := kinfo(pid)
	if err != nil {
		return Identity{}, fmt.Errorf("read identity: %w", err)
	}
	st := kinfoStat(kp)
	id := Identity{
		PID: st.PID, PPID: st.PPID, PGID: st.PGID, UID: int(kp.Eproc.Pcred.P_ruid),
		State: st.State, StartTime: st.StartTime, Comm: st.Comm,
	}
	if id.BootID, err = BootID(); err != nil {
		return Identity{}, fmt.Errorf("read identity of pid %d: %w", pid, err)
	}
	if st.State != StateZombie {
		if raw, err := unix.SysctlRaw("kern.procargs2", pid); err == nil {
			if args, perr := parseProcArgs2(raw); perr == nil {
				id.Cmdline = args
			}
		}
	}
	return id, nil
}

// CheckLiveness asks kill(pid, 0) first, then kern.proc.pid: a zombie is
// gone; a state that cannot be read is unknown, never gone.
func CheckLiveness(pid int) Liveness {
	if l, decided := signalZero(pid); decided {
		return l
	}
	kp, err := kinfo(pid)
	switch {
	case errors.Is(err, ErrGone):
		if kerr := unix.Kill(pid, 0); errors.Is(kerr, unix.ESRCH) {
			return LivenessGone
		}
		return LivenessUnknown
	case err != nil:
		return LivenessUnknown
	case darwinState(kp.Proc.P_stat).Exited():
		return LivenessGone
	}
	return LivenessAlive
}

func allProcs() ([]procStat, error) {
	kps, err := unix.SysctlKinfoProcSlice("kern.proc.all")
	if err != nil {
		return nil, fmt.Errorf("sysctl kern.proc.all: %w", err)
	}
	out := make([]procStat, 0, len(kps))
	for i := range kps {
		out = append(out, kinfoStat(&kps[i]))
	}
	return out, nil
}

// GroupMembers returns the live (not zombie) pids in process group pgid,
// from kern.proc.all.
func GroupMembers(pgid int) ([]int, error) {
	if pgid <= 0 {
		return nil, fmt.Errorf("list group %d: invalid process group", pgid)
	}
	procs, err := allProcs()
	if err != nil {
		return nil, fmt.Errorf("list group %d: %w", pgid, err)
	}
	var pids []int
	for _, p := range procs {
		if p.PGID == pgid && !p.State.Exited() {
			pids = append(pids, p.PID)
		}
	}
	return pids, nil
}

// ProcessGroups returns the live (not zombie) pids of every process group,
// keyed by group, from one kern.proc.all.
func ProcessGroups() (map[int][]int, error) {
	procs, err := allProcs()
	if err != nil {
		return nil, fmt.Errorf("list process groups: %w", err)
	}
	groups := make(map[int][]int)
	for _, p := range procs {
		if !p.State.Exited() {
			groups[p.PGID] = append(groups[p.PGID], p.PID)
		}
	}
	return groups, nil
}

// Descendants returns the live descendants of pid by parent chain, from
// kern.proc.all.
func Descendants(pid int) ([]int, error) {
	if pid <= 0 {
		return nil, fmt.Errorf("list descendants of %d: invalid pid", pid)
	}
	procs, err := allProcs()
	if err != nil {
		return nil, fmt.Errorf("list descendants of %d: %w", pid, err)
	}
	return descendantsOf(pid, procs), nil
}

// environOf returns the environment strings of pid from KERN_PROCARGS2
// (what ps eww shows), in the form of Linux's /proc/PID/environ. The
// kernel answers only for the same user or root, and gives EINVAL both for
// a zombie and when access is denied.
func environOf(pid int) ([]byte, error) {
	raw, err := unix.SysctlRaw("kern.procargs2", pid)
	if err != nil {
		if CheckLiveness(pid) == LivenessGone {
			return nil, fmt.Errorf("read environment of pid %d: %w", pid, ErrGone)
		}
		return nil, fmt.Errorf("read environment of pid %d: %w", pid, err)
	}
	return parseProcArgs2Env(raw)
}

// ScanProcesses lists every live (not zombie) process from kern.proc.all,
// with the value of opts.EnvKey from the environment of those that started
// at or after opts.EnvSince, where it can be read (KERN_PROCARGS2). SID is
// not available and left 0.
func ScanProcesses(opts ScanOptions) ([]ProcEntry, error) {
	procs, err := allProcs()
	if err != nil {
		return nil, fmt.Errorf("scan processes: %w", err)
	}
	var out []ProcEntry
	for _, st := range procs {
		if st.State.Exited() {
			continue
		}
		e := ProcEntry{PID: st.PID, PPID: st.PPID, PGID: st.PGID, State: st.State, StartTime: st.StartTime, UID: -1}
		if opts.EnvKey != "" && st.StartTime >= opts.EnvSince && st.PID > 0 {
			if b, err := environOf(st.PID); err == nil {
				e.Env, e.EnvFound = environValue(b, opts.EnvKey)
			}
		}
		if opts.Details && st.PID > 0 {
			if id, err := ReadIdentity(st.PID); err == nil {
				e.Cmdline, e.UID = id.Cmdline, id.UID
			}
		}
		out = append(out, e)
	}
	return out, nil
}
