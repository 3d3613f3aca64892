package observe

import (
	"encoding/binary"
	"net"
	"net/netip"
	"os"
	"slices"
	"syscall"
	"testing"
)

// runBytecode is the kernel's audit and interpreter of an inet_diag
// program (net/ipv4/inet_diag.c: inet_diag_bc_audit, inet_diag_bc_run),
// for the ops portRunsBytecode uses: the table test below checks the
// program against it for every port, which a kernel cannot be made to
// show for ports nothing listens on.
func runBytecode(t *testing.T, bc []byte, port uint16) bool {
	t.Helper()
	ne := binary.NativeEndian
	// Audit: every op on the "yes" chain, "no" lands on an op of it, the
	// end, or end+4.
	onChain := map[int]bool{}
	for at := 0; at < len(bc); {
		onChain[len(bc)-at] = true
		yes := int(bc[at+1])
		min := 4
		switch bc[at] {
		case diagBcSGE, diagBcSLE:
			min = 8
		case diagBcJmp:
		default:
			t.Fatalf("op %d at %d", bc[at], at)
		}
		if yes < min || yes > len(bc)-at+4 || yes&3 != 0 {
			t.Fatalf("bad yes %d at %d", yes, at)
		}
		at += yes
	}
	for at := 0; at < len(bc); {
		left := len(bc) - at
		no := int(ne.Uint16(bc[at+2:]))
		if no < int(bc[at+1]) && bc[at] != diagBcJmp || no > left+4 || no&3 != 0 {
			t.Fatalf("bad no %d at %d", no, at)
		}
		if no < left && !onChain[left-no] {
			t.Fatalf("no %d at %d does not land on an op", no, at)
		}
		at += int(bc[at+1])
	}
	// Run.
	left := len(bc)
	at := 0
	for left > 0 {
		yes := true
		switch bc[at] {
		case diagBcJmp:
			yes = false
		case diagBcSGE:
			yes = port >= ne.Uint16(bc[at+6:])
		case diagBcSLE:
			yes = port <= ne.Uint16(bc[at+6:])
		}
		step := int(ne.Uint16(bc[at+2:]))
		if yes {
			step = int(bc[at+1])
		}
		left -= step
		at += step
	}
	return left == 0
}

func TestPortRunsBytecode(t *testing.T) {
	tests := [][]int{
		{8080},
		{1, 65535},
		{20001, 20002, 20003, 20005, 20007, 20008},
		{5, 3, 4, 3, 100, 0, -1, 70000},
		{40000, 40002, 40004, 40006, 40008, 40010, 40012},
	}
	for _, ports := range tests {
		runs := portRuns(ports)
		bc := portRunsBytecode(runs)
		for p := 0; p <= 65535; p++ {
			want := p > 0 && slices.Contains(ports, p)
			if got := runBytecode(t, bc, uint16(p)); got != want {
				t.Fatalf("ports %v: port %d accepted %v, want %v", ports, p, got, want)
			}
		}
	}
	if got, want := portRuns([]int{7, 5, 6, 9, 9, 70000}), [][2]uint16{{5, 7}, {9, 9}}; !slices.Equal(got, want) {
		t.Errorf("portRuns = %v, want %v", got, want)
	}
}

// TestListeningOn asks the kernel about listeners of this process and
// ports nothing listens on; the sockets carry this process's cgroup.
func TestListeningOn(t *testing.T) {
	v4 := listenPort(t, "tcp4", "127.0.0.1:0")
	v6 := listenPort(t, "tcp6", "[::1]:0")
	any := listenPort(t, "tcp", ":0")
	other := listenPort(t, "tcp4", "127.0.0.1:0") // listens, not asked about
	closed := freePort(t)

	got, err := ListeningOn([]int{v4, v6, any, closed}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ports := map[int]PortListen{}
	for _, l := range got {
		if l.Port() == other || l.Port() == closed {
			t.Errorf("listener on port %d reported, not asked about or closed", l.Port())
		}
		if !l.LoopbackReachable() {
			t.Errorf("%v: not loopback reachable", l.Addr)
		}
		ports[l.Port()] = l
	}
	for _, p := range []int{v4, v6, any} {
		if _, ok := ports[p]; !ok {
			t.Errorf("port %d: no listener reported (got %v)", p, got)
		}
	}
	if ports[v4].Addr.Addr() != netip.AddrFrom4([4]byte{127, 0, 0, 1}) {
		t.Errorf("port %d: address %v", v4, ports[v4].Addr)
	}

	// The cgroup id is the inode of this process's cgroup folder.
	cg, err := FindCgroup2()
	if err != nil {
		t.Skipf("no cgroup v2: %v", err)
	}
	dir, err := cg.Dir(cg.Self)
	if err != nil {
		t.Skip(err)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		t.Skip(err)
	}
	ino := fi.Sys().(*syscall.Stat_t).Ino
	if id := ports[v4].CgroupID; id != ino {
		t.Errorf("cgroup id %d, want %d (%s)", id, ino, dir)
	}
}

func TestLoopbackReachable(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:80": true, "[::1]:80": true, "0.0.0.0:80": true, "[::]:80": true,
		"[::ffff:127.0.0.1]:80": true, "127.0.0.2:80": false, "192.0.2.1:80": false, "[fe80::1]:80": false,
	} {
		if got := (PortListen{Addr: netip.MustParseAddrPort(addr)}).LoopbackReachable(); got != want {
			t.Errorf("%s: %v, want %v", addr, got, want)
		}
	}
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := l.Addr().(*net.TCPAddr).Port
	l.Close()
	return p
}

// BenchmarkListeningOn100 asks about 100 ports, 50 of them listening,
// among the machine's other listeners.
func BenchmarkListeningOn100(b *testing.B) {
	var ports []int
	for i := 0; i < 50; i++ {
		ports = append(ports, listenPort(b, "tcp4", "127.0.0.1:0"), freePort(b))
	}
	var out []PortListen
	b.ReportAllocs()
	for b.Loop() {
		var err error
		if out, err = ListeningOn(ports, out[:0]); err != nil {
			b.Fatal(err)
		}
	}
	if len(out) != 50 {
		b.Fatalf("%d listeners, want 50", len(out))
	}
}
