package reconciler

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/procfleet/procfleet/internal/logfile"
)

// TestLogsRotated: Run rotates a log over Config.LogRotation's limit as it
// starts (a log left by an earlier run) and on a periodic resync (a log
// that grew while it ran); the server keeps writing to its live log.
func TestLogsRotated(t *testing.T) {
	const limit = 1024
	big := strings.Repeat("x", 2*limit)
	tests := []struct {
		name string
		// before is written to the log before Run starts ("" for none).
		before string
		// print is what the server writes to its log at start.
		print  string
		resync time.Duration
		// want is what the newest rotated copy holds.
		want string
	}{
		{name: "at start", before: big + "\n", print: "after", resync: -1, want: big},
		{name: "on resync", print: big, resync: 20 * time.Millisecond, want: big},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newTestFleet(t)
			f.add(&testSpec{name: "a", args: []string{"-print", tt.print}})
			f.write()
			log := f.state.LogPath("a")
			if tt.before != "" {
				if err := os.WriteFile(log, []byte(tt.before), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			rr := f.run(t, func(c *Config) {
				c.ResyncPeriod = tt.resync
				c.LogRotation = logfile.Options{MaxBytes: limit}
			})
			waitStatus(t, rr.r, "ready", allReady("a"))
			waitFileHolds(t, logfile.RotatedPath(log, 1), tt.want)
			if tt.before != "" {
				// The server, started after the rotation, wrote to the
				// emptied live log.
				waitFileHolds(t, log, tt.print)
			}
			live, err := os.ReadFile(log)
			if err != nil {
				t.Fatal(err)
			}
			if int64(len(live)) >= limit {
				t.Errorf("live log still %d bytes after rotation, limit %d", len(live), limit)
			}
		})
	}
}

// waitFileHolds waits (bounded) until the file at path contains want.
func waitFileHolds(t *testing.T, path, want string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		got, err := os.ReadFile(path)
		if err == nil && strings.Contains(string(got), want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never held %.20q... (read: %v, %d bytes)", path, want, err, len(got))
		}
		time.Sleep(5 * time.Millisecond)
	}
}
