package reconciler

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-logr/logr"
)

// benchFleetYAML is a fleet of n servers as the bench writes it (command,
// args, port), with server target's -gen set to gen.
func benchFleetYAML(n, target, gen int) []byte {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteString("---\n")
		}
		g := 1
		if i == target {
			g = gen
		}
		fmt.Fprintf(&b, "apiVersion: procfleet.dev/v1alpha1\nkind: Server\nmetadata:\n  name: s%03d\nspec:\n", i)
		fmt.Fprintf(&b, "  command: [\"/usr/local/bin/workload\"]\n")
		fmt.Fprintf(&b, "  args: [\"-port\", \"%d\", \"-stamp\", \"/tmp/stamps/s%03d.stamp\", \"-gen\", \"%d\"]\n", 20000+i, i, g)
		fmt.Fprintf(&b, "  port: %d\n", 20000+i)
	}
	return []byte(b.String())
}

// BenchmarkFleetWatcherRead1000 is the watcher's read of a 1,000-server
// fleet file after a save that changed one server's args (the bench's
// edit): each op writes the file (untimed), reads it as a reload does
// (spec.Loader, fingerprints) and names the changed server.
func BenchmarkFleetWatcherRead1000(b *testing.B) {
	const n = 1000
	path := filepath.Join(b.TempDir(), "procfleet.yaml")
	if err := os.WriteFile(path, benchFleetYAML(n, n/2, 1), 0o644); err != nil {
		b.Fatal(err)
	}
	w, err := NewFleetWatcher(FleetWatcherConfig{Paths: []string{path}, Log: logr.Discard()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = w.backend.close() })
	gen := 1
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		gen++
		if err := os.WriteFile(path, benchFleetYAML(n, n/2, gen), 0o644); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		r := w.read()
		if r.errs != nil {
			b.Fatal(r.errs)
		}
		if ch := changedNames(w.prints, r.prints); len(ch) != 1 || ch[0] != fmt.Sprintf("s%03d", n/2) {
			b.Fatalf("changed %v, want s%03d", ch, n/2)
		}
		w.prints = r.prints
	}
}
