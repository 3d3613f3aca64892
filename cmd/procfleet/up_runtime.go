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

// downGCPercent is the Go collector's GOGC for a standalone down: a short
// process whose live heap stays small while it allocates (a down of 100
// servers: ~6 MB in ~53,000 allocations), so a collection once the heap
// has grown by four times its live size. Measured on downs of 100 bench
// workload servers (2 cores, load 20-23, 6 runs each): CPU median 196 ms
// against 176 (GOGC 400 in the environment), peak RSS 28.9 MiB against
// 30.6.
const downGCPercent = 400

// upRuntime sets up's runtime settings and returns what restores them (up
// also runs inside tests). A GOGC in the environment is the user's choice
// and is kept.
func upRuntime() (restore func()) { return gcPercent(upGCPercent) }

// downRuntime is upRuntime for a standalone down.
func downRuntime() (restore func()) { return gcPercent(downGCPercent) }

// gcPercent sets GOGC to percent, unless the environment sets it, and
// returns what restores the value it found.
func gcPercent(percent int) (restore func()) {
	if _, set := os.LookupEnv("GOGC"); set {
		return func() {}
	}
	old := debug.SetGCPercent(percent)
	return func() { debug.SetGCPercent(old) }
}
