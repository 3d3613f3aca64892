package reconciler

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"

	"github.com/procfleet/procfleet/actuate"
	"github.com/procfleet/procfleet/internal/testserver"
	"github.com/procfleet/procfleet/observe"
	"github.com/procfleet/procfleet/spec"
)

const benchServers = 1000

// benchFleet declares n servers and returns a reconciler over a fresh state
// folder.
func benchFleet(b *testing.B, n int) (*Reconciler, *actuate.StateDir, []string) {
	b.Helper()
	sd := benchStateDir(b)
	r, err := New(Config{StateDir: sd, Log: logr.Discard()})
	if err != nil {
		b.Fatal(err)
	}
	fleet := &spec.Fleet{}
	names := make([]string, n)
	for i := range n {
		names[i] = fmt.Sprintf("srv-%04d", i)
		s := spec.Server{APIVersion: spec.APIVersion, Kind: spec.Kind, Metadata: spec.ObjectMeta{Name: names[i]},
			Spec: spec.ServerSpec{Command: []string{"/bin/srv"}, Args: []string{"-port", fmt.Sprint(20000 + i)}, Port: 20000 + i}}
		spec.SetDefaults(&s)
		fleet.Servers = append(fleet.Servers, s)
	}
	r.setDesired(fleet, nil)
	return r, sd, names
}

// BenchmarkReconcilePass1000 is one resync pass over 1,000 declared, running,
// tracked servers: for each, observe (a non-blocking pidfd poll of its
// pinned process, the in-memory state) and plan, then apply "nothing". The
// processes are all this benchmark's own process, pinned 1,000 times.
// DESIGN.md's target is under 10 ms per pass; cpu-ms/op is its CPU, the
// figure a loaded machine changes least.
func BenchmarkReconcilePass1000(b *testing.B) { benchPass(b, false) }

// BenchmarkReconcilePass1000Held is the same pass while one other server
// is held (stopped by stop or down NAME).
func BenchmarkReconcilePass1000Held(b *testing.B) { benchPass(b, true) }

func benchPass(b *testing.B, held bool) {
	r, _, names := benchFleet(b, benchServers)
	if held {
		r.keepLocked([]string{"srv-held"}, false, time.Time{})
	}
	self := os.Getpid()
	for _, n := range names {
		h, err := observe.Pin(self)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = h.Close() })
		d := r.desired[n]
		s := r.serverLocked(n)
		s.tracked = &tracked{rec: actuate.Record{Name: n, PID: self, SpecHash: d.Hash, Port: d.Server.Spec.Port}, handle: h, spec: d.Server.Spec}
		s.st.phase, s.st.reason, s.st.isReady, s.st.pid = PhaseRunning, "ready", true, self
	}
	ctx := context.Background()
	var cpu cpuMeter
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		cpu.start()
		for _, n := range names {
			if _, err := r.reconcile(ctx, n); err != nil {
				b.Fatal(err)
			}
		}
		cpu.stop()
	}
	b.StopTimer()
	cpu.report(b)
	for _, n := range names {
		if s := r.servers[n]; s.st.phase != PhaseRunning {
			b.Fatalf("%s: phase %s after the pass, want Running", n, s.st.phase)
		}
	}
}

// BenchmarkAdoptionPass1000 is the first pass of a restarted reconciler over
// 1,000 records: read and trust-check each record file, pin its process,
// read its identity, decide ownership (Verify), and plan (Adopt). The
// records all describe this benchmark's own process.
func BenchmarkAdoptionPass1000(b *testing.B) {
	r, sd, names := benchFleet(b, benchServers)
	self := os.Getpid()
	for _, n := range names {
		d := r.desired[n]
		rec := ownRecord(b, n, self, d.Server.Spec.Port, d.Hash)
		if err := sd.WriteRecord(rec); err != nil {
			b.Fatal(err)
		}
	}
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		for _, n := range names {
			s := r.serverLocked(n)
			d := r.desired[n]
			ob, err := r.observe(ctx, s, d)
			if err != nil {
				b.Fatal(err)
			}
			a := PlanServer(n, r.desired, r.observedFor(n, ob.obs, r.desired, true))
			if a.Kind != ActionAdopt {
				b.Fatalf("%s: planned %s (%s), want Adopt", n, a.Kind, a.Reason)
			}
			closeHandle(&ob)
		}
	}
}

// coldStartFleet writes a fleet of n test-server binaries on free ports.
func coldStartFleet(b *testing.B, n int) (file string, ports []int, bin string) {
	b.Helper()
	bin = testserver.Build(b)
	dir := b.TempDir()
	var sb strings.Builder
	ports = testserver.FreePorts(b, n)
	for i, port := range ports {
		if i > 0 {
			sb.WriteString("---\n")
		}
		fmt.Fprintf(&sb, "apiVersion: procfleet.dev/v1alpha1\nkind: Server\nmetadata: {name: s%03d}\nspec:\n  command: [%q, -port, %q]\n  port: %d\n", i, bin, strconv.Itoa(port), port)
	}
	file = filepath.Join(dir, "procfleet.yaml")
	if err := os.WriteFile(file, []byte(sb.String()), 0o644); err != nil {
		b.Fatal(err)
	}
	return file, ports, bin
}

// BenchmarkColdStart100 is `apply --wait` of 100 small servers: from
// nothing to all Ready (then they are stopped, outside the timer). Compare
// with BenchmarkColdStart100Direct, the floor (DESIGN.md: within 1.2x).
func BenchmarkColdStart100(b *testing.B) {
	for b.Loop() {
		b.StopTimer()
		// Fresh ports each time: on a busy machine a port used a moment
		// ago may be taken by someone's outgoing connection.
		file, _, _ := coldStartFleet(b, 100)
		sd := benchStateDir(b)
		r, err := New(Config{Files: []string{file}, StateDir: sd, Log: logr.Discard(), OneShot: true})
		if err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		b.StartTimer()
		_, err = r.Converge(ctx, ConvergeOptions{Wait: true})
		b.StopTimer()
		cancel()
		if derr := Down(context.Background(), DownConfig{Files: []string{file}, StateDir: sd, Log: logr.Discard()}, nil); derr != nil {
			b.Fatal(derr)
		}
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}

// BenchmarkColdStart100Direct starts the same 100 servers directly, in
// parallel, and waits until every port accepts: the floor.
func BenchmarkColdStart100Direct(b *testing.B) {
	for b.Loop() {
		b.StopTimer()
		_, ports, bin := coldStartFleet(b, 100)
		b.StartTimer()
		cmds := make([]*exec.Cmd, len(ports))
		var wg sync.WaitGroup
		for i, port := range ports {
			wg.Go(func() {
				c := exec.Command(bin, "-port", strconv.Itoa(port))
				if err := c.Start(); err != nil {
					b.Error(err)
					return
				}
				cmds[i] = c
				deadline := time.Now().Add(time.Minute)
				for !observe.PortAccepting(context.Background(), port) {
					if time.Now().After(deadline) {
						b.Error("not ready")
						return
					}
					time.Sleep(time.Millisecond)
				}
			})
		}
		wg.Wait()
		b.StopTimer()
		for _, c := range cmds {
			if c != nil {
				_ = c.Process.Kill()
				_ = c.Wait()
			}
		}
		b.StartTimer()
	}
}

// BenchmarkCrashRestart is kill -9 of a running server to its replacement
// Ready (port accepting), under Run: the exit is an event (pidfd), the
// restart of a process that was Ready longer than the loop window (here
// 1 ns) immediate.
func BenchmarkCrashRestart(b *testing.B) {
	file, _, _ := coldStartFleet(b, 1)
	sd := benchStateDir(b)
	readyc := make(chan int, 16)
	// Every exit ends a run long enough not to be a loop: each iteration
	// is a restart at once.
	bo := &Backoff{LoopWindow: time.Nanosecond}
	r, err := New(Config{Files: []string{file}, StateDir: sd, Log: logr.Discard(), ResyncPeriod: -1, Backoff: bo,
		OnEvent: func(e Event) {
			if e.Reason == ReasonReady {
				readyc <- 1
			}
		}})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = r.Run(ctx) }()
	defer func() {
		cancel()
		<-done
		_ = Down(context.Background(), DownConfig{Files: []string{file}, StateDir: sd, Log: logr.Discard()}, nil)
	}()
	<-readyc
	for b.Loop() {
		pid := pidOf(r.Status(), "s000")
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			b.Fatal(err)
		}
		select {
		case <-readyc:
		case <-time.After(time.Minute):
			b.Fatal("not restarted")
		}
	}
}

// benchApplyEnv, set to "<fleet file>\n<state folder>", makes the test
// binary an `apply --wait` that exits once every server is Ready, leaving
// them orphans (reparented to init, as after `up` ended): what `procfleet
// down` meets. Read by TestMain through runBenchApplyIfHelper.
const benchApplyEnv = "PROCFLEET_BENCH_APPLY"

func runBenchApplyIfHelper() {
	v, ok := os.LookupEnv(benchApplyEnv)
	if !ok {
		return
	}
	file, state, _ := strings.Cut(v, "\n")
	code := 0
	sd, err := actuate.OpenStateDir(state)
	if err == nil {
		var r *Reconciler
		r, err = New(Config{Files: []string{file}, StateDir: sd, Log: logr.Discard(), OneShot: true})
		if err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			_, err = r.Converge(ctx, ConvergeOptions{Wait: true})
			cancel()
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench apply:", err)
		code = 1
	}
	os.Exit(code)
}

// startFleet100 starts 100 small servers (apply --wait, untimed) in a
// helper process that then exits, and returns the fleet file and the state
// folder.
func startFleet100(b *testing.B) (string, *actuate.StateDir) {
	b.Helper()
	file, _, _ := coldStartFleet(b, 100)
	sd := benchStateDir(b)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), benchApplyEnv+"="+file+"\n"+sd.Path)
	out, err := cmd.CombinedOutput()
	if err != nil {
		_ = Down(context.Background(), DownConfig{Files: []string{file}, StateDir: sd, Log: logr.Discard()}, nil)
		b.Fatalf("apply: %v\n%s", err, out)
	}
	return file, sd
}

// BenchmarkStop100 is `procfleet down` after `up` ended: 100 servers that
// exit on SIGTERM, orphans whose exits init reaps (on this VM about 2 s
// later), from the call to every process gone, every record removed and
// every port verified free (DESIGN.md: under 0.5 s). The start is not
// timed.
func BenchmarkStop100(b *testing.B) {
	var cpu cpuMeter
	for b.Loop() {
		b.StopTimer()
		file, sd := startFleet100(b)
		b.StartTimer()
		cpu.start()
		if err := Down(context.Background(), DownConfig{Files: []string{file}, StateDir: sd, Log: logr.Discard()}, nil); err != nil {
			b.Fatal(err)
		}
		cpu.stop()
	}
	cpu.report(b)
}

// BenchmarkStop100Up is `procfleet down` through a running up
// (DownServers) of 100 servers that up started itself (its own children,
// which it reaps). The start is not timed.
func BenchmarkStop100Up(b *testing.B) {
	var cpu cpuMeter
	defer cpu.report(b)
	for b.Loop() {
		b.StopTimer()
		file, _, _ := coldStartFleet(b, 100)
		sd := benchStateDir(b)
		r, err := New(Config{Files: []string{file}, StateDir: sd, Log: logr.Discard(), ResyncPeriod: -1})
		if err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); _ = r.Run(ctx) }()
		deadline := time.Now().Add(time.Minute)
		for st := r.Status(); len(st.Servers) < 100 || countReady(st) < 100; st = r.Status() {
			if time.Now().After(deadline) {
				b.Fatal("fleet not ready")
			}
			time.Sleep(time.Millisecond)
		}
		b.StartTimer()
		cpu.start()
		_, err = r.DownServers(context.Background(), nil)
		cpu.stop()
		b.StopTimer()
		cancel()
		<-done
		_ = Down(context.Background(), DownConfig{Files: []string{file}, StateDir: sd, Log: logr.Discard()}, nil)
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}

// BenchmarkStop100Direct is the floor of BenchmarkStop100: the benchmark
// itself sends SIGTERM to the same 100 orphaned servers (pinned, through
// their pidfds), waits for each to exit and for every port to be free.
func BenchmarkStop100Direct(b *testing.B) {
	var cpu cpuMeter
	for b.Loop() {
		b.StopTimer()
		file, sd := startFleet100(b)
		recs, errs := sd.Records()
		if len(errs) > 0 || len(recs) != 100 {
			b.Fatalf("records: %d, errors %v", len(recs), errs)
		}
		b.StartTimer()
		cpu.start()
		var wg sync.WaitGroup
		for _, rec := range recs {
			wg.Go(func() {
				h, err := observe.Pin(rec.PID)
				if err != nil {
					b.Error(err)
					return
				}
				defer h.Close()
				if err := h.Signal(syscall.SIGTERM); err != nil {
					b.Error(err)
					return
				}
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				if err := h.Wait(ctx); err != nil {
					b.Error(err)
					return
				}
				for !testserver.PortFree(rec.Port) {
					if ctx.Err() != nil {
						b.Error("port still held")
						return
					}
					time.Sleep(time.Millisecond)
				}
			})
		}
		wg.Wait()
		cpu.stop()
		b.StopTimer()
		_ = Down(context.Background(), DownConfig{Files: []string{file}, StateDir: sd, Log: logr.Discard()}, nil)
		b.StartTimer()
	}
	cpu.report(b)
}

// cpuMeter adds up this process's CPU time (user + system) over timed
// sections, reported as cpu-ms/op: a figure less at the mercy of the
// machine's other load than the wall time.
type cpuMeter struct{ total, at time.Duration }

func cpuNow() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func (m *cpuMeter) start() { m.at = cpuNow() }
func (m *cpuMeter) stop()  { m.total += cpuNow() - m.at }
func (m *cpuMeter) report(b *testing.B) {
	b.ReportMetric(float64(m.total)/float64(time.Millisecond)/float64(b.N), "cpu-ms/op")
}

// benchStateDir opens a fresh state folder in b's temporary folder.
func benchStateDir(b testing.TB) *actuate.StateDir {
	b.Helper()
	sd, err := actuate.OpenStateDir(filepath.Join(b.TempDir(), ".procfleet"))
	if err != nil {
		b.Fatal(err)
	}
	return sd
}

func countReady(st Status) int {
	n := 0
	for _, s := range st.Servers {
		if s.Ready {
			n++
		}
	}
	return n
}
