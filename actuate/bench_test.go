package actuate

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"

	"github.com/procfleet/procfleet/internal/testserver"
)

// BenchmarkStartStop is one server (the stand-alone test server binary)
// started until its port accepts, then stopped with SIGTERM and its port
// verified free; it reports the phases: Spawn (port check, exec, pins,
// identity, record with two fsyncs), WaitReady, Stop.
func BenchmarkStartStop(b *testing.B) {
	bin := testserver.Build(b)
	d, err := OpenStateDir(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	a := &Actuator{Dir: d, Log: logr.Discard()}
	ctx := context.Background()
	var spawn, ready, stop time.Duration
	for b.Loop() {
		port := testserver.FreePort(b)
		req := StartRequest{Name: "api", Argv: []string{bin, "-port", itoa(port)}, Port: port, StartupTimeout: 30 * time.Second}
		t0 := time.Now()
		r, err := a.Spawn(ctx, req)
		if err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if err := a.WaitReady(ctx, req, r); err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		if err := a.Stop(ctx, r.Record, StopOptions{}); err != nil {
			b.Fatal(err)
		}
		t3 := time.Now()
		spawn += t1.Sub(t0)
		ready += t2.Sub(t1)
		stop += t3.Sub(t2)
		_ = r.Handle.Close()
	}
	n := float64(b.N)
	b.ReportMetric(float64(spawn.Microseconds())/n/1000, "spawn-ms/op")
	b.ReportMetric(float64(ready.Microseconds())/n/1000, "ready-ms/op")
	b.ReportMetric(float64(stop.Microseconds())/n/1000, "stop-ms/op")
}

// BenchmarkWriteRecord is one atomic record write (two fsyncs).
func BenchmarkWriteRecord(b *testing.B) {
	d, err := OpenStateDir(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if err := d.WriteRecord(Record{Name: "api", PID: 1, PGID: 1, StartTime: 1, BootID: "b"}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRecordFleetCycle1000 is what the records of a fleet of 1,000
// cost through a stop and a start of the fleet: 1,000 records removed,
// then for each server an intent record and the full record over it (one
// op is the whole cycle). On ext4 without a journal an inode allocation
// scans past the inodes its group freed in the last 30 s; with spares
// none is allocated or freed.
func BenchmarkRecordFleetCycle1000(b *testing.B) {
	d, err := OpenStateDir(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	names := make([]string, 1000)
	for i := range names {
		names[i] = fmt.Sprintf("s%d", i)
	}
	for b.Loop() {
		for _, n := range names {
			if err := d.RemoveRecord(n); err != nil {
				b.Fatal(err)
			}
		}
		for _, n := range names {
			if err := d.writeIntent(Record{Version: 2, Name: n, Instance: newToken(), Port: 8080}); err != nil {
				b.Fatal(err)
			}
			if err := d.WriteRecord(Record{Version: 2, Name: n, PID: 1, PGID: 1, StartTime: 1, BootID: "b", Port: 8080}); err != nil {
				b.Fatal(err)
			}
		}
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
		// Ports first: a FreePorts probe running beside a start could take
		// that start's port for a moment (a real, if brief, conflict).
		ports := testserver.FreePorts(b, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				port := ports[i]
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
