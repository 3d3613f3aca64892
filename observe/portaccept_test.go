package observe

import (
	"context"
	"net"
	"testing"
)

// PortAccepting sees a listener on either loopback address, none on a
// closed port, and nothing once its context is cancelled.
func TestPortAcceptingFamilies(t *testing.T) {
	listen := func(t *testing.T, network, addr string) int {
		t.Helper()
		l, err := net.Listen(network, addr)
		if err != nil {
			t.Skipf("cannot listen on %s: %v", addr, err)
		}
		t.Cleanup(func() { _ = l.Close() })
		return l.Addr().(*net.TCPAddr).Port
	}
	closed := func(t *testing.T) int {
		t.Helper()
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		_ = l.Close()
		return port
	}
	tests := []struct {
		name string
		port func(t *testing.T) int
		want bool
	}{
		{"IPv4 loopback", func(t *testing.T) int { return listen(t, "tcp4", "127.0.0.1:0") }, true},
		{"IPv6 loopback only", func(t *testing.T) int { return listen(t, "tcp6", "[::1]:0") }, true},
		{"closed", closed, false},
		{"port 0", func(*testing.T) int { return 0 }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			port := tt.port(t)
			if got := PortAccepting(context.Background(), port); got != tt.want {
				t.Errorf("PortAccepting(%d) = %v, want %v", port, got, tt.want)
			}
		})
	}
	t.Run("cancelled", func(t *testing.T) {
		port := listen(t, "tcp4", "127.0.0.1:0")
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if PortAccepting(ctx, port) {
			t.Error("PortAccepting with a cancelled context = true")
		}
	})
}
