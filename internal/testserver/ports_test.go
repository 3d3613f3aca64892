package testserver

import (
	"net"
	"strconv"
	"testing"
)

func TestPortRange(t *testing.T) {
	for _, c := range []struct {
		ephLo, ephHi, lo, hi int
	}{
		{32768, 60999, 61000, 65535}, // Linux's default: above it
		{32768, 65000, 10000, 32767}, // too little above: below
		{49152, 65535, 10000, 49151}, // macOS and the BSDs
		{10500, 65000, 10000, 65535}, // no room on either side: anywhere
	} {
		lo, hi := portRange(c.ephLo, c.ephHi)
		if lo != c.lo || hi != c.hi {
			t.Errorf("portRange(%d, %d) = %d-%d, want %d-%d", c.ephLo, c.ephHi, lo, hi, c.lo, c.hi)
		}
	}
}

// TestFreePortsOutsideEphemeral: ports are distinct across calls, outside
// the kernel's ephemeral range, and bindable when returned.
func TestFreePortsOutsideEphemeral(t *testing.T) {
	ephLo, ephHi := ephemeralRange()
	seen := map[int]bool{}
	check := func(p int) {
		t.Helper()
		if seen[p] {
			t.Errorf("port %d returned twice", p)
		}
		seen[p] = true
		if ephLo <= p && p <= ephHi && (ports.lo > ephHi || ports.hi < ephLo) {
			t.Errorf("port %d is in the ephemeral range %d-%d", p, ephLo, ephHi)
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			t.Errorf("port %d not free: %v", p, err)
			return
		}
		l.Close()
	}
	for _, p := range FreePorts(t, 50) {
		check(p)
	}
	check(FreePort(t))
	base := FreePortRange(t, 5)
	for p := base; p < base+5; p++ {
		check(p)
	}
	check(FreePort(t))
}

// TestFreePortSkipsTaken: a port something listens on is never returned.
func TestFreePortSkipsTaken(t *testing.T) {
	p := FreePort(t)
	// The next search starts after p: hold the following port open.
	ports.mu.Lock()
	next := ports.next
	ports.mu.Unlock()
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(next)))
	if err != nil {
		t.Skipf("port %d after %d is already taken by something else: %v", next, p, err)
	}
	t.Cleanup(func() { l.Close() })
	if q := FreePort(t); q == next {
		t.Errorf("FreePort returned %d, on which this test listens", q)
	}
}
