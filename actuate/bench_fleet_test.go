package actuate

import (
	"context"
	"fmt"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
)

// BenchmarkStopFleet stops n servers at once (each a sleep that ends on
// SIGTERM, no port), the way down stops a fleet, in each membership mode;
// the starts are not timed. It reports the stop of the whole fleet
// (stop-ms/fleet) and the CPU time procfleet's side used for it
// (cpu-ms/fleet, which a loaded machine disturbs far less);
// BenchmarkStopFloor is the floor to compare with.
func BenchmarkStopFleet(b *testing.B) {
	for _, mode := range []MembershipMode{MembershipCgroup, MembershipSession} {
		for _, n := range []int{100, 1000} {
			b.Run(fmt.Sprintf("%s/n=%d", mode, n), func(b *testing.B) {
				if mode == MembershipSession {
					b.Setenv(CgroupEnv, "off")
				} else if m := (&StateDir{Path: b.TempDir()}).Membership(); m.Mode != MembershipCgroup {
					b.Skip(m.Why)
				}
				benchStopFleet(b, n)
			})
		}
	}
}

func benchStopFleet(b *testing.B, n int) {
	d, err := OpenStateDir(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	a := &Actuator{Dir: d, Log: logr.Discard()}
	ctx := context.Background()
	var total, cpu time.Duration
	for b.Loop() {
		b.StopTimer()
		rs := startSleeps(b, a, n)
		b.StartTimer()
		c0 := cpuTime()
		t0 := time.Now()
		var wg sync.WaitGroup
		for _, r := range rs {
			wg.Go(func() {
				if err := a.Stop(ctx, r.Record, StopOptions{}); err != nil {
					b.Error(err)
				}
			})
		}
		wg.Wait()
		total += time.Since(t0)
		cpu += cpuTime() - c0
		b.StopTimer()
		for _, r := range rs {
			_ = r.Handle.Close()
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(total.Microseconds())/float64(b.N)/1000, "stop-ms/fleet")
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N)/1000, "cpu-ms/fleet")
}

// cpuTime is the CPU time (user and system) this process has used: what
// a stop costs procfleet, whatever else loads the machine.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// startSleeps starts n port-less servers (sleep 1000) in parallel, 16 at a
// time.
func startSleeps(b *testing.B, a *Actuator, n int) []*Running {
	b.Helper()
	rs := make([]*Running, n)
	sem := make(chan struct{}, 16)
	var wg sync.WaitGroup
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			r, err := a.Spawn(context.Background(), StartRequest{Name: fmt.Sprintf("s%d", i), Argv: []string{"sleep", "1000"}})
			if err != nil {
				b.Error(err)
				return
			}
			rs[i] = r
		})
	}
	wg.Wait()
	if b.Failed() {
		for _, r := range rs {
			if r != nil {
				_ = r.Handle.Signal(9)
			}
		}
		b.FailNow()
	}
	return rs
}

// BenchmarkStopFloor is the floor of BenchmarkStopFleet: n sleeps started
// directly, then kill -TERM of every pid and a wait for each.
func BenchmarkStopFloor(b *testing.B) {
	for _, n := range []int{100, 1000} {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			var total time.Duration
			for b.Loop() {
				b.StopTimer()
				cmds := make([]*exec.Cmd, n)
				for i := range cmds {
					cmds[i] = exec.Command("sleep", "1000")
					cmds[i].SysProcAttr = &syscall.SysProcAttr{Setsid: true}
					if err := cmds[i].Start(); err != nil {
						b.Fatal(err)
					}
				}
				b.StartTimer()
				t0 := time.Now()
				for _, c := range cmds {
					_ = c.Process.Signal(syscall.SIGTERM)
				}
				for _, c := range cmds {
					_ = c.Wait()
				}
				total += time.Since(t0)
			}
			b.ReportMetric(float64(total.Microseconds())/float64(b.N)/1000, "stop-ms/fleet")
		})
	}
}
