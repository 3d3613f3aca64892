package observe

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Pure parsers for cgroup v2 files and the kernel log; no build tags, so
// their tests run everywhere.

// parseMountinfoCgroup2 finds the first cgroup2 mount in
// /proc/self/mountinfo and returns its mount point and the root of the
// hierarchy it shows (not "/" for a bind mount of a subtree, as in
// containers). Lines look like
//
//	40 30 0:37 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
//
// with optional fields before the "-" and octal escapes (\040) in paths.
func parseMountinfoCgroup2(b []byte) (mount, root string, ok bool) {
	for _, line := range strings.Split(string(b), "\n") {
		pre, post, found := strings.Cut(line, " - ")
		if !found {
			continue
		}
		if fs := strings.Fields(post); len(fs) == 0 || fs[0] != "cgroup2" {
			continue
		}
		f := strings.Fields(pre)
		if len(f) < 5 {
			continue
		}
		return unescapeMountinfo(f[4]), unescapeMountinfo(f[3]), true
	}
	return "", "", false
}

// unescapeMountinfo undoes the kernel's octal escapes (\040 space, \011
// tab, \012 newline, \134 backslash).
func unescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// parseProcCgroupV2 returns the cgroup v2 path from /proc/PID/cgroup (its
// "0::/path" line). false: the process is in no v2 hierarchy (a v1-only
// system).
func parseProcCgroupV2(b []byte) (string, bool) {
	for _, line := range strings.Split(string(b), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok && strings.HasPrefix(p, "/") {
			return p, true
		}
	}
	return "", false
}

// parseKeyedCounter reads "key value" lines (cgroup.events,
// memory.events) and returns the value of key.
func parseKeyedCounter(b []byte, key string) (uint64, bool) {
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, " ")
		if !ok || k != key {
			continue
		}
		n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
		return n, err == nil
	}
	return 0, false
}

// parsePIDList parses cgroup.procs: one pid a line.
func parsePIDList(b []byte) ([]int, error) {
	var out []int
	for _, f := range strings.Fields(string(b)) {
		n, err := strconv.Atoi(f)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("parse pid list: bad pid %q", f)
		}
		out = append(out, n)
	}
	return out, nil
}

// kmsgRecord is one record of /dev/kmsg.
type kmsgRecord struct {
	// Usec is the record's timestamp: microseconds of the kernel's local
	// clock since boot.
	Usec uint64
	Msg  string
}

// parseKmsg parses one record read from /dev/kmsg (each read returns one):
// "prio,seq,usec,flags[,...];message\n" followed by continuation lines
// that start with a space.
func parseKmsg(b []byte) (kmsgRecord, error) {
	head, rest, ok := bytes.Cut(b, []byte{';'})
	if !ok {
		return kmsgRecord{}, errors.New("parse kmsg: no ';'")
	}
	f := bytes.Split(head, []byte{','})
	if len(f) < 3 {
		return kmsgRecord{}, fmt.Errorf("parse kmsg: %d header fields, want at least 3", len(f))
	}
	usec, err := strconv.ParseUint(string(f[2]), 10, 64)
	if err != nil {
		return kmsgRecord{}, fmt.Errorf("parse kmsg: timestamp: %w", err)
	}
	msg, _, _ := bytes.Cut(rest, []byte{'\n'})
	return kmsgRecord{Usec: usec, Msg: string(msg)}, nil
}

// oomMarker precedes the killed pid in the OOM killer's report line.
const oomMarker = "Killed process "

// oomKilledPID reads the pid out of the OOM killer's report line, as
// mm/oom_kill.c prints it: "Out of memory: Killed process 1234 (name) ..."
// or "Memory cgroup out of memory: Killed process 1234 (name) ...".
func oomKilledPID(msg string) (int, bool) {
	i := strings.Index(msg, oomMarker)
	if i < 0 || !strings.Contains(msg[:i], "out of memory") && !strings.Contains(msg[:i], "Out of memory") {
		return 0, false
	}
	rest := msg[i+len(oomMarker):]
	num, after, ok := strings.Cut(rest, " ")
	if !ok || !strings.HasPrefix(after, "(") {
		return 0, false
	}
	pid, err := strconv.Atoi(num)
	if err != nil || pid <= 0 {
		return 0, false
	}
	return pid, true
}
