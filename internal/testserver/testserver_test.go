package testserver

import (
	"net"
	"strconv"
	"testing"
)

// TestFreePortsDistinct: FreePorts hands out n different ports, each free
// to listen on once returned.
func TestFreePortsDistinct(t *testing.T) {
	const n = 50
	ports := FreePorts(t, n)
	if len(ports) != n {
		t.Fatalf("FreePorts(%d) returned %d ports", n, len(ports))
	}
	seen := map[int]bool{}
	for _, p := range ports {
		if seen[p] {
			t.Fatalf("port %d returned twice in %v", p, ports)
		}
		seen[p] = true
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			t.Errorf("port %d is not free: %v", p, err)
			continue
		}
		l.Close()
	}
}
