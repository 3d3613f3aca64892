package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/procfleet/procfleet/observe"
)

// userHZ is the unit of utime and stime in /proc/PID/stat (USER_HZ, 100 on
// every Linux the bench targets).
const userHZ = 100

// cpuUsage is the CPU a process has used: utime+stime (10 ms resolution,
// counts exited threads) and the sum of its live threads' schedstat run time
// (nanosecond resolution).
type cpuUsage struct {
	Ticks time.Duration
	Sched time.Duration
}

func readCPU(pid int) (cpuUsage, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return cpuUsage{}, fmt.Errorf("read cpu of pid %d: %w", pid, err)
	}
	st, err := parseStat(data)
	if err != nil {
		return cpuUsage{}, fmt.Errorf("read cpu of pid %d: %w", pid, err)
	}
	u := cpuUsage{Ticks: time.Duration(st.UTime+st.STime) * time.Second / userHZ}
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
	if err != nil {
		return cpuUsage{}, fmt.Errorf("read cpu of pid %d: %w", pid, err)
	}
	for _, t := range tasks {
		data, err := os.ReadFile(t)
		if err != nil {
			continue // thread exited between glob and read
		}
		ns, err := parseSchedstat(data)
		if err != nil {
			return cpuUsage{}, fmt.Errorf("read cpu of pid %d: %w", pid, err)
		}
		u.Sched += time.Duration(ns)
	}
	return u, nil
}

// readRSS reads the resident memory of pid.
func readRSS(pid int) (memOf, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return memOf{}, fmt.Errorf("read rss of pid %d: %w", pid, err)
	}
	var m memOf
	for _, f := range []struct {
		key string
		to  *uint64
	}{{"VmHWM", &m.Peak}, {"VmRSS", &m.Now}, {"RssFile", &m.File}} {
		kb, err := parseStatusKB(data, f.key)
		if err != nil {
			return memOf{}, fmt.Errorf("read rss of pid %d: %w", pid, err)
		}
		*f.to = kb * 1024
	}
	return m, nil
}

// processGone reports whether pid no longer runs: no such process, or a
// zombie or dead one.
func processGone(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return true
	}
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return errors.Is(err, os.ErrNotExist)
	}
	st, err := parseStat(data)
	if err != nil {
		return false
	}
	return st.State == 'Z' || st.State == 'X'
}

// readCmdline returns the argv of pid.
func readCmdline(pid int) ([]string, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return nil, fmt.Errorf("read cmdline of pid %d: %w", pid, err)
	}
	return strings.Split(strings.TrimRight(string(data), "\x00"), "\x00"), nil
}

// listeningOf reports which of ports have a TCP listener, IPv4 or IPv6.
// The kernel filters a sock_diag dump to those ports: 0.6 ms of CPU per
// call for 1,000 listeners on the 2-CPU VM of issue 17, against 3.3 ms to
// read /proc/net/tcp and tcp6 whole, so the bench's sweeps take little of
// the CPU that the servers and the supervisor under test share. Where
// sock_diag is missing it reads procfs.
func listeningOf(ports []int) (map[int]bool, error) {
	ls, err := observe.ListeningOn(ports, nil)
	if errors.Is(err, observe.ErrNotSupported) {
		return listeningPorts()
	}
	if err != nil {
		return nil, fmt.Errorf("list listeners on %d ports: %w", len(ports), err)
	}
	out := make(map[int]bool, len(ls))
	for _, l := range ls {
		out[int(l.Addr.Port())] = true
	}
	return out, nil
}

// pinnedSet is a set of processes pinned with pidfds: one poll(2) asks all
// of them whether they exited, and a pid reused after an exit is never
// taken for the process it pinned. A process pidfd_open could not pin
// (no pidfd) is asked through processGone.
type pinnedSet struct {
	fds      []unix.PollFd
	unpinned []int
}

// pinAll pins pids; those already gone are left out.
func pinAll(pids []int) *pinnedSet {
	s := &pinnedSet{}
	for _, pid := range pids {
		fd, err := unix.PidfdOpen(pid, 0)
		switch {
		case err == nil:
			s.fds = append(s.fds, unix.PollFd{Fd: int32(fd), Events: unix.POLLIN})
		case errors.Is(err, unix.ESRCH):
		default:
			s.unpinned = append(s.unpinned, pid)
		}
	}
	return s
}

// alive drops the processes that exited (zombies count as exited) and
// returns how many still run.
func (s *pinnedSet) alive() (int, error) {
	if len(s.fds) > 0 {
		for {
			_, err := unix.Poll(s.fds, 0)
			if err == nil {
				break
			}
			if !errors.Is(err, unix.EINTR) {
				return 0, fmt.Errorf("poll %d pidfds: %w", len(s.fds), err)
			}
		}
		s.fds = slices.DeleteFunc(s.fds, func(p unix.PollFd) bool {
			if p.Revents == 0 {
				return false
			}
			_ = unix.Close(int(p.Fd))
			return true
		})
	}
	s.unpinned = slices.DeleteFunc(s.unpinned, processGone)
	return len(s.fds) + len(s.unpinned), nil
}

// close releases the pidfds still held.
func (s *pinnedSet) close() {
	for _, p := range s.fds {
		_ = unix.Close(int(p.Fd))
	}
	s.fds = nil
}

// listeningPorts returns every local TCP port in LISTEN state (v4 and v6),
// read from procfs: the bench's own reading, independent of procfleet's
// observe package, where a verdict rests on it.
func listeningPorts() (map[int]bool, error) {
	ports := map[int]bool{}
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		data, err := os.ReadFile(f)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("list listening ports: %w", err)
		}
		if err := parseListenPorts(data, ports); err != nil {
			return nil, fmt.Errorf("list listening ports: %w", err)
		}
	}
	return ports, nil
}

// platformCheck reports whether the bench can run here.
func platformCheck() error { return nil }
