package observe

import (
	"context"
	"net"
	"testing"
)

// BenchmarkPortAcceptingClosed is the look before a spawn at a free port
// (nothing listens: refused on 127.0.0.1 and ::1).
func BenchmarkPortAcceptingClosed(b *testing.B) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	ctx := context.Background()
	for b.Loop() {
		if PortAccepting(ctx, port) {
			b.Fatal("a closed port accepts")
		}
	}
}

// BenchmarkPortAcceptingOpen is a readiness check that passes.
func BenchmarkPortAcceptingOpen(b *testing.B) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			_ = c.Close()
		}
	}()
	port := l.Addr().(*net.TCPAddr).Port
	ctx := context.Background()
	for b.Loop() {
		if !PortAccepting(ctx, port) {
			b.Fatal("an open port does not accept")
		}
	}
}
