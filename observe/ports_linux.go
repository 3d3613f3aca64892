package observe

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strconv"

	"golang.org/x/sys/unix"
)

// Listeners returns the TCP sockets in LISTEN state on port (IPv4 and IPv6,
// dual-stack ones included) in this network namespace, from /proc/net/tcp
// and /proc/net/tcp6. Owners are found by reading the /proc/*/fd links of
// every process, only when there is a listener, in a scan shared with other
// callers and kept for later ones (socketOwnersShared); when some fd
// folders cannot be read (another user's processes without privilege) and
// the socket's holder was not found, OwnerVisible is false.
func Listeners(port int) ([]Listener, error) {
	if port <= 0 || port > 65535 {
		return nil, fmt.Errorf("list listeners on port %d: invalid port", port)
	}
	ls, err := listenSockets(port)
	if err != nil {
		return nil, fmt.Errorf("list listeners on port %d: %w", port, err)
	}
	if len(ls) == 0 {
		return nil, nil
	}
	inodes := make(map[uint64][]int, len(ls))
	for _, l := range ls {
		inodes[l.Inode] = nil
	}
	denied, err := socketOwnersShared(inodes)
	if err != nil {
		return nil, fmt.Errorf("list listeners on port %d: %w", port, err)
	}
	for i := range ls {
		l := &ls[i]
		l.PIDs = inodes[l.Inode]
		l.OwnerVisible = len(l.PIDs) > 0 || !denied
		if len(l.PIDs) > 0 {
			if b, err := readProcFile(l.PIDs[0], "cmdline"); err == nil {
				l.Cmdline = parseCmdline(b)
			}
		}
	}
	return ls, nil
}

// listenSockets returns the LISTEN sockets on port, from sock_diag, or from
// /proc/net/tcp and tcp6 where sock_diag is not available.
func listenSockets(port int) ([]Listener, error) {
	entries, err := listenEntries(port)
	if err != nil {
		return nil, err
	}
	return appendListeners(nil, entries, port), nil
}

// listenEntries returns the TCP listeners of both address families on port
// (0: every port) from sock_diag, or the rows of /proc/net/tcp and tcp6
// where sock_diag is not available (and from then on).
func listenEntries(port int) ([]netEntry, error) {
	if !sockDiagBroken.Load() {
		entries, err := diagEntries(port)
		if err == nil {
			return entries, nil
		}
		sockDiagBroken.Store(true)
	}
	return procEntries()
}

func diagListenSockets(port int) ([]Listener, error) {
	entries, err := diagEntries(port)
	if err != nil {
		return nil, err
	}
	return appendListeners(nil, entries, port), nil
}

// diagEntries dumps the TCP listeners of both address families on port
// (0: every port).
func diagEntries(port int) ([]netEntry, error) {
	var out []netEntry
	for _, family := range []uint8{unix.AF_INET, unix.AF_INET6} {
		entries, err := diagListeners(family, uint16(port))
		if err != nil {
			if family == unix.AF_INET6 && errors.Is(err, unix.EAFNOSUPPORT) {
				continue
			}
			return nil, err
		}
		out = append(out, entries...)
	}
	return out, nil
}

func appendListeners(out []Listener, entries []netEntry, port int) []Listener {
	for _, e := range entries {
		if e.State != tcpListenState || int(e.Local.Port()) != port {
			continue
		}
		out = append(out, Listener{Addr: e.Local, UID: e.UID, Inode: e.Inode})
	}
	return out
}

// procListenSockets parses both /proc tables and keeps LISTEN rows on port.
func procListenSockets(port int) ([]Listener, error) {
	entries, err := procEntries()
	if err != nil {
		return nil, err
	}
	return appendListeners(nil, entries, port), nil
}

// procEntries parses every row of /proc/net/tcp and tcp6 (tcp6 missing:
// IPv6 disabled).
func procEntries() ([]netEntry, error) {
	var out []netEntry
	for _, f := range []struct {
		path string
		v6   bool
	}{{"/proc/net/tcp", false}, {"/proc/net/tcp6", true}} {
		b, err := os.ReadFile(f.path)
		if errors.Is(err, fs.ErrNotExist) && f.v6 {
			continue // IPv6 disabled
		}
		if err != nil {
			return nil, err
		}
		entries, err := parseProcNetTCP(b, f.v6)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f.path, err)
		}
		out = append(out, entries...)
	}
	return out, nil
}

// socketOwners fills inodes (socket inode -> pids) by reading every
// /proc/PID/fd link. denied reports whether some fd folder could not be read
// for lack of permission.
func socketOwners(inodes map[uint64][]int) (denied bool, err error) {
	err = eachPID(func(pid int, name string) {
		dir := "/proc/" + name + "/fd/"
		fdd, err := os.Open(dir)
		if err != nil {
			if errors.Is(err, fs.ErrPermission) {
				denied = true
			}
			return
		}
		fds, err := fdd.Readdirnames(-1)
		fdd.Close()
		if err != nil {
			if errors.Is(err, fs.ErrPermission) {
				denied = true
			}
			return
		}
		for _, fd := range fds {
			link, err := os.Readlink(dir + fd)
			if err != nil {
				continue
			}
			ino, ok := socketInode(link)
			if !ok {
				continue
			}
			if pids, want := inodes[ino]; want && !slices.Contains(pids, pid) {
				inodes[ino] = append(pids, pid)
			}
		}
	})
	return denied, err
}

// socketInode parses "socket:[12345]".
func socketInode(link string) (uint64, bool) {
	const pre = "socket:["
	if len(link) < len(pre)+2 || link[:len(pre)] != pre || link[len(link)-1] != ']' {
		return 0, false
	}
	ino, err := strconv.ParseUint(link[len(pre):len(link)-1], 10, 64)
	return ino, err == nil
}
