package main

import (
	"os"
	"runtime/debug"
)

// upGCPercent is the Go collector's GOGC for up: a collection once the heap
// has grown by half its live size, not by all of it (Go's default, 100).
// Measured on up with 1,000 idle bench workload servers started cold (2
// cores, load 19): resident memory 60.0 MiB (peak 64.5) against 71.9
// (77.1), for 67 collections during the start against 31, and one in the
// minute watched once idle: an idle up allocates little, so the lower goal
// costs its CPU mostly while the fleet starts.
const upGCPercent = 50

// upRuntime sets up's runtime settings and returns what restores them (up
// also runs inside tests). A GOGC in the environment is the user's choice
// and is kept.
func upRuntime() (restore func()) {
	if _, set := os.LookupEnv("GOGC"); set {
		return func() {}
	}
	old := debug.SetGCPercent(upGCPercent)
	return func() { debug.SetGCPercent(old) }
}
