package observe

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// Listening sockets through netlink sock_diag (SOCK_DIAG_BY_FAMILY with
// idiag_states = 1<<TCP_LISTEN): the kernel returns only listeners, where
// /proc/net/tcp prints every socket (established, time-wait...) as text.
// x/sys has the constants but not the inet_diag structs, so the 72-byte
// request and reply are laid out here (include/uapi/linux/inet_diag.h).

const (
	inetDiagReqLen = 56 // struct inet_diag_req_v2
	inetDiagMsgLen = 72 // struct inet_diag_msg

	inetDiagReqBytecode = 1  // INET_DIAG_REQ_BYTECODE
	inetDiagCgroupID    = 21 // INET_DIAG_CGROUP_ID
)

// diagBufs holds receive buffers of diagRecvSize: a stop asks about its
// port once, and a fleet's stops would otherwise allocate and clear one
// each time.
var diagBufs = sync.Pool{New: func() any { b := make([]byte, diagRecvSize); return &b }}

// diagRecvSize is the netlink receive buffer, as large as iproute2's.
const diagRecvSize = 32 << 10

// sockDiagBroken is set when sock_diag is unavailable (no inet_diag module,
// a seccomp filter); /proc/net/tcp is used from then on.
var sockDiagBroken atomic.Bool

// diagListeners dumps the TCP listeners of one address family on port (0:
// every port). The port goes in the request's idiag_sport, which the
// kernel compares before it fills a reply for a listener: asking about one
// port costs a walk of the listening hash, not a message per listener on
// the machine (with 1,000 servers listening, a dump of them all per
// stopped server made a fleet's stop quadratic). Callers still check the
// port of what comes back.
func diagListeners(family uint8, port uint16) ([]netEntry, error) {
	return diagDump(family, port, nil)
}

// diagDump is diagListeners with filter, when set, as the request's
// INET_DIAG_REQ_BYTECODE (see portRunsBytecode).
func diagDump(family uint8, port uint16, filter []byte) ([]netEntry, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, unix.NETLINK_SOCK_DIAG)
	if err != nil {
		return nil, fmt.Errorf("sock_diag socket: %w", err)
	}
	defer unix.Close(fd)
	req := make([]byte, unix.SizeofNlMsghdr+inetDiagReqLen, unix.SizeofNlMsghdr+inetDiagReqLen+unix.SizeofNlAttr+len(filter))
	ne := binary.NativeEndian
	ne.PutUint32(req[0:], uint32(len(req)))
	ne.PutUint16(req[4:], unix.SOCK_DIAG_BY_FAMILY)
	ne.PutUint16(req[6:], unix.NLM_F_REQUEST|unix.NLM_F_DUMP)
	ne.PutUint32(req[8:], 1) // seq
	body := req[unix.SizeofNlMsghdr:]
	body[0] = family
	body[1] = unix.IPPROTO_TCP
	ne.PutUint32(body[4:], 1<<tcpListenState)
	binary.BigEndian.PutUint16(body[8:], port) // inet_diag_sockid.idiag_sport
	if len(filter) > 0 {
		req = appendNlAttr(req, inetDiagReqBytecode, filter)
		ne.PutUint32(req[0:], uint32(len(req)))
	}
	if err := unix.Sendto(fd, req, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return nil, fmt.Errorf("sock_diag send: %w", err)
	}
	bp := diagBufs.Get().(*[]byte)
	defer diagBufs.Put(bp)
	buf := *bp
	var out []netEntry
	for {
		n, _, err := unix.Recvfrom(fd, buf, 0)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("sock_diag receive: %w", err)
		}
		var done bool
		out, done, err = parseInetDiag(buf[:n], out)
		if err != nil {
			return nil, err
		}
		if done {
			return out, nil
		}
	}
}

// appendNlAttr appends a netlink attribute (struct nlattr, 4-byte
// aligned) to b.
func appendNlAttr(b []byte, typ uint16, payload []byte) []byte {
	var h [unix.SizeofNlAttr]byte
	binary.NativeEndian.PutUint16(h[0:], uint16(unix.SizeofNlAttr+len(payload)))
	binary.NativeEndian.PutUint16(h[2:], typ)
	b = append(append(b, h[:]...), payload...)
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	return b
}

// parseInetDiag appends the sockets in one netlink datagram of a
// SOCK_DIAG_BY_FAMILY dump; done reports NLMSG_DONE.
func parseInetDiag(b []byte, out []netEntry) ([]netEntry, bool, error) {
	ne := binary.NativeEndian
	for len(b) >= unix.SizeofNlMsghdr {
		l := int(ne.Uint32(b[0:]))
		typ := ne.Uint16(b[4:])
		if l < unix.SizeofNlMsghdr || l > len(b) {
			return out, false, fmt.Errorf("sock_diag: bad message length %d", l)
		}
		msg := b[unix.SizeofNlMsghdr:l]
		switch typ {
		case unix.NLMSG_DONE:
			return out, true, nil
		case unix.NLMSG_ERROR:
			if len(msg) >= 4 {
				if errno := -int32(ne.Uint32(msg)); errno != 0 {
					return out, false, fmt.Errorf("sock_diag: %w", unix.Errno(errno))
				}
			}
			return out, false, errors.New("sock_diag: error message")
		case unix.SOCK_DIAG_BY_FAMILY:
			e, err := parseInetDiagMsg(msg)
			if err != nil {
				return out, false, err
			}
			out = append(out, e)
		}
		// Messages are aligned to 4 bytes.
		next := (l + 3) &^ 3
		if next > len(b) {
			break
		}
		b = b[next:]
	}
	return out, false, nil
}

func parseInetDiagMsg(m []byte) (netEntry, error) {
	var e netEntry
	if len(m) < inetDiagMsgLen {
		return e, fmt.Errorf("sock_diag: short inet_diag_msg (%d bytes)", len(m))
	}
	port := binary.BigEndian.Uint16(m[4:])
	var addr netip.Addr
	switch m[0] {
	case unix.AF_INET:
		addr = netip.AddrFrom4([4]byte(m[8:12]))
	case unix.AF_INET6:
		addr = netip.AddrFrom16([16]byte(m[8:24]))
	default:
		return e, fmt.Errorf("sock_diag: family %d", m[0])
	}
	e.Local = netip.AddrPortFrom(addr, port)
	e.State = m[1]
	e.UID = int(binary.NativeEndian.Uint32(m[64:]))
	e.Inode = uint64(binary.NativeEndian.Uint32(m[68:]))
	// Attributes follow; the kernel adds the socket's cgroup id (5.7+)
	// without being asked.
	for a := m[inetDiagMsgLen:]; len(a) >= unix.SizeofRtAttr; {
		l := int(binary.NativeEndian.Uint16(a[0:]))
		if l < unix.SizeofRtAttr || l > len(a) {
			break
		}
		if binary.NativeEndian.Uint16(a[2:]) == inetDiagCgroupID && l >= unix.SizeofRtAttr+8 {
			e.CgroupID = binary.NativeEndian.Uint64(a[unix.SizeofRtAttr:])
		}
		a = a[min((l+3)&^3, len(a)):]
	}
	return e, nil
}
