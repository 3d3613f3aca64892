package observe

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"golang.org/x/sys/unix"
)

// inet_diag bytecode (include/uapi/linux/inet_diag.h): ops of 4 bytes
// {code, yes, no}, a port comparison followed by a second op whose "no"
// holds the port. The kernel runs the program on each socket: a true
// condition advances "yes" bytes, a false one "no"; the socket is reported
// when the program ends exactly at its end, and skipped when it jumps past
// it (to end+4). Its audit follows the "yes" chain, so "yes" always goes
// to the next op and every other target is reached through "no".
const (
	diagBcJmp  = 1 // INET_DIAG_BC_JMP: always false
	diagBcSGE  = 2 // INET_DIAG_BC_S_GE: local port >= port
	diagBcSLE  = 3 // INET_DIAG_BC_S_LE: local port <= port
	diagBcRun  = 20
	maxBcRuns  = 512 // runs per request: 10 KB of program, a page or three
	diagOpSize = 4
)

// portRunsBytecode is a program that accepts a socket whose local port
// lies in one of runs (sorted): first S_GE of the lowest port and S_LE of
// the highest, which reject at once every other listener of the machine;
// then for each run, S_GE lo, S_LE hi (a false one goes to the next run,
// or rejects after the last), then a JMP to the end (accept).
func portRunsBytecode(runs [][2]uint16) []byte {
	const prefix = 16
	l := prefix + len(runs)*diagBcRun
	bc := make([]byte, l)
	ne := binary.NativeEndian
	op := func(at int, code uint8, yes uint8, no uint16) {
		bc[at], bc[at+1] = code, yes
		ne.PutUint16(bc[at+2:], no)
	}
	op(0, diagBcSGE, 8, uint16(l+diagOpSize)) // reject
	op(4, 0, 0, runs[0][0])
	op(8, diagBcSLE, 8, uint16(l-8+diagOpSize)) // reject
	op(12, 0, 0, runs[len(runs)-1][1])
	for i, r := range runs {
		b := prefix + i*diagBcRun
		left := l - b // bytes from this run's start to the end
		nextGE, nextLE := uint16(diagBcRun), uint16(diagBcRun-8)
		if i == len(runs)-1 {
			nextGE, nextLE = uint16(left+diagOpSize), uint16(left-8+diagOpSize) // reject
		}
		op(b, diagBcSGE, 8, nextGE)
		op(b+4, 0, 0, r[0])
		op(b+8, diagBcSLE, 8, nextLE)
		op(b+12, 0, 0, r[1])
		op(b+16, diagBcJmp, diagOpSize, uint16(left-16)) // accept
	}
	return bc
}

// ListeningOn appends to out the TCP sockets in LISTEN state (IPv4 and
// IPv6) on any of ports, in this network namespace. It costs one
// sock_diag query per address family (per 512 runs of consecutive ports),
// whatever the number of ports, and no connection: the kernel filters by
// port and reports only the matching listeners. Where sock_diag is not
// available the error wraps ErrNotSupported: callers then connect
// (PortAccepting).
func ListeningOn(ports []int, out []PortListen) ([]PortListen, error) {
	if sockDiagBroken.Load() {
		return out, fmt.Errorf("list listeners: sock_diag unavailable: %w", ErrNotSupported)
	}
	runs := portRuns(ports)
	for len(runs) > 0 {
		chunk := runs[:min(len(runs), maxBcRuns)]
		runs = runs[len(chunk):]
		bc := portRunsBytecode(chunk)
		for _, family := range []uint8{unix.AF_INET, unix.AF_INET6} {
			entries, err := diagDump(family, 0, bc)
			if err != nil {
				if family == unix.AF_INET6 && errors.Is(err, unix.EAFNOSUPPORT) {
					continue
				}
				return out, fmt.Errorf("list listeners on %d port(s): %w", len(ports), err)
			}
			for _, e := range entries {
				if e.State == tcpListenState && inRuns(chunk, e.Local.Port()) {
					out = append(out, PortListen{Addr: e.Local, CgroupID: e.CgroupID})
				}
			}
		}
	}
	return out, nil
}

func inRuns(runs [][2]uint16, p uint16) bool {
	for _, r := range runs {
		if r[0] <= p && p <= r[1] {
			return true
		}
	}
	return false
}

// portRuns sorts ports and groups them into runs of consecutive ports,
// [lo, hi] each, dropping duplicates and ports outside 1-65535.
func portRuns(ports []int) [][2]uint16 {
	ps := slices.Clone(ports)
	slices.Sort(ps)
	var runs [][2]uint16
	for _, p := range ps {
		if p <= 0 || p > 65535 {
			continue
		}
		if n := len(runs); n > 0 && int(runs[n-1][1]) >= p-1 {
			runs[n-1][1] = max(runs[n-1][1], uint16(p))
			continue
		}
		runs = append(runs, [2]uint16{uint16(p), uint16(p)})
	}
	return runs
}
