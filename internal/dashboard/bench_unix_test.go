//go:build unix

package dashboard

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime/pprof"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/procfleet/procfleet/internal/dashboard/browsertest"
	"github.com/procfleet/procfleet/reconciler"
)

// benchServeEnv makes the test binary serve a dashboard for
// BenchmarkConnectedPage (see benchServe).
const benchServeEnv = "DASHBOARD_BENCH_SERVE"

// cpuTime is the CPU time (user and system) this process has used.
func cpuTime() (time.Duration, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, err
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}

// benchChange is how often the fleet of BenchmarkConnectedPage changes:
// four times as often as a page may be updated, so every update
// (DefaultMinInterval apart) has a change to send.
const benchChange = DefaultMinInterval / 4

// benchServe runs in a child process: a dashboard on 127.0.0.1 over a
// 100-server table fleet that changes every benchChange ("restarts": a
// restart count; "phases": a phase too, which redraws a graph node), or
// never ("steady"). It prints "url URL", then
// for each "window" line read from in it measures its own CPU over one
// second and prints "cpu NANOSECONDS STREAMS". It returns at the end of in.
func benchServe(mode string, in io.Reader, out io.Writer) int {
	be := newTableBackend(syntheticFleet(100))
	d, err := New(Config{Backend: be})
	if err != nil {
		fmt.Fprintln(out, "error", err)
		return 1
	}
	l, err := Listen("127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(out, "error", err)
		return 1
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = d.Serve(ctx, l) }()
	go func() {
		if mode == "steady" {
			return // a fleet at rest: nothing changes
		}
		tick := time.NewTicker(benchChange)
		defer tick.Stop()
		for i := 0; ctx.Err() == nil; i++ {
			<-tick.C
			be.set(func(s *Snapshot) {
				st := &s.Status.Servers[i%100]
				st.Restarts++
				if mode == "phases" {
					st.Phase = reconciler.Phase(1 + i%2) // Starting, Running
				}
			})
		}
	}()
	if path := os.Getenv("DASHBOARD_BENCH_PROFILE"); path != "" {
		f, err := os.Create(path)
		if err == nil && pprof.StartCPUProfile(f) == nil {
			defer func() { pprof.StopCPUProfile(); f.Close() }()
		}
	}
	fmt.Fprintln(out, "url", d.URL(l.Addr()))
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		c0, err := cpuTime()
		if err != nil {
			fmt.Fprintln(out, "error", err)
			return 1
		}
		time.Sleep(time.Second) // the measurement window
		c1, _ := cpuTime()
		fmt.Fprintln(out, "cpu", int64(c1-c0), len(d.streams))
	}
	return 0
}

// BenchmarkConnectedPage measures what the dashboard costs the process
// that serves it at 100 servers. The server is a child process (so that
// neither the browser's driver nor the test counts). "steady" is a fleet
// at rest, as a fleet of healthy servers is; "restarts" and "phases" one
// that changes every benchChange, far busier than a real one, so that a
// connected page gets an update every MinInterval: the worst case. It
// reports the child's CPU per second of wall time with no page open
// ("idle-cpu-ms/s": the fleet's changes alone, measured before the page
// opens and after it closes; the dashboard itself then does nothing, see
// TestNoPageNoCost), with one fleet page open in headless Chromium
// ("page-cpu-ms/s"), and the difference ("dashboard-cpu-ms/s"). Each
// iteration is a one-second window: run it with -benchtime=30x.
// DASHBOARD_BENCH_PROFILE=FILE writes the child's CPU profile to FILE.
func BenchmarkConnectedPage(b *testing.B) {
	for _, mode := range []string{"steady", "restarts", "phases"} {
		b.Run(mode, func(b *testing.B) {
			self, err := os.Executable()
			if err != nil {
				b.Fatal(err)
			}
			cmd := exec.Command(self)
			cmd.Env = append(os.Environ(), benchServeEnv+"="+mode)
			stdin, _ := cmd.StdinPipe()
			stdout, _ := cmd.StdoutPipe()
			if err := cmd.Start(); err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() {
				// The end of its input ends the child (and writes its
				// profile); a kill makes sure of it.
				_ = stdin.Close()
				exited := make(chan struct{})
				go func() { _ = cmd.Wait(); close(exited) }()
				select {
				case <-exited:
				case <-time.After(10 * time.Second):
					_ = cmd.Process.Kill()
					<-exited
				}
			})
			lines := bufio.NewScanner(stdout)
			read := func() []string {
				if !lines.Scan() {
					b.Fatalf("the dashboard process ended: %v", lines.Err())
				}
				f := strings.Fields(lines.Text())
				if len(f) == 0 || f[0] == "error" {
					b.Fatalf("the dashboard process: %s", lines.Text())
				}
				return f
			}
			url := read()[1]
			window := func(wantStreams int) time.Duration {
				if _, err := io.WriteString(stdin, "window\n"); err != nil {
					b.Fatal(err)
				}
				f := read()
				var ns int64
				var streams int
				if _, err := fmt.Sscan(f[1]+" "+f[2], &ns, &streams); err != nil {
					b.Fatal(err)
				}
				if streams != wantStreams {
					b.Fatalf("%d pages connected during a window, want %d", streams, wantStreams)
				}
				return time.Duration(ns)
			}
			const idleWindows = 10 // before the page, and as many after
			var idle time.Duration
			for range idleWindows {
				idle += window(0)
			}

			bctx := browsertest.New(b, 1280, 900)
			if err := chromedp.Do(bctx, chromedp.Navigate(url)); err != nil {
				b.Fatal(err)
			}
			browsertest.WaitJS(b, bctx, "page live", `document.getElementById("live").dataset.state === "live"`)
			var page time.Duration
			b.ResetTimer()
			for range b.N {
				page += window(1)
			}
			b.StopTimer()
			if err := chromedp.Do(bctx, chromedp.Navigate("about:blank")); err != nil {
				b.Fatal(err)
			}
			waitClosed := time.Now().Add(browsertest.Wait)
			for {
				if _, err := io.WriteString(stdin, "window\n"); err != nil {
					b.Fatal(err)
				}
				f := read()
				if f[2] == "0" {
					break // a window with the page half gone does not count
				}
				if time.Now().After(waitClosed) {
					b.Fatal("the page's stream did not end")
				}
			}
			for range idleWindows {
				idle += window(0)
			}
			ms := func(d time.Duration, n int) float64 { return float64(d) / float64(time.Millisecond) / float64(n) }
			b.ReportMetric(0, "ns/op")
			b.ReportMetric(ms(idle, 2*idleWindows), "idle-cpu-ms/s")
			b.ReportMetric(ms(page, b.N), "page-cpu-ms/s")
			b.ReportMetric(ms(page, b.N)-ms(idle, 2*idleWindows), "dashboard-cpu-ms/s")
		})
	}
}
