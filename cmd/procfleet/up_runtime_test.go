package main

import (
	"os"
	"runtime/debug"
	"testing"
)

// up runs with upGCPercent and restores the GOGC it found, unless GOGC is
// in the environment.
func TestUpRuntimeSetsGCAndRestoresIt(t *testing.T) {
	before := debug.SetGCPercent(-1)
	debug.SetGCPercent(before)
	t.Cleanup(func() { debug.SetGCPercent(before) })

	t.Setenv("GOGC", "") // restored after the test
	restore := upRuntime()
	if cur := debug.SetGCPercent(before); cur != before {
		t.Fatalf("with GOGC in the environment up set GOGC %d", cur)
	}
	restore()

	if err := os.Unsetenv("GOGC"); err != nil {
		t.Fatal(err)
	}
	restore = upRuntime()
	cur := debug.SetGCPercent(upGCPercent)
	restore()
	if cur != upGCPercent {
		t.Fatalf("up runs with GOGC %d, want %d", cur, upGCPercent)
	}
	if after := debug.SetGCPercent(before); after != before {
		t.Fatalf("GOGC %d left after up, want %d back", after, before)
	}
}
