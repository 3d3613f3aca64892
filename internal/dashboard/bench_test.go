package dashboard

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/procfleet/procfleet/reconciler"
)

// BenchmarkFleetUpdate is the work of one update of a connected fleet page
// at 100 servers: Snapshot, view (with the graph's layout), render, diff,
// JSON. "one-row" changes one server's restart count (one row is sent);
// "phase" changes its phase too (its row, the graph and the summary).
// Multiplied by the updates a second (at most 1/MinInterval) it is the
// dashboard's CPU per second with one page open; see BenchmarkConnectedPage
// for the whole process measured.
func BenchmarkFleetUpdate(b *testing.B) {
	for _, tc := range []struct {
		name  string
		phase bool
	}{{"one-row", false}, {"phase", true}} {
		b.Run(tc.name, func(b *testing.B) {
			be := newTableBackend(syntheticFleet(100))
			var d differ
			var fr fleetRender
			var buf bytes.Buffer
			d.next(fr.frames(be.Snapshot()))
			b.ReportAllocs()
			c0, _ := cpuTime()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				be.set(func(s *Snapshot) {
					s.Status.Servers[42].Restarts = i + 1
					if tc.phase {
						s.Status.Servers[42].Phase = reconciler.Phase(1 + i%2) // Starting, Running
					}
				})
				p := d.next(fr.frames(be.Snapshot()))
				buf.Reset()
				enc := json.NewEncoder(&buf)
				enc.SetEscapeHTML(false)
				if err := enc.Encode(p); err != nil {
					b.Fatal(err)
				}
				if len(p.Rows) != 1 {
					b.Fatalf("%d rows sent, want 1", len(p.Rows))
				}
			}
			b.StopTimer()
			// CPU time, unlike ns/op, does not grow with the other work
			// of a shared machine.
			c1, _ := cpuTime()
			b.ReportMetric(float64(c1-c0)/float64(b.N), "cpu-ns/op")
		})
	}
}
