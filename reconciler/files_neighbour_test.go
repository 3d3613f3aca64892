//go:build unix

package reconciler

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
)

// neighbourWriterEnv, set in a child of the test binary, makes
// TestHelperNeighbourWriter a log writer: "PATH,BYTES_PER_SECOND". It
// appends 256-byte lines to PATH at that rate, one write each (a logger
// that flushes every line), and prints a byte on stdout after every
// second's worth, until it is killed.
const neighbourWriterEnv = "PROCFLEET_TEST_NEIGHBOUR_WRITER"

// TestHelperNeighbourWriter is not a test: it is the busy neighbour of the
// fleet file, run in a child process (the os/exec TestHelperProcess
// pattern) so that its own CPU is not counted as the watcher's.
func TestHelperNeighbourWriter(t *testing.T) {
	arg := os.Getenv(neighbourWriterEnv)
	if arg == "" {
		return
	}
	path, rateText, _ := strings.Cut(arg, ",")
	rate, err := strconv.Atoi(rateText)
	if err != nil || rate <= 0 {
		fmt.Fprintf(os.Stderr, "bad %s=%q\n", neighbourWriterEnv, arg)
		os.Exit(2)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	line := []byte(strings.Repeat("x", 255) + "\n")
	start := time.Now()
	written, reported := 0, 0
	for {
		due := int(time.Since(start).Seconds() * float64(rate))
		for written+len(line) <= due {
			if _, err := f.Write(line); err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(2)
			}
			written += len(line)
		}
		for ; written/rate > reported; reported++ {
			if _, err := os.Stdout.Write([]byte{'.'}); err != nil {
				os.Exit(0) // the benchmark has gone
			}
		}
		time.Sleep(time.Millisecond) // the writer's pacing, not a wait
	}
}

// startNeighbourWriter starts the busy neighbour writing path at rate bytes
// a second and returns a reader that yields a byte after each second's
// worth. The child is killed and reaped in Cleanup.
func startNeighbourWriter(b *testing.B, path string, rate int) *bufio.Reader {
	b.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperNeighbourWriter$")
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s,%d", neighbourWriterEnv, path, rate))
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return bufio.NewReader(out)
}

// cpuTime is the CPU time (user and system) this process has used.
func cpuTime(b *testing.B) time.Duration {
	b.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkFleetWatcherBusyNeighbour measures what a log file written at
// 3 MB/s beside the fleet file costs the watcher: the CPU this process uses
// (the writer is a child, not counted) while the neighbour writes one
// second's worth, per op. "native" is the platform's watch, "portable"
// fsnotify forced (the same where there is no other), "idle" no watcher:
// the test binary's own floor. Reported as cpu-ms/op and %core (CPU over
// wall time).
func BenchmarkFleetWatcherBusyNeighbour(b *testing.B) {
	const rate = 3 << 20 // bytes a second
	for _, mode := range []string{"native", "portable", "idle"} {
		b.Run(mode, func(b *testing.B) {
			dir := b.TempDir()
			main := filepath.Join(dir, "procfleet.yaml")
			if err := os.WriteFile(main, []byte(fleetYAML(serverYAML("api", "1"))), 0o644); err != nil {
				b.Fatal(err)
			}
			if mode != "idle" {
				w, err := NewFleetWatcher(FleetWatcherConfig{Paths: []string{main}, Log: logr.Discard(), portable: mode == "portable"})
				if err != nil {
					b.Fatal(err)
				}
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan error, 1)
				go func() { done <- w.Run(ctx, func(FleetUpdate) {}) }()
				b.Cleanup(func() {
					cancel()
					if err := <-done; err != nil {
						b.Errorf("Run: %v", err)
					}
				})
			}
			ticks := startNeighbourWriter(b, filepath.Join(dir, "app.log"), rate)
			if _, err := ticks.ReadByte(); err != nil { // the writer is running
				b.Fatal(err)
			}
			cpu0, wall0 := cpuTime(b), time.Now()
			for b.Loop() {
				if _, err := ticks.ReadByte(); err != nil {
					b.Fatal(err)
				}
			}
			cpu, wall := cpuTime(b)-cpu0, time.Since(wall0)
			b.ReportMetric(float64(cpu.Microseconds())/1000/float64(b.N), "cpu-ms/op")
			b.ReportMetric(100*cpu.Seconds()/wall.Seconds(), "%core")
		})
	}
}
