package observe

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

const bootIDPath = "/proc/sys/kernel/random/boot_id"

var bootID = sync.OnceValues(func() (string, error) {
	b, err := os.ReadFile(bootIDPath)
	if err != nil {
		return "", fmt.Errorf("read boot id: %w", err)
	}
	id := strings.TrimSpace(string(b))
	if id == "" {
		return "", fmt.Errorf("read boot id: %s is empty", bootIDPath)
	}
	return id, nil
})

// BootID returns the id of the current boot (read once and cached).
func BootID() (string, error) { return bootID() }

// readProcFile reads /proc/PID/name. A missing file is mapped to ErrGone
// when kill(pid, 0) confirms that the pid is gone; otherwise (hidepid, a
// thread id) the error stays a plain error, never ErrGone.
func readProcFile(pid int, name string) ([]byte, error) {
	return readProcFileInto(pid, name, make([]byte, 0, 2048))
}

// readProcFileInto is readProcFile reading into buf[:0]'s memory (grown
// when the file is larger).
func readProcFileInto(pid int, name string, buf []byte) ([]byte, error) {
	path := "/proc/" + strconv.Itoa(pid) + "/" + name
	b, err := readSmall(path, buf[:0])
	if err == nil {
		return b, nil
	}
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ESRCH) {
		if kerr := unix.Kill(pid, 0); errors.Is(kerr, unix.ESRCH) {
			return nil, fmt.Errorf("read %s: %w", path, ErrGone)
		}
	}
	return nil, fmt.Errorf("read %s: %w", path, err)
}

// procBufs are the buffers readStat and ReadIdentity read /proc files
// into: what they keep is parsed out (copied), so the buffer is reused, and
// a fleet's readiness or adoption (an identity each) allocates no 6 KB per
// server for files it drops at once.
var procBufs = sync.Pool{New: func() any { b := make([]byte, 0, 2048); return &b }}

// procBufMax is the largest buffer put back in procBufs (a huge command
// line's is dropped).
const procBufMax = 16 << 10

func getProcBuf() *[]byte { return procBufs.Get().(*[]byte) }

func putProcBuf(b *[]byte, grown []byte) {
	if cap(grown) <= procBufMax {
		*b = grown[:0]
		procBufs.Put(b)
	}
}

func readStat(pid int) (procStat, error) {
	buf := getProcBuf()
	b, err := readProcFileInto(pid, "stat", *buf)
	defer putProcBuf(buf, b)
	if err != nil {
		return procStat{}, err
	}
	st, err := parseStat(b)
	if err != nil {
		return procStat{}, fmt.Errorf("pid %d: %w", pid, err)
	}
	return st, nil
}

func startTimeOf(pid int) (uint64, error) {
	st, err := readStat(pid)
	return st.StartTime, err
}

// ReadIdentity reads the identity of pid from /proc without pinning it. The
// reads are not atomic: use Pin and Handle.Identity where it matters. The
// error wraps ErrGone when the process does not exist.
func ReadIdentity(pid int) (Identity, error) {
	if pid <= 0 {
		return Identity{}, fmt.Errorf("read identity of pid %d: %w", pid, ErrGone)
	}
	st, err := readStat(pid)
	if err != nil {
		return Identity{}, fmt.Errorf("read identity: %w", err)
	}
	id := Identity{
		PID: st.PID, PPID: st.PPID, PGID: st.PGID, SID: st.SID,
		State: st.State, StartTime: st.StartTime, Comm: st.Comm, UID: -1,
	}
	if id.BootID, err = BootID(); err != nil {
		return Identity{}, fmt.Errorf("read identity of pid %d: %w", pid, err)
	}
	buf := getProcBuf()
	b := *buf
	defer func() { putProcBuf(buf, b) }()
	if b, err = readProcFileInto(pid, "status", b); err != nil {
		return Identity{}, fmt.Errorf("read identity: %w", err)
	}
	if id.UID, err = parseStatusUID(b); err != nil {
		return Identity{}, fmt.Errorf("read identity of pid %d: %w", pid, err)
	}
	if b, err = readProcFileInto(pid, "cmdline", b); err != nil {
		return Identity{}, fmt.Errorf("read identity: %w", err)
	}
	id.Cmdline = parseCmdline(b) // copies
	return id, nil
}

// CheckLiveness asks kill(pid, 0) first (ESRCH: gone; 0 or EPERM: exists),
// then the state: a zombie or dead process is gone; a state that cannot be
// read (hidepid, races, permissions) is unknown, never gone.
func CheckLiveness(pid int) Liveness {
	if l, decided := signalZero(pid); decided {
		return l
	}
	st, err := readStat(pid)
	switch {
	case errors.Is(err, ErrGone):
		return LivenessGone
	case err != nil:
		return LivenessUnknown
	case st.State.Exited():
		return LivenessGone
	}
	return LivenessAlive
}

// eachPID calls fn with the pid and the /proc entry name of every process
// listed in /proc (one listing; a process may be gone by the time fn reads
// it).
func eachPID(fn func(pid int, name string)) error {
	d, err := os.Open("/proc")
	if err != nil {
		return err
	}
	names, err := d.Readdirnames(-1)
	_ = d.Close()
	if err != nil {
		return err
	}
	for _, name := range names {
		if name == "" || name[0] < '1' || name[0] > '9' {
			continue
		}
		if pid, err := strconv.Atoi(name); err == nil {
			fn(pid, name)
		}
	}
	return nil
}

// scanProcs calls fn with the parsed stat of every process in /proc.
// Processes that vanish during the scan are skipped.
func scanProcs(fn func(procStat)) error {
	buf := make([]byte, 0, 512)
	err := eachPID(func(pid int, name string) {
		var err error
		buf, err = readSmall("/proc/"+name+"/stat", buf[:0])
		if err != nil {
			return
		}
		st, err := parseStat(buf)
		if err != nil || st.PID != pid {
			return
		}
		fn(st)
	})
	if err != nil {
		return fmt.Errorf("scan processes: %w", err)
	}
	return nil
}

// readSmall reads a small file into buf with one open and few reads.
func readSmall(path string, buf []byte) ([]byte, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return buf, err
	}
	defer unix.Close(fd)
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := unix.Read(fd, buf[len(buf):cap(buf)])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return buf, err
		}
		if n == 0 {
			return buf, nil
		}
		buf = buf[:len(buf)+n]
	}
}

// GroupMembers returns the live (not zombie) pids whose process group is
// pgid, from a scan of /proc.
func GroupMembers(pgid int) ([]int, error) {
	if pgid <= 0 {
		return nil, fmt.Errorf("list group %d: invalid process group", pgid)
	}
	var pids []int
	err := scanProcs(func(st procStat) {
		if st.PGID == pgid && !st.State.Exited() {
			pids = append(pids, st.PID)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("list group %d: %w", pgid, err)
	}
	return pids, nil
}

// ProcessGroups returns the live (not zombie) pids of every process group,
// keyed by group, from one scan of /proc: for a caller that needs many
// groups at once, instead of a GroupMembers scan for each.
func ProcessGroups() (map[int][]int, error) {
	groups := make(map[int][]int)
	err := scanProcs(func(st procStat) {
		if !st.State.Exited() {
			groups[st.PGID] = append(groups[st.PGID], st.PID)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("list process groups: %w", err)
	}
	return groups, nil
}

// Descendants returns the live (not zombie) descendants of pid by parent
// chain, from one scan of /proc. It finds those that left the process group
// or session, but not those reparented to init or a subreaper.
func Descendants(pid int) ([]int, error) {
	if pid <= 0 {
		return nil, fmt.Errorf("list descendants of %d: invalid pid", pid)
	}
	var all []procStat
	err := scanProcs(func(st procStat) { all = append(all, st) })
	if err != nil {
		return nil, fmt.Errorf("list descendants of %d: %w", pid, err)
	}
	return descendantsOf(pid, all), nil
}

// environOf reads /proc/PID/environ: the environment block the process was
// given at its last execve (later setenv calls do not show). Reading it
// needs ptrace read access: the same uid and a dumpable process, or root.
func environOf(pid int) ([]byte, error) {
	return readProcFile(pid, "environ")
}

// ScanProcesses lists every live (not zombie) process from one scan of
// /proc, with the value of opts.EnvKey from the environment of those that
// started at or after opts.EnvSince, where it can be read. Processes that
// vanish during the scan are left out; kernel threads are listed without an
// environment.
func ScanProcesses(opts ScanOptions) ([]ProcEntry, error) {
	var out []ProcEntry
	err := scanProcs(func(st procStat) {
		if st.State.Exited() {
			return
		}
		e := ProcEntry{PID: st.PID, PPID: st.PPID, PGID: st.PGID, SID: st.SID, State: st.State, StartTime: st.StartTime, UID: -1}
		kthread := st.PID == 2 || st.PPID == 2
		if opts.EnvKey != "" && st.StartTime >= opts.EnvSince && !kthread {
			if b, err := environOf(st.PID); err == nil {
				e.Env, e.EnvFound = environValue(b, opts.EnvKey)
			}
		}
		if opts.Details && !kthread {
			if b, err := readProcFile(st.PID, "cmdline"); err == nil {
				e.Cmdline = parseCmdline(b)
			}
			if b, err := readProcFile(st.PID, "status"); err == nil {
				if uid, err := parseStatusUID(b); err == nil {
					e.UID = uid
				}
			}
		}
		out = append(out, e)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
