package actuate

import (
	"context"
	"net"
	"os"
	"slices"
	"sync"
	"testing"
)

// TestPortHolderShared asks about held and free ports from many starts at
// once: each gets what observe.HolderOf says of its port.
func TestPortHolderShared(t *testing.T) {
	var held, free []int
	for range 4 {
		l, err := net.Listen("tcp4", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = l.Close() })
		held = append(held, l.Addr().(*net.TCPAddr).Port)
	}
	for range 4 {
		l, err := net.Listen("tcp4", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		free = append(free, l.Addr().(*net.TCPAddr).Port)
		_ = l.Close()
	}
	ctx := context.Background()
	var wg sync.WaitGroup
	for range 3 {
		for _, p := range slices.Concat(held, free) {
			wg.Go(func() {
				h := portHolder(ctx, p)
				switch {
				case slices.Contains(held, p) && h == nil:
					t.Errorf("port %d is listened on, but no holder was found", p)
				case slices.Contains(held, p) && !slices.Contains(h.PIDs, os.Getpid()) && h.Visible:
					t.Errorf("port %d: holder %s, want this test's pid", p, h)
				case slices.Contains(free, p) && h != nil:
					t.Errorf("port %d is free, but held by %s", p, h)
				}
			})
		}
	}
	wg.Wait()
}
