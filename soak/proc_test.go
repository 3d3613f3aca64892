//go:build soak && linux

package soak

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// proc is one process seen in /proc.
type proc struct {
	pid   int
	state byte
	start uint64
}

func (p proc) live() bool { return p.state != 'Z' && p.state != 'X' && p.state != 0 }

// argvKey is the map key of an argv: its elements joined by NUL, as
// /proc/PID/cmdline holds them (without the trailing NULs: a retitled
// process pads its title with them).
func argvKey(argv []string) string { return strings.Join(argv, "\x00") }

// scanProcs returns, for every argv key in want, the processes whose command
// line is exactly that argv. Zombies are included with their state; callers
// filter with live().
func scanProcs(want map[string]string) map[string][]proc {
	out := map[string][]proc{}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return out
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil || len(b) == 0 {
			continue
		}
		name, ok := want[string(bytes.TrimRight(b, "\x00"))]
		if !ok {
			continue
		}
		p, ok := readProc(pid)
		if !ok {
			continue
		}
		out[name] = append(out[name], p)
	}
	return out
}

// readProc reads a process's state and start time from /proc/PID/stat.
func readProc(pid int) (proc, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return proc{}, false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return proc{}, false
	}
	f := strings.Fields(string(b[i+2:]))
	// f[0] is field 3 (state); field 22 (starttime) is f[19].
	if len(f) < 20 {
		return proc{}, false
	}
	start, _ := strconv.ParseUint(f[19], 10, 64)
	return proc{pid: pid, state: f[0][0], start: start}, true
}

// cmdlineOf returns the NUL-joined command line of pid as argvKey makes
// it, "" when unreadable.
func cmdlineOf(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		return ""
	}
	return string(bytes.TrimRight(b, "\x00"))
}

func syscallKill(pid int) error { return syscall.Kill(pid, syscall.SIGKILL) }
