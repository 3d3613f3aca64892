//go:build linux || darwin

package observe

import (
	"context"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/procfleet/procfleet/internal/testserver"
)

func listenPort(t testing.TB, network, addr string) int {
	t.Helper()
	l, err := net.Listen(network, addr)
	if err != nil {
		t.Skipf("listen %s %s: %v", network, addr, err)
	}
	t.Cleanup(func() { l.Close() })
	return l.Addr().(*net.TCPAddr).Port
}

func TestListenersOwnListener(t *testing.T) {
	tests := []struct {
		name, network, addr string
		want                func(port int) netip.AddrPort
	}{
		{"ipv4 loopback", "tcp4", "127.0.0.1:0", func(p int) netip.AddrPort { return netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(p)) }},
		{"ipv6 only", "tcp6", "[::1]:0", func(p int) netip.AddrPort { return netip.AddrPortFrom(netip.IPv6Loopback(), uint16(p)) }},
		// Go's dual-stack listener is one AF_INET6 socket, seen only in tcp6.
		{"dual stack", "tcp", ":0", func(p int) netip.AddrPort { return netip.AddrPortFrom(netip.IPv6Unspecified(), uint16(p)) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			port := listenPort(t, tt.network, tt.addr)
			all, err := Listeners(port)
			if err != nil {
				t.Fatal(err)
			}
			// Another process may hold the same port number in the other
			// address family (the kernel allows a 127.0.0.1 listener
			// beside a [::1] one): only the test's address is judged.
			var ls []Listener
			for _, l := range all {
				if l.Addr == tt.want(port) {
					ls = append(ls, l)
				}
			}
			if len(ls) != 1 {
				t.Fatalf("Listeners(%d) = %+v, want one on %v", port, all, tt.want(port))
			}
			l := ls[0]
			if !slices.Equal(l.PIDs, []int{os.Getpid()}) || !l.OwnerVisible || l.UID != os.Geteuid() || (l.Inode == 0) != (runtime.GOOS != "linux") {
				t.Errorf("listener %+v, want held by the test (pid %d), visible", l, os.Getpid())
			}
			self, _ := os.Executable()
			if len(l.Cmdline) == 0 || filepath.Base(l.Cmdline[0]) != filepath.Base(self) {
				t.Errorf("Cmdline = %q, want the test binary %s", l.Cmdline, self)
			}
			if !PortAccepting(context.Background(), port) {
				t.Error("PortAccepting = false for a listener")
			}
		})
	}
}

// startListening starts a test server listening on port and returns once
// it is (its handshake file written), failing the test if it exits or
// takes over 20 s.
func startListening(t *testing.T, port int) *exec.Cmd {
	t.Helper()
	ready := filepath.Join(t.TempDir(), "ready")
	cmd := startTestServer(t, "-port", strconv.Itoa(port), "-ready-file", ready)
	h := mustPin(t, cmd.Process.Pid)
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, err := os.Stat(ready); err == nil {
			return cmd
		}
		if h.Exited() || time.Now().After(deadline) {
			t.Fatal("test server did not become ready")
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
		_ = h.Wait(ctx) // a bounded pause that ends early on exit
		cancel()
	}
}

// A listener held by a child (the test server): its pid and command line.
func TestListenersChild(t *testing.T) {
	port := testserver.FreePort(t)
	cmd := startListening(t, port)
	ls, err := Listeners(port)
	if err != nil {
		t.Fatal(err)
	}
	if len(ls) != 1 || !slices.Equal(ls[0].PIDs, []int{cmd.Process.Pid}) || !ls[0].OwnerVisible {
		t.Fatalf("Listeners(%d) = %+v, want the test server %d", port, ls, cmd.Process.Pid)
	}
	if argv := cmd.Args; !slices.Equal(ls[0].Cmdline, argv) {
		t.Errorf("Cmdline = %q, want %q", ls[0].Cmdline, argv)
	}
}

func TestListenersUnowned(t *testing.T) {
	port := testserver.FreePort(t)
	ls, err := Listeners(port)
	if err != nil {
		t.Fatal(err)
	}
	if len(ls) != 0 {
		t.Errorf("Listeners(free port %d) = %+v", port, ls)
	}
	if PortAccepting(context.Background(), port) {
		t.Error("PortAccepting(free port) = true")
	}
	for _, bad := range []int{0, -1, 65536} {
		if _, err := Listeners(bad); err == nil {
			t.Errorf("Listeners(%d) succeeded", bad)
		}
	}
}

// Seen from user nobody, root's listener is there but its owner cannot be
// seen (EACCES on /proc/PID/fd): OwnerVisible false rather than a guess.
func TestListenersOwnerNotVisible(t *testing.T) {
	skipUnlessLinux(t)
	bin := otherUserBinary(t)
	port := listenPort(t, "tcp4", "127.0.0.1:0")
	r := runAsNobody(t, bin, "listeners", port)
	if r.Err != "" || len(r.Listeners) != 1 {
		t.Fatalf("nobody's Listeners(%d) = %+v", port, r)
	}
	l := r.Listeners[0]
	if l.OwnerVisible || len(l.PIDs) != 0 || l.UID != 0 {
		t.Errorf("nobody sees %+v, want uid 0, owner not visible, no pids", l)
	}
	if !strings.HasPrefix(l.Addr.String(), "127.0.0.1:") {
		t.Errorf("Addr = %v", l.Addr)
	}
}

// HolderOf gives who holds a port as data, and nil for a free port.
func TestHolderOf(t *testing.T) {
	ctx := testCtx(t, time.Minute)
	port := testserver.FreePort(t)
	if h := HolderOf(ctx, port); h != nil {
		t.Fatalf("HolderOf(free port) = %v", h)
	}
	ready := filepath.Join(t.TempDir(), "ready")
	cmd := startTestServer(t, "-port", strconv.Itoa(port), "-ready-file", ready)
	waitFile(t, ready)
	h := HolderOf(ctx, port)
	if h == nil || !slices.Equal(h.PIDs, []int{cmd.Process.Pid}) || !h.Visible || h.UID != os.Geteuid() || len(h.Addrs) != 1 {
		t.Fatalf("HolderOf = %+v, want the test server %d", h, cmd.Process.Pid)
	}
	if !slices.Equal(h.Cmdline, cmd.Args) {
		t.Errorf("Cmdline = %q, want %q", h.Cmdline, cmd.Args)
	}
	s := h.String()
	for _, w := range []string{"pid " + strconv.Itoa(cmd.Process.Pid), "127.0.0.1:" + strconv.Itoa(port), "(uid " + strconv.Itoa(os.Geteuid()) + ")"} {
		if !strings.Contains(s, w) {
			t.Errorf("String() = %q, want it to name %q", s, w)
		}
	}
}

func TestPortHolderString(t *testing.T) {
	ap := netip.MustParseAddrPort
	tests := []struct {
		h    *PortHolder
		want string
	}{
		{nil, "nothing"},
		{&PortHolder{Port: 80, PIDs: []int{7}, Cmdline: append([]string{"redis-server *:80"}, make([]string, 50)...), UID: 0, Visible: true, Addrs: []netip.AddrPort{ap("0.0.0.0:80")}},
			`pid 7 ["redis-server *:80"] (uid 0) on 0.0.0.0:80`},
		{&PortHolder{Port: 80, PIDs: []int{7, 8}, Cmdline: []string{"nginx: master process"}, UID: 33, Visible: true, Addrs: []netip.AddrPort{ap("127.0.0.1:80"), ap("[::]:80")}},
			`pids 7, 8 (pid 7 runs ["nginx: master process"]) (uid 33) on 127.0.0.1:80, [::]:80`},
		{&PortHolder{Port: 80, UID: 1000, Addrs: []netip.AddrPort{ap("127.0.0.1:80")}}, "a process of uid 1000 not visible to this user on 127.0.0.1:80"},
		{&PortHolder{Port: 80, UID: -1}, "a process not visible to this user (the port accepts connections but no listener shows in the kernel's tables)"},
	}
	for _, tt := range tests {
		if got := tt.h.String(); got != tt.want {
			t.Errorf("String() = %q\n want %q", got, tt.want)
		}
	}
}
