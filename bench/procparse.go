package main

import (
	"bufio"
	"bytes"
	"fmt"
	"strconv"
	"strings"
)

// procStat is the part of /proc/PID/stat the bench reads.
type procStat struct {
	State        byte
	PPID         int
	UTime, STime uint64 // clock ticks
}

// parseStat parses /proc/PID/stat. The command name (field 2) may hold
// spaces and parentheses, so fields are counted from the last ')'.
func parseStat(data []byte) (procStat, error) {
	i := bytes.LastIndexByte(data, ')')
	if i < 0 || i+2 > len(data) {
		return procStat{}, fmt.Errorf("parse stat: no command name in %q", data)
	}
	// After ")": field 3 (state) is rest[0].
	rest := strings.Fields(string(data[i+1:]))
	if len(rest) < 13 {
		return procStat{}, fmt.Errorf("parse stat: %d fields after the command name, want at least 13", len(rest))
	}
	if len(rest[0]) != 1 {
		return procStat{}, fmt.Errorf("parse stat: bad state %q", rest[0])
	}
	ppid, err := strconv.Atoi(rest[1])
	if err != nil {
		return procStat{}, fmt.Errorf("parse stat: ppid: %w", err)
	}
	// utime is field 14, stime field 15: rest[11], rest[12].
	ut, err := strconv.ParseUint(rest[11], 10, 64)
	if err != nil {
		return procStat{}, fmt.Errorf("parse stat: utime: %w", err)
	}
	st, err := strconv.ParseUint(rest[12], 10, 64)
	if err != nil {
		return procStat{}, fmt.Errorf("parse stat: stime: %w", err)
	}
	return procStat{State: rest[0][0], PPID: ppid, UTime: ut, STime: st}, nil
}

// parseSchedstat returns the first field of /proc/PID/task/TID/schedstat:
// nanoseconds spent on the CPU.
func parseSchedstat(data []byte) (uint64, error) {
	f := strings.Fields(string(data))
	if len(f) == 0 {
		return 0, fmt.Errorf("parse schedstat: empty")
	}
	ns, err := strconv.ParseUint(f[0], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("parse schedstat: %w", err)
	}
	return ns, nil
}

// memOf is what /proc/PID/status says of a process's resident memory, in
// bytes: its peak (VmHWM), its current size (VmRSS), and the file-backed
// part of that (RssFile: for a Go supervisor, mostly its binary's pages).
type memOf struct{ Peak, Now, File uint64 }

// parseStatusKB returns the value in kB of a "Key:   N kB" line of
// /proc/PID/status.
func parseStatusKB(data []byte, key string) (uint64, error) {
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || k != key {
			continue
		}
		f := strings.Fields(v)
		if len(f) != 2 || f[1] != "kB" {
			return 0, fmt.Errorf("parse status: %s: want \"N kB\", got %q", key, v)
		}
		n, err := strconv.ParseUint(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("parse status: %s: %w", key, err)
		}
		return n, nil
	}
	return 0, fmt.Errorf("parse status: no %s line", key)
}

// parseListenPorts returns the local ports of LISTEN sockets (state 0A) in a
// /proc/net/tcp or /proc/net/tcp6 table.
func parseListenPorts(data []byte, into map[int]bool) error {
	sc := bufio.NewScanner(bytes.NewReader(data))
	first := true
	for sc.Scan() {
		if first { // header
			first = false
			continue
		}
		f := strings.Fields(sc.Text())
		if len(f) < 4 {
			continue
		}
		if f[3] != "0A" {
			continue
		}
		_, portHex, ok := strings.Cut(f[1], ":")
		if !ok {
			return fmt.Errorf("parse net/tcp: bad local address %q", f[1])
		}
		port, err := strconv.ParseUint(portHex, 16, 16)
		if err != nil {
			return fmt.Errorf("parse net/tcp: port %q: %w", portHex, err)
		}
		into[int(port)] = true
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("parse net/tcp: %w", err)
	}
	return nil
}

// parseBenchNsPerOp finds the ns/op figure of benchmark name in go test
// -bench output ("BenchmarkX-2   100   12345 ns/op ...").
func parseBenchNsPerOp(out []byte, name string) (float64, error) {
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 {
			continue
		}
		base, _, _ := strings.Cut(f[0], "-")
		if base != name {
			continue
		}
		for i := 2; i+1 < len(f); i++ {
			if f[i+1] == "ns/op" {
				v, err := strconv.ParseFloat(f[i], 64)
				if err != nil {
					return 0, fmt.Errorf("parse %s ns/op %q: %w", name, f[i], err)
				}
				return v, nil
			}
		}
	}
	return 0, fmt.Errorf("no ns/op line for %s in go test output", name)
}
