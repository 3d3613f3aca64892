package reconciler

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/procfleet/procfleet/observe"
)

// BenchmarkResync1000 is what `up` does every resync period while 1,000
// Ready servers idle, and nothing else wakes it: look after the logs
// folder (rotate the logs that are due, remove those of servers gone for a
// week: tendLogs), list the servers (their records among them), and look at the exit
// of each server at rest (enqueueResync), which passes none. Every server
// is tracked (its process pinned) and has a record, a log and an events
// file, as under up; the processes are all this benchmark's own. cpu-ms/op is the
// process's CPU for one resync, the figure DESIGN.md's idle target (20 ms
// per 30 s at 1,000) is made of.
func BenchmarkResync1000(b *testing.B) { benchResync(b, true) }

// BenchmarkResyncPasses1000 is a look at every server (a pass each), as
// the resync did before it left the servers at rest alone, and as a
// reload or a change of the fleet files still does.
func BenchmarkResyncPasses1000(b *testing.B) { benchResync(b, false) }

func benchResync(b *testing.B, rest bool) {
	r, sd, names := benchFleet(b, benchServers)
	if err := r.setup(); err != nil {
		b.Fatal(err)
	}
	self := os.Getpid()
	for _, n := range names {
		d := r.desired[n]
		rec := ownRecord(b, n, self, d.Server.Spec.Port, d.Hash)
		if err := sd.WriteRecord(rec); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(sd.LogPath(n), []byte("listening\n"), 0o600); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(sd.EventsPath(n), []byte("{}\n"), 0o600); err != nil {
			b.Fatal(err)
		}
		h, err := observe.Pin(self)
		if err != nil {
			b.Fatal(err)
		}
		s := r.serverLocked(n)
		s.tracked = &tracked{rec: rec, handle: h, spec: d.Server.Spec}
		s.st.phase, s.st.reason, s.st.isReady, s.st.pid = PhaseRunning, "ready", true, self
	}
	ctx, cancel := context.WithCancel(context.Background())
	workers := r.startWorkers(ctx)
	b.Cleanup(func() {
		cancel()
		r.teardown(workers) // closes every pin
	})
	resync := func() {
		done := counted(r, &r.passes, uint64(len(names)))
		r.tendLogs(r.keepCheck())
		r.enqueueAll()
		waitOnChanges(b, r, time.Minute, "the resync's passes", done)
	}
	resync() // the first one reads every record, as up's first pass does
	r.mu.Lock()
	passes := r.passes
	r.mu.Unlock()
	var cpu cpuMeter
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		cpu.start()
		if rest {
			r.tendLogs(r.keepCheck())
			r.enqueueResync()
		} else {
			resync()
		}
		cpu.stop()
	}
	b.StopTimer()
	cpu.report(b)
	r.mu.Lock()
	passed := r.passes - passes
	r.mu.Unlock()
	if rest && passed > 0 {
		b.Fatalf("%d passes during the resyncs, want none: the servers were not at rest", passed)
	}
	for _, n := range names {
		if s := r.servers[n]; s.st.phase != PhaseRunning || s.tracked == nil {
			b.Fatalf("%s: phase %s after the resyncs, want Running and tracked", n, s.st.phase)
		}
	}
	if recs, errs := sd.Records(); len(recs) != len(names) || len(errs) > 0 {
		b.Fatalf("%d records after the resyncs (errors %v), want %d", len(recs), errs, len(names))
	}
}
