package main

import (
	"os"
	"runtime/debug"
	"testing"
)

// up and a standalone down run with their GC percent and restore the GOGC
// they found, unless GOGC is in the environment.
func TestRuntimeSetsGCAndRestoresIt(t *testing.T) {
	for _, c := range []struct {
		name    string
		set     func() func()
		percent int
	}{{"up", upRuntime, upGCPercent}, {"down", downRuntime, downGCPercent}} {
		t.Run(c.name, func(t *testing.T) {
			before := debug.SetGCPercent(-1)
			debug.SetGCPercent(before)
			t.Cleanup(func() { debug.SetGCPercent(before) })

			t.Setenv("GOGC", "") // restored after the test
			restore := c.set()
			if cur := debug.SetGCPercent(before); cur != before {
				t.Fatalf("with GOGC in the environment %s set GOGC %d", c.name, cur)
			}
			restore()

			if err := os.Unsetenv("GOGC"); err != nil {
				t.Fatal(err)
			}
			restore = c.set()
			cur := debug.SetGCPercent(c.percent)
			restore()
			if cur != c.percent {
				t.Fatalf("%s runs with GOGC %d, want %d", c.name, cur, c.percent)
			}
			if after := debug.SetGCPercent(before); after != before {
				t.Fatalf("GOGC %d left after %s, want %d back", after, c.name, before)
			}
		})
	}
}
