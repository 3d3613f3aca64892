package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
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

// listeningPorts returns every local TCP port in LISTEN state (v4 and v6).
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
