package observe

import (
	"net"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"
)

// boundPort binds a dual-stack TCP socket to the wildcard address without
// listening: a port that nothing listens on, in either family, and that
// no one else can take while the test runs.
func boundPort(t *testing.T) int {
	t.Helper()
	fd, err := unix.Socket(unix.AF_INET6, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Skipf("socket: %v", err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	if err := unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_V6ONLY, 0); err != nil {
		t.Skipf("dual stack: %v", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrInet6{}); err != nil {
		t.Skipf("bind: %v", err)
	}
	got, err := unix.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	return got.(*unix.SockaddrInet6).Port
}

// ListeningPorts finds the listeners of every family among the ports
// asked, and nothing on a port bound without listening or connected.
func TestListeningPorts(t *testing.T) {
	listenMany(t, 40) // listeners on other ports, which must not show
	v4 := listenPort(t, "tcp4", "127.0.0.1:0")
	v6 := listenPort(t, "tcp6", "[::1]:0")
	dual := listenPort(t, "tcp", ":0")
	bound := boundPort(t)
	// A connected socket's port is not a listener's.
	conn, err := net.Dial("tcp4", net.JoinHostPort("127.0.0.1", strconv.Itoa(v4)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	connected := conn.LocalAddr().(*net.TCPAddr).Port

	ports := []int{v4, bound, v6, dual, connected, v4}
	want := map[int]bool{v4: true, v6: true, dual: true, bound: false, connected: false}
	got, err := ListeningPorts(ports)
	if err != nil {
		t.Fatalf("ListeningPorts: %v", err)
	}
	for p, w := range want {
		if got[p] != w {
			t.Errorf("port %d: listening %v, want %v", p, got[p], w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("ListeningPorts answered %d ports (%v), want %d", len(got), got, len(want))
	}
	// One port alone is Listeners' query.
	for _, p := range []int{v4, bound} {
		one, err := ListeningPorts([]int{p})
		if err != nil || one[p] != want[p] {
			t.Errorf("ListeningPorts([%d]) = %v, %v; want %v", p, one, err, want[p])
		}
	}
	if _, err := ListeningPorts([]int{v4, 70000}); err == nil {
		t.Error("ListeningPorts with port 70000: no error")
	}
}

// The cost of asking about 100 ports at once while 1,000 others listen
// (a fleet of 100 whose stops wait on their ports together), against
// BenchmarkListenSocketsDiagAmong1000's one port.
func BenchmarkListeningPorts100Among1000(b *testing.B) {
	listenMany(b, 1000)
	ports := make([]int, 100)
	for i := range ports {
		ports[i] = listenPort(b, "tcp4", "127.0.0.1:0")
	}
	for b.Loop() {
		if busy, err := ListeningPorts(ports); err != nil || len(busy) != 100 {
			b.Fatal(len(busy), err)
		}
	}
}
