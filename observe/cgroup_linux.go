package observe

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"
)

// FindCgroup2 finds the cgroup v2 hierarchy in /proc/self/mountinfo (a
// mount of type cgroup2, wherever it is) and this process's place in it.
// The error wraps ErrNotSupported when there is no such mount, or this
// process is in no v2 cgroup.
func FindCgroup2() (Cgroup2, error) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return Cgroup2{}, fmt.Errorf("find cgroup v2: %w", err)
	}
	mount, root, ok := parseMountinfoCgroup2(b)
	if !ok {
		return Cgroup2{}, fmt.Errorf("find cgroup v2: no cgroup2 mount in /proc/self/mountinfo: %w", ErrNotSupported)
	}
	self, err := ProcessCgroup(os.Getpid())
	if err != nil {
		return Cgroup2{}, fmt.Errorf("find cgroup v2: %w", err)
	}
	return Cgroup2{Mount: mount, Root: root, Self: self}, nil
}

// ProcessCgroup returns the cgroup v2 path of pid (its "0::" line of
// /proc/PID/cgroup). The error wraps ErrGone when the process does not
// exist, and ErrNotSupported when it is in no v2 cgroup.
func ProcessCgroup(pid int) (string, error) {
	b, err := readProcFile(pid, "cgroup")
	if err != nil {
		return "", fmt.Errorf("read cgroup: %w", err)
	}
	p, ok := parseProcCgroupV2(b)
	if !ok {
		return "", fmt.Errorf("read cgroup of pid %d: no cgroup v2 line: %w", pid, ErrNotSupported)
	}
	return p, nil
}

// Cgroup returns the cgroup v2 path of the pinned process, read through
// the pin: a read after the pinned process exited is ErrUntrusted.
func (h *Handle) Cgroup() (string, error) {
	if h.isClosed() {
		return "", fmt.Errorf("cgroup of pid %d: handle closed", h.pid)
	}
	p, err := ProcessCgroup(h.pid)
	if err != nil {
		if errors.Is(err, ErrGone) {
			return "", fmt.Errorf("cgroup of pid %d: %w: %w", h.pid, ErrUntrusted, err)
		}
		return "", err
	}
	if err := h.afterRead(); err != nil {
		return "", fmt.Errorf("cgroup of pid %d: %w", h.pid, err)
	}
	return p, nil
}

// CgroupProcs lists the processes in the cgroup whose folder is dir
// (cgroup.procs; zombies are not in it).
func CgroupProcs(dir string) ([]int, error) {
	b, err := readSmall(filepath.Join(dir, "cgroup.procs"), make([]byte, 0, 512))
	if err != nil {
		return nil, fmt.Errorf("list cgroup %s: %w", dir, err)
	}
	pids, err := parsePIDList(b)
	if err != nil {
		return nil, fmt.Errorf("list cgroup %s: %w", dir, err)
	}
	return pids, nil
}

// CgroupPopulated reports whether any process is left in the cgroup at
// dir or below it ("populated" of cgroup.events). A missing cgroup is an
// error wrapping fs.ErrNotExist.
func CgroupPopulated(dir string) (bool, error) {
	b, err := readSmall(filepath.Join(dir, "cgroup.events"), make([]byte, 0, 64))
	if err != nil {
		return false, fmt.Errorf("read cgroup %s: %w", dir, err)
	}
	n, ok := parseKeyedCounter(b, "populated")
	if !ok {
		return false, fmt.Errorf("read cgroup %s: no populated line in cgroup.events", dir)
	}
	return n != 0, nil
}

// CgroupOOMKills returns how many processes of the cgroup at dir the
// out-of-memory killer has killed ("oom_kill" of memory.events). false when
// the memory controller is not enabled for the cgroup (no memory.events).
func CgroupOOMKills(dir string) (uint64, bool) {
	b, err := readSmall(filepath.Join(dir, "memory.events"), make([]byte, 0, 256))
	if err != nil {
		return 0, false
	}
	return parseKeyedCounter(b, "oom_kill")
}

// cgroupPollMax bounds the wait between reads of cgroup.events when no
// inotify watch can be set (the kernel notifies cgroup.events changes as
// file modifications).
const cgroupPollMax = 100 * time.Millisecond

// WaitCgroupEmpty waits until the cgroup at dir holds no process
// (cgroup.events says "populated 0"), or ctx ends. It wakes on the
// kernel's notification of the change (inotify on cgroup.events), not by
// sleeping; where no watch can be set it reads the file with backoff from
// 1 ms to 100 ms. A cgroup that no longer exists is empty.
func WaitCgroupEmpty(ctx context.Context, dir string) error {
	events := filepath.Join(dir, "cgroup.events")
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err == nil {
		if _, werr := unix.InotifyAddWatch(fd, events, unix.IN_MODIFY); werr != nil {
			unix.Close(fd)
			fd, err = -1, werr
		}
	}
	if err != nil {
		return pollCgroupEmpty(ctx, dir)
	}
	f := os.NewFile(uintptr(fd), "inotify")
	defer f.Close()
	rc, err := f.SyscallConn()
	if err != nil {
		return pollCgroupEmpty(ctx, dir)
	}
	// A read that waits on the runtime poller ends when ctx does.
	stop := context.AfterFunc(ctx, func() { _ = f.SetReadDeadline(time.Unix(1, 0)) })
	defer stop()
	buf := make([]byte, 4096)
	for {
		// The watch is in place before this read: a change after it wakes
		// the read below.
		populated, err := CgroupPopulated(dir)
		if errors.Is(err, fs.ErrNotExist) || (err == nil && !populated) {
			return nil
		}
		if err != nil {
			return err
		}
		var rerr error
		err = rc.Read(func(fd uintptr) bool {
			_, rerr = unix.Read(int(fd), buf)
			return rerr != unix.EAGAIN
		})
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil {
			return fmt.Errorf("wait for cgroup %s to empty: %w", dir, err)
		}
		if rerr != nil && rerr != unix.EINTR {
			return fmt.Errorf("wait for cgroup %s to empty: read inotify: %w", dir, rerr)
		}
	}
}

func pollCgroupEmpty(ctx context.Context, dir string) error {
	d := time.Millisecond
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
		populated, err := CgroupPopulated(dir)
		if errors.Is(err, fs.ErrNotExist) || (err == nil && !populated) {
			return nil
		}
		if err != nil {
			return err
		}
		t.Reset(d)
		d = min(2*d, cgroupPollMax)
	}
}
