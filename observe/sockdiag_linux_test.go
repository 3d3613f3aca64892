package observe

import (
	"encoding/binary"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"
)

// The two sources of listening sockets agree, for IPv4, IPv6-only and
// dual-stack listeners.
func TestSockDiagMatchesProc(t *testing.T) {
	ports := []int{
		listenPort(t, "tcp4", "127.0.0.1:0"),
		listenPort(t, "tcp6", "[::1]:0"),
		listenPort(t, "tcp", ":0"),
	}
	for _, port := range ports {
		diag, err := diagListenSockets(port)
		if err != nil {
			t.Fatalf("sock_diag: %v", err)
		}
		proc, err := procListenSockets(port)
		if err != nil {
			t.Fatal(err)
		}
		if len(diag) != 1 || diag[0].Inode == 0 {
			t.Errorf("port %d: sock_diag found %+v, want one socket", port, diag)
		}
		if diff := cmp.Diff(proc, diag, cmp.Comparer(func(a, b netip.AddrPort) bool { return a == b })); diff != "" {
			t.Errorf("port %d: /proc and sock_diag differ (-proc +diag):\n%s", port, diff)
		}
	}
}

// diagMsg builds one netlink message holding an inet_diag_msg.
func diagMsg(family uint8, state uint8, addr netip.AddrPort, uid, inode uint32) []byte {
	ne := binary.NativeEndian
	b := make([]byte, unix.SizeofNlMsghdr+inetDiagMsgLen)
	ne.PutUint32(b[0:], uint32(len(b)))
	ne.PutUint16(b[4:], unix.SOCK_DIAG_BY_FAMILY)
	m := b[unix.SizeofNlMsghdr:]
	m[0], m[1] = family, state
	binary.BigEndian.PutUint16(m[4:], addr.Port())
	a := addr.Addr().As16()
	if family == unix.AF_INET {
		a4 := addr.Addr().As4()
		copy(m[8:], a4[:])
	} else {
		copy(m[8:], a[:])
	}
	ne.PutUint32(m[64:], uid)
	ne.PutUint32(m[68:], inode)
	return b
}

func nlDone() []byte {
	b := make([]byte, unix.SizeofNlMsghdr+4)
	binary.NativeEndian.PutUint32(b[0:], uint32(len(b)))
	binary.NativeEndian.PutUint16(b[4:], unix.NLMSG_DONE)
	return b
}

func nlError(errno unix.Errno) []byte {
	b := make([]byte, unix.SizeofNlMsghdr+4)
	binary.NativeEndian.PutUint32(b[0:], uint32(len(b)))
	binary.NativeEndian.PutUint16(b[4:], unix.NLMSG_ERROR)
	binary.NativeEndian.PutUint32(b[unix.SizeofNlMsghdr:], uint32(-int32(errno)))
	return b
}

func TestParseInetDiag(t *testing.T) {
	ap := netip.MustParseAddrPort
	b := slices.Concat(
		diagMsg(unix.AF_INET, tcpListenState, ap("127.0.0.1:18080"), 1000, 31001),
		diagMsg(unix.AF_INET6, tcpListenState, ap("[::]:18081"), 0, 41002),
		nlDone(),
	)
	got, done, err := parseInetDiag(b, nil)
	if err != nil || !done {
		t.Fatalf("parseInetDiag: done %v err %v", done, err)
	}
	want := []netEntry{
		{Local: ap("127.0.0.1:18080"), State: tcpListenState, UID: 1000, Inode: 31001},
		{Local: ap("[::]:18081"), State: tcpListenState, UID: 0, Inode: 41002},
	}
	if diff := cmp.Diff(want, got, cmp.Comparer(func(a, b netip.AddrPort) bool { return a == b })); diff != "" {
		t.Errorf("mismatch (-want +got):\n%s", diff)
	}
	// Without NLMSG_DONE the dump continues in the next datagram.
	if _, done, err := parseInetDiag(b[:len(b)-len(nlDone())], nil); done || err != nil {
		t.Errorf("partial dump: done %v err %v", done, err)
	}
	if _, _, err := parseInetDiag(nlError(unix.EPERM), nil); err == nil || !strings.Contains(err.Error(), "operation not permitted") {
		t.Errorf("NLMSG_ERROR: %v", err)
	}
	short := diagMsg(unix.AF_INET, tcpListenState, ap("127.0.0.1:1"), 0, 1)
	binary.NativeEndian.PutUint32(short[0:], uint32(unix.SizeofNlMsghdr+8))
	if _, _, err := parseInetDiag(short[:unix.SizeofNlMsghdr+8], nil); err == nil {
		t.Error("short inet_diag_msg accepted")
	}
	if _, _, err := parseInetDiag(diagMsg(99, 10, ap("127.0.0.1:1"), 0, 1), nil); err == nil {
		t.Error("unknown family accepted")
	}
	bad := diagMsg(unix.AF_INET, 10, ap("127.0.0.1:1"), 0, 1)
	binary.NativeEndian.PutUint32(bad[0:], 4)
	if _, _, err := parseInetDiag(bad, nil); err == nil {
		t.Error("bad length accepted")
	}
}

func FuzzParseInetDiag(f *testing.F) {
	ap := netip.MustParseAddrPort
	f.Add(slices.Concat(diagMsg(unix.AF_INET, tcpListenState, ap("127.0.0.1:18080"), 1000, 31001), nlDone()))
	f.Add(slices.Concat(diagMsg(unix.AF_INET6, tcpListenState, ap("[::1]:80"), 0, 2), diagMsg(unix.AF_INET, 1, ap("10.0.0.1:22"), 0, 0)))
	f.Add(nlError(unix.ENOENT))
	f.Fuzz(func(t *testing.T, b []byte) {
		out, _, err := parseInetDiag(b, nil)
		if err != nil {
			return
		}
		for _, e := range out {
			if !e.Local.IsValid() {
				t.Errorf("invalid address in %+v", e)
			}
		}
	})
}

func BenchmarkListenSocketsProc(b *testing.B) {
	port := listenPort(b, "tcp", "127.0.0.1:0")
	for b.Loop() {
		if ls, err := procListenSockets(port); err != nil || len(ls) != 1 {
			b.Fatal(ls, err)
		}
	}
}

func BenchmarkListenSocketsDiag(b *testing.B) {
	port := listenPort(b, "tcp", "127.0.0.1:0")
	for b.Loop() {
		if ls, err := diagListenSockets(port); err != nil || len(ls) != 1 {
			b.Fatal(ls, err)
		}
	}
}

// listenMany opens n loopback listeners, closed when tb ends.
func listenMany(tb testing.TB, n int) {
	tb.Helper()
	for range n {
		l, err := net.Listen("tcp4", "127.0.0.1:0")
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { l.Close() })
	}
}

// Among many listeners, a dump asked for one port returns that port's
// socket alone, from the kernel (idiag_sport) as from the filter after it.
func TestSockDiagOnePortAmongMany(t *testing.T) {
	listenMany(t, 50)
	port := listenPort(t, "tcp4", "127.0.0.1:0")
	entries, err := diagListeners(unix.AF_INET, uint16(port))
	if err != nil {
		t.Fatalf("sock_diag: %v", err)
	}
	if len(entries) != 1 || int(entries[0].Local.Port()) != port {
		t.Errorf("dump for port %d returned %d sockets: %+v", port, len(entries), entries)
	}
	all, err := diagListeners(unix.AF_INET, 0)
	if err != nil {
		t.Fatalf("sock_diag: %v", err)
	}
	if len(all) < 51 {
		t.Errorf("dump of every port returned %d sockets, want at least the test's 51", len(all))
	}
}

// The cost of one port's listeners while 1,000 others listen (a fleet's
// stop asks this once per server).
func BenchmarkListenSocketsDiagAmong1000(b *testing.B) {
	listenMany(b, 1000)
	port := listenPort(b, "tcp", "127.0.0.1:0")
	for b.Loop() {
		if ls, err := diagListenSockets(port); err != nil || len(ls) != 1 {
			b.Fatal(ls, err)
		}
	}
}
