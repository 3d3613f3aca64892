package observe

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
)

// PortHolder says who listens on a TCP port, as far as this user can see.
// It is data, so that callers never parse a message to learn it; String
// is its one rendering for messages.
type PortHolder struct {
	Port int
	// PIDs hold a listening socket on the port (several when a socket is
	// shared, as by a server and its workers).
	PIDs []int
	// Cmdline is the command line of the first of PIDs.
	Cmdline []string
	// UID is the uid of the first listening socket, -1 when unknown.
	UID int
	// Visible is false when a listener's holder could not be seen
	// (another user's process, no privilege): PIDs is then empty or
	// partial, and must not be taken as "nobody".
	Visible bool
	// Addrs are the listening addresses; empty when the port accepts
	// connections but no listener shows in the kernel's tables.
	Addrs []netip.AddrPort
}

// String renders the holder for a message: `pid 1234 ["nginx: master
// process"] (uid 0) on 127.0.0.1:8080`, or what could not be seen.
func (p *PortHolder) String() string {
	if p == nil {
		return "nothing"
	}
	var b strings.Builder
	switch {
	case len(p.PIDs) == 1:
		fmt.Fprintf(&b, "pid %d %s", p.PIDs[0], FormatCmdline(p.Cmdline))
	case len(p.PIDs) > 1:
		ps := make([]string, len(p.PIDs))
		for i, pid := range p.PIDs {
			ps[i] = strconv.Itoa(pid)
		}
		fmt.Fprintf(&b, "pids %s (pid %d runs %s)", strings.Join(ps, ", "), p.PIDs[0], FormatCmdline(p.Cmdline))
	case !p.Visible && p.UID >= 0:
		fmt.Fprintf(&b, "a process of uid %d not visible to this user", p.UID)
	case !p.Visible:
		b.WriteString("a process not visible to this user")
	default:
		b.WriteString("a listener with no visible holder")
	}
	if len(p.PIDs) > 0 && p.UID >= 0 {
		fmt.Fprintf(&b, " (uid %d)", p.UID)
	}
	if len(p.PIDs) > 0 && !p.Visible {
		b.WriteString(" and processes not visible to this user")
	}
	if len(p.Addrs) == 0 {
		return b.String() + " (the port accepts connections but no listener shows in the kernel's tables)"
	}
	as := make([]string, len(p.Addrs))
	for i, a := range p.Addrs {
		as[i] = a.String()
	}
	return b.String() + " on " + strings.Join(slices.Compact(as), ", ")
}

// HolderOf reports who holds port: nil when nothing listens on it (the
// kernel lists no listener and no connect to loopback succeeds). It reads
// the socket tables and, when there is a listener, every process's
// descriptors (see Listeners): it is for a conflict or a diagnosis, not a
// loop.
func HolderOf(ctx context.Context, port int) *PortHolder {
	ls, err := Listeners(port)
	if err == nil && len(ls) > 0 {
		h := &PortHolder{Port: port, UID: ls[0].UID, Visible: true}
		for _, l := range ls {
			if len(l.PIDs) > 0 && len(h.Cmdline) == 0 {
				h.Cmdline = l.Cmdline
			}
			for _, pid := range l.PIDs {
				if !slices.Contains(h.PIDs, pid) {
					h.PIDs = append(h.PIDs, pid)
				}
			}
			h.Addrs = append(h.Addrs, l.Addr)
			if !l.OwnerVisible {
				h.Visible = false
			}
		}
		return h
	}
	if PortAccepting(ctx, port) {
		return &PortHolder{Port: port, UID: -1}
	}
	return nil
}
