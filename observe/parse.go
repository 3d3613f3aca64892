package observe

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// This file holds pure parsers over the bytes of /proc files. They are kept
// free of build tags so that their tests and fuzz targets run everywhere.

// procStat is what procfleet uses of /proc/PID/stat.
type procStat struct {
	PID, PPID, PGID, SID int
	State                State
	StartTime            uint64
	Comm                 string
}

// parseStat parses /proc/PID/stat. comm is raw (it may hold spaces,
// parentheses and newlines), so it is taken between the first '(' and the
// last ')', and the numbered fields are split after the last ')'.
func parseStat(b []byte) (procStat, error) {
	var st procStat
	open := bytes.IndexByte(b, '(')
	closing := bytes.LastIndexByte(b, ')')
	if open < 1 || closing < open {
		return st, errors.New("parse stat: no (comm)")
	}
	pid, err := strconv.Atoi(string(bytes.TrimSpace(b[:open])))
	if err != nil || pid <= 0 {
		return st, fmt.Errorf("parse stat: bad pid %q", b[:open])
	}
	st.PID = pid
	st.Comm = string(b[open+1 : closing])
	rest := b[closing+1:]
	// Fields from 3 (state) on; starttime is field 22, index 19 here.
	var fields [20][]byte
	n := 0
	for n < len(fields) {
		rest = bytes.TrimLeft(rest, " ")
		if len(rest) == 0 {
			break
		}
		end := bytes.IndexByte(rest, ' ')
		if end < 0 {
			end = len(rest)
		}
		fields[n] = bytes.TrimRight(rest[:end], "\n")
		rest = rest[end:]
		n++
	}
	if n < len(fields) {
		return st, fmt.Errorf("parse stat: %d fields after comm, want at least %d", n, len(fields))
	}
	if len(fields[0]) != 1 {
		return st, fmt.Errorf("parse stat: bad state %q", fields[0])
	}
	st.State = stateFromLetter(fields[0][0])
	ints := [...]*int{&st.PPID, &st.PGID, &st.SID}
	for i, p := range ints {
		v, err := strconv.Atoi(string(fields[1+i]))
		if err != nil {
			return st, fmt.Errorf("parse stat: field %d: %w", 4+i, err)
		}
		*p = v
	}
	st.StartTime, err = strconv.ParseUint(string(fields[19]), 10, 64)
	if err != nil {
		return st, fmt.Errorf("parse stat: starttime: %w", err)
	}
	return st, nil
}

// stateFromLetter maps a proc(5) state letter.
func stateFromLetter(c byte) State {
	switch c {
	case 'R':
		return StateRunning
	case 'S':
		return StateSleeping
	case 'D':
		return StateDiskSleep
	case 'T':
		return StateStopped
	case 't':
		return StateTracingStop
	case 'Z':
		return StateZombie
	case 'X', 'x':
		return StateDead
	case 'I':
		return StateIdle
	}
	return StateUnknown
}

// parseCmdline splits /proc/PID/cmdline (NUL-separated, trailing NUL). A
// process that rewrote its command line without NULs gives one element.
func parseCmdline(b []byte) []string {
	if len(b) == 0 {
		return nil
	}
	b = bytes.TrimSuffix(b, []byte{0})
	parts := bytes.Split(b, []byte{0})
	out := make([]string, len(parts))
	for i, p := range parts {
		out[i] = string(p)
	}
	return out
}

// parseStatusUID returns the real uid from the "Uid:" line of
// /proc/PID/status.
func parseStatusUID(b []byte) (int, error) {
	for len(b) > 0 {
		line := b
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			line, b = b[:i], b[i+1:]
		} else {
			b = nil
		}
		rest, ok := bytes.CutPrefix(line, []byte("Uid:"))
		if !ok {
			continue
		}
		f := bytes.Fields(rest)
		if len(f) == 0 {
			break
		}
		uid, err := strconv.Atoi(string(f[0]))
		if err != nil {
			return -1, fmt.Errorf("parse status: uid: %w", err)
		}
		return uid, nil
	}
	return -1, errors.New("parse status: no Uid line")
}

// tcpListenState is TCP_LISTEN as printed in /proc/net/tcp ("0A").
const tcpListenState = 0x0A

// netEntry is one row of /proc/net/tcp or /proc/net/tcp6.
type netEntry struct {
	Local netip.AddrPort
	State uint8
	UID   int
	Inode uint64
	// CgroupID is the cgroup v2 id (its folder's inode) of the socket's
	// creator, from sock_diag on Linux >= 5.7; 0 when unknown.
	CgroupID uint64
}

// parseProcNetTCP parses /proc/net/tcp (v6 false) or /proc/net/tcp6 (v6
// true). Addresses are network-order words printed in host order with %08X,
// so each 32-bit word is byte-swapped on little-endian hosts; the port is
// printed in host order. Rows that do not parse are an error: the format is
// the kernel's, and a silent skip could hide a listener.
func parseProcNetTCP(b []byte, v6 bool) ([]netEntry, error) {
	var out []netEntry
	first := true
	lineNo := 0
	for len(b) > 0 {
		line := b
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			line, b = b[:i], b[i+1:]
		} else {
			b = nil
		}
		lineNo++
		if first { // header
			first = false
			continue
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		e, err := parseNetLine(line, v6)
		if err != nil {
			return nil, fmt.Errorf("parse /proc/net/tcp line %d: %w", lineNo, err)
		}
		out = append(out, e)
	}
	return out, nil
}

func parseNetLine(line []byte, v6 bool) (netEntry, error) {
	var e netEntry
	// sl local rem st tx:rx tr:when retrnsmt uid timeout inode ...
	var f [10][]byte
	n := 0
	rest := line
	for n < len(f) {
		rest = bytes.TrimLeft(rest, " ")
		if len(rest) == 0 {
			break
		}
		end := bytes.IndexByte(rest, ' ')
		if end < 0 {
			end = len(rest)
		}
		f[n] = rest[:end]
		rest = rest[end:]
		n++
	}
	if n < len(f) {
		return e, fmt.Errorf("%d fields, want at least %d", n, len(f))
	}
	local, err := parseHexAddrPort(f[1], v6)
	if err != nil {
		return e, fmt.Errorf("local address: %w", err)
	}
	e.Local = local
	st, err := strconv.ParseUint(string(f[3]), 16, 8)
	if err != nil {
		return e, fmt.Errorf("state: %w", err)
	}
	e.State = uint8(st)
	uid, err := strconv.ParseUint(string(f[7]), 10, 32)
	if err != nil {
		return e, fmt.Errorf("uid: %w", err)
	}
	e.UID = int(uid)
	e.Inode, err = strconv.ParseUint(string(f[9]), 10, 64)
	if err != nil {
		return e, fmt.Errorf("inode: %w", err)
	}
	return e, nil
}

func parseHexAddrPort(s []byte, v6 bool) (netip.AddrPort, error) {
	host, port, ok := bytes.Cut(s, []byte{':'})
	if !ok {
		return netip.AddrPort{}, fmt.Errorf("no port in %q", s)
	}
	p, err := strconv.ParseUint(string(port), 16, 16)
	if err != nil || len(port) != 4 {
		return netip.AddrPort{}, fmt.Errorf("bad port %q", port)
	}
	words := 1
	if v6 {
		words = 4
	}
	if len(host) != 8*words {
		return netip.AddrPort{}, fmt.Errorf("bad address %q", host)
	}
	var raw [16]byte
	for w := 0; w < words; w++ {
		v, err := strconv.ParseUint(string(host[8*w:8*w+8]), 16, 32)
		if err != nil {
			return netip.AddrPort{}, fmt.Errorf("bad address %q", host)
		}
		binary.NativeEndian.PutUint32(raw[4*w:], uint32(v))
	}
	var addr netip.Addr
	if v6 {
		addr = netip.AddrFrom16(raw)
	} else {
		addr = netip.AddrFrom4([4]byte(raw[:4]))
	}
	return netip.AddrPortFrom(addr, uint16(p)), nil
}

// descendantsOf walks the parent links in procs (pure).
func descendantsOf(pid int, procs []procStat) []int {
	children := make(map[int][]procStat)
	for _, p := range procs {
		children[p.PPID] = append(children[p.PPID], p)
	}
	var out []int
	seen := map[int]bool{pid: true}
	queue := []int{pid}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		for _, c := range children[cur] {
			if seen[c.PID] {
				continue
			}
			seen[c.PID] = true
			queue = append(queue, c.PID)
			if !c.State.Exited() {
				out = append(out, c.PID)
			}
		}
	}
	return out
}

// parseProcArgs2 parses the macOS KERN_PROCARGS2 buffer: a native-endian
// int32 argc, the exec path, NUL padding, then argc NUL-terminated argv
// strings (then the environment, ignored).
func parseProcArgs2(b []byte) ([]string, error) {
	args, _, err := splitProcArgs2(b)
	return args, err
}

// parseProcArgs2Env returns the environment part of a KERN_PROCARGS2
// buffer (the NUL-separated strings after argv), in the form of
// /proc/PID/environ.
func parseProcArgs2Env(b []byte) ([]byte, error) {
	_, env, err := splitProcArgs2(b)
	for len(env) > 0 && env[0] == 0 {
		env = env[1:]
	}
	return env, err
}

func splitProcArgs2(b []byte) ([]string, []byte, error) {
	if len(b) < 4 {
		return nil, nil, errors.New("parse procargs2: short buffer")
	}
	argc := int(int32(binary.NativeEndian.Uint32(b[:4])))
	if argc < 0 || argc > len(b) {
		return nil, nil, fmt.Errorf("parse procargs2: bad argc %d", argc)
	}
	rest := b[4:]
	end := bytes.IndexByte(rest, 0)
	if end < 0 {
		return nil, nil, errors.New("parse procargs2: no exec path")
	}
	rest = rest[end:]
	for len(rest) > 0 && rest[0] == 0 {
		rest = rest[1:]
	}
	args := make([]string, 0, argc)
	for len(args) < argc {
		if len(rest) == 0 {
			return nil, nil, fmt.Errorf("parse procargs2: %d of %d args", len(args), argc)
		}
		end := bytes.IndexByte(rest, 0)
		if end < 0 {
			end = len(rest)
		}
		args = append(args, string(rest[:end]))
		rest = rest[min(end+1, len(rest)):]
	}
	return args, rest, nil
}

// lsofListener is one listening socket from `lsof -F pcun`.
type lsofListener struct {
	PID  int
	UID  int
	Comm string
	Addr netip.AddrPort
	// Wildcard is true for "*:port" (any address, IPv4 or IPv6 unknown).
	Wildcard bool
}

// parseLsof parses the field output of
// `lsof -nP -l -iTCP:PORT -sTCP:LISTEN -a -F pcun`: lines "p<pid>",
// "c<command>", "u<uid>", "f<fd>", "n<address>" (IPv6 in brackets, "*" for
// any address). Unknown field lines are ignored.
func parseLsof(b []byte) ([]lsofListener, error) {
	var out []lsofListener
	cur := lsofListener{PID: -1, UID: -1}
	for _, line := range bytes.Split(b, []byte{'\n'}) {
		line = bytes.TrimRight(line, "\r")
		if len(line) == 0 {
			continue
		}
		val := string(line[1:])
		switch line[0] {
		case 'p':
			pid, err := strconv.Atoi(val)
			if err != nil {
				return nil, fmt.Errorf("parse lsof: bad pid %q", val)
			}
			cur = lsofListener{PID: pid, UID: -1}
		case 'c':
			cur.Comm = val
		case 'u':
			if uid, err := strconv.Atoi(val); err == nil {
				cur.UID = uid
			}
		case 'n':
			if cur.PID < 0 {
				return nil, errors.New("parse lsof: address before pid")
			}
			l := cur
			i := strings.LastIndexByte(val, ':')
			if i < 0 {
				return nil, fmt.Errorf("parse lsof: no port in %q", val)
			}
			hostPart, port := val[:i], val[i+1:]
			p, err := strconv.ParseUint(port, 10, 16)
			if err != nil {
				return nil, fmt.Errorf("parse lsof: bad port in %q", val)
			}
			var addr netip.Addr
			if hostPart == "*" {
				l.Wildcard = true
				addr = netip.IPv6Unspecified()
			} else {
				addr, err = netip.ParseAddr(strings.Trim(hostPart, "[]"))
				if err != nil {
					return nil, fmt.Errorf("parse lsof: bad address in %q", val)
				}
			}
			l.Addr = netip.AddrPortFrom(addr, uint16(p))
			out = append(out, l)
		}
	}
	return out, nil
}

// environValue finds key in an environment block (NUL-separated KEY=value
// strings, as /proc/PID/environ holds). The first entry wins, as getenv's
// does.
func environValue(b []byte, key string) (string, bool) {
	for len(b) > 0 {
		entry := b
		if i := bytes.IndexByte(b, 0); i >= 0 {
			entry, b = b[:i], b[i+1:]
		} else {
			b = nil
		}
		if len(entry) > len(key) && entry[len(key)] == '=' && string(entry[:len(key)]) == key {
			return string(entry[len(key)+1:]), true
		}
	}
	return "", false
}
