package observe

import "net/netip"

// PortListen is a TCP socket in LISTEN state on one of the ports asked
// about.
type PortListen struct {
	Addr netip.AddrPort
	// CgroupID is the cgroup v2 id (the inode of its folder) of the process
	// that made the socket; 0 when the kernel does not say (before 5.7).
	CgroupID uint64
}

// Port is the listener's port.
func (l PortListen) Port() int { return int(l.Addr.Port()) }

// LoopbackReachable reports whether a connect to 127.0.0.1 or [::1] on
// its port reaches this listener: bound to a loopback address a client
// dials, or to every address. A listener on 192.0.2.1 or 127.0.0.2 only is
// not.
func (l PortListen) LoopbackReachable() bool {
	a := l.Addr.Addr().Unmap()
	return a.IsUnspecified() || a == netip.AddrFrom4([4]byte{127, 0, 0, 1}) || a == netip.IPv6Loopback()
}
