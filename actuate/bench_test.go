package actuate

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"

	"github.com/procfleet/procfleet/internal/testserver"
)

// BenchmarkStartStop is one server (the stand-alone test server binary)
// started until its port accepts, then stopped with SIGTERM and its port
// verified free.
func BenchmarkStartStop(b *testing.B) {
	bin := testserver.Build(b)
	d, err := OpenStateDir(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	a := &Actuator{Dir: d, Log: logr.Discard()}
	ctx := context.Background()
	for b.Loop() {
		port := testserver.FreePort(b)
		r, err := a.Start(ctx, StartRequest{Name: "api", Argv: []string{bin, "-port", itoa(port)}, Port: port, StartupTimeout: 30 * time.Second})
		if err != nil {
			b.Fatal(err)
		}
		if err := a.Stop(ctx, r.Record, StopOptions{}); err != nil {
			b.Fatal(err)
		}
		_ = r.Handle.Close()
	}
}

// BenchmarkStopParallel50 stops 50 running servers at once (each exits on
// SIGTERM), ports verified free; the start is not timed.
func BenchmarkStopParallel50(b *testing.B) {
	const n = 50
	bin := testserver.Build(b)
	d, err := OpenStateDir(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	a := &Actuator{Dir: d, Log: logr.Discard()}
	ctx := context.Background()
	for b.Loop() {
		b.StopTimer()
		rs := make([]*Running, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				port := testserver.FreePort(b)
				r, err := a.Start(ctx, StartRequest{Name: "s" + itoa(i), Argv: []string{bin, "-port", itoa(port)}, Port: port, StartupTimeout: 30 * time.Second})
				if err != nil {
					b.Error(err)
					return
				}
				rs[i] = r
			})
		}
		wg.Wait()
		b.StartTimer()
		for _, r := range rs {
			if r == nil {
				continue
			}
			wg.Go(func() {
				if err := a.Stop(ctx, r.Record, StopOptions{}); err != nil {
					b.Error(err)
				}
				_ = r.Handle.Close()
			})
		}
		wg.Wait()
	}
}
