package testserver

import (
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// Tests take their ports from outside the kernel's ephemeral range
// (net.ipv4.ip_local_port_range, 32768-60999 by default): a port from that
// range can be handed to an outgoing connection (a readiness connect, an
// HTTP client, another package's test) between the check that it is free
// and the test server's bind, which then fails with "address already in
// use". Above the range is preferred; below it when too little is left
// above.
const (
	minTestPorts = 1000 // the fewest ports a side of the ephemeral range must offer
	lowestPort   = 10000
)

var ports struct {
	once   sync.Once
	lo, hi int          // the range ports are taken from, inclusive
	next   int          // where the next search starts
	handed map[int]bool // handed out by this process: never handed out again
	mu     sync.Mutex
}

// portRange returns the range tests take ports from, given the ephemeral
// range [ephLo, ephHi].
func portRange(ephLo, ephHi int) (lo, hi int) {
	if 65535-ephHi >= minTestPorts {
		return ephHi + 1, 65535
	}
	if ephLo-lowestPort >= minTestPorts {
		return lowestPort, ephLo - 1
	}
	return lowestPort, 65535 // no room outside: anywhere, checked free
}

// ephemeralRange reads the kernel's ephemeral port range; elsewhere than
// Linux it is the IANA range the BSDs and macOS use.
func ephemeralRange() (lo, hi int) {
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		f := strings.Fields(string(b))
		if len(f) == 2 {
			l, err1 := strconv.Atoi(f[0])
			h, err2 := strconv.Atoi(f[1])
			if err1 == nil && err2 == nil && 0 < l && l <= h && h <= 65535 {
				return l, h
			}
		}
	}
	return 49152, 65535
}

// take hands out the first port from the search position on that no call
// in this process has handed out and that test accepts, or 0 when the
// range is used up.
func take(test func(port int) bool) int {
	ports.once.Do(func() {
		ports.lo, ports.hi = portRange(ephemeralRange())
		ports.next = ports.lo + rand.IntN(ports.hi-ports.lo+1)
		ports.handed = map[int]bool{}
	})
	ports.mu.Lock()
	defer ports.mu.Unlock()
	size := ports.hi - ports.lo + 1
	for range size {
		p := ports.next
		ports.next++
		if ports.next > ports.hi {
			ports.next = ports.lo
		}
		if !ports.handed[p] && test(p) {
			ports.handed[p] = true
			return p
		}
	}
	return 0
}

// listenFree holds 127.0.0.1:port open when it is free.
func listenFree(port int) (net.Listener, bool) {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	return l, err == nil
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago,
// outside the ephemeral range and never returned before in this process.
func FreePort(t testing.TB) int {
	t.Helper()
	return FreePorts(t, 1)[0]
}

// FreePorts returns n distinct TCP ports on 127.0.0.1 that were free a
// moment ago, outside the ephemeral range and never returned before in
// this process.
func FreePorts(t testing.TB, n int) []int {
	t.Helper()
	out := make([]int, 0, n)
	for range n {
		p := take(func(p int) bool {
			l, ok := listenFree(p)
			if ok {
				l.Close()
			}
			return ok
		})
		if p == 0 {
			t.Fatalf("find %d free ports in %d-%d: every port was taken", n, ports.lo, ports.hi)
		}
		out = append(out, p)
	}
	return out
}

// FreePortRange returns the first of n consecutive TCP ports on 127.0.0.1
// that were all free a moment ago (the ports of n replicas: port, port+1,
// ...), outside the ephemeral range and none returned before in this
// process.
func FreePortRange(t testing.TB, n int) int {
	t.Helper()
	base := take(func(p int) bool {
		if p+n-1 > ports.hi {
			return false
		}
		var held []net.Listener
		defer func() {
			for _, l := range held {
				l.Close()
			}
		}()
		for q := p; q < p+n; q++ {
			l, ok := listenFree(q)
			if !ok || ports.handed[q] {
				return false
			}
			held = append(held, l)
		}
		return true
	})
	if base == 0 {
		t.Fatalf("find %d consecutive free ports in %d-%d: every range was taken", n, ports.lo, ports.hi)
	}
	ports.mu.Lock()
	for q := base + 1; q < base+n; q++ {
		ports.handed[q] = true
	}
	ports.mu.Unlock()
	return base
}
