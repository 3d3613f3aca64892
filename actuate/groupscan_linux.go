package actuate

import (
	"bytes"
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// scanGroups reads /proc/PID/stat of every process once and returns the
// live (not zombie or dead) pids of each process group. Processes that
// vanish during the scan are skipped.
func scanGroups() (map[int][]int, error) {
	d, err := os.Open("/proc")
	if err != nil {
		return nil, fmt.Errorf("scan process groups: %w", err)
	}
	names, err := d.Readdirnames(-1)
	_ = d.Close()
	if err != nil {
		return nil, fmt.Errorf("scan process groups: %w", err)
	}
	out := make(map[int][]int, len(names))
	buf := make([]byte, 1024)
	for _, name := range names {
		if name == "" || name[0] < '1' || name[0] > '9' {
			continue
		}
		pid, err := strconv.Atoi(name)
		if err != nil {
			continue
		}
		n, ok := readStatInto("/proc/"+name+"/stat", buf)
		if !ok {
			continue
		}
		pgid, live, ok := parseStatGroup(buf[:n])
		if ok && live {
			out[pgid] = append(out[pgid], pid)
		}
	}
	return out, nil
}

// readStatInto reads a stat file into buf (one read: a stat line is far
// shorter than buf; a longer one is cut, which parseStatGroup tolerates as
// long as the fields it needs are in).
func readStatInto(path string, buf []byte) (int, bool) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0, false
	}
	defer unix.Close(fd)
	for {
		n, err := unix.Read(fd, buf)
		if err == unix.EINTR {
			continue
		}
		return n, err == nil && n > 0
	}
}

// parseStatGroup reads the state and process group of a /proc/PID/stat
// line: "pid (comm) state ppid pgrp ...", where comm may hold spaces and
// parentheses (so the fields start after the last ')'). live is false for a
// zombie or dead process.
func parseStatGroup(b []byte) (pgid int, live, ok bool) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, false, false
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 3 || len(f[0]) != 1 {
		return 0, false, false
	}
	pgid, err := strconv.Atoi(string(f[2]))
	if err != nil {
		return 0, false, false
	}
	switch f[0][0] {
	case 'Z', 'X', 'x':
		return pgid, false, true
	}
	return pgid, true, true
}
