package main

import (
	"os"
	"runtime/debug"
)

// upGCPercent is the Go collector's GOGC for up: a collection once the heap
// has grown by a fifth of its live size (Go's default, 100, lets it
// double). up's peak resident set is set by its cold start: at 1,000
// servers the live heap peaks near 12 MB while they start, and the pages
// the heap reached then stay resident. Measured with `go run ./bench
// -scenarios idle -fleet 1000` (2 cores, load 12-28, one run each): VmHWM
// 39.4 MiB at GOGC 20, 40.2 and 40.6 at 25, 44.3 (twice) at 50. Hand-run
// cold starts of 1,000 bench workload servers with gctrace: 97 collections
// in the start at GOGC 20, 83-86 at 25, 52-56 at 50, and none in 20 s of
// idle after it at any of them. A soft memory limit costs idle CPU: at 25.6 MiB
// (bench peak 38.1 MiB) the idle heap with the runtime's own memory sits at
// the limit, and was collected 3 times in 20 s of idle.
const upGCPercent = 20

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
