package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Scenario names (the -scenarios flag).
const (
	scCrash = "crash"
	scCold  = "cold"
	scStop  = "stop"
	scEdit  = "edit"
	scIdle  = "idle"
	scPlan  = "plan"
)

var allScenarios = []string{scCrash, scCold, scStop, scEdit, scIdle, scPlan}

// Bounds on every wait of a scenario step.
const (
	upBound      = 120 * time.Second // a fleet's start to all healthy
	restartBound = 30 * time.Second  // one crash to the new instance healthy
	stopBound    = 60 * time.Second
	cleanBound   = 90 * time.Second
	// editWindow is how long the bench keeps watching the other servers'
	// stamp files after an edit took effect, to catch late restarts.
	editWindow = 2 * time.Second
)

// rows holds the specs of every row, built from the run's settings.
type rows struct {
	crashStamp, crashHealth     [3]RowSpec // median, p90, max
	crashSetsid                 [2]RowSpec // floor variant: stamp, health medians
	cold, coldApply, stop       RowSpec
	edit, editOthers            RowSpec
	idleCPU, idleSched, idleRSS RowSpec
	plan                        RowSpec
}

func newRows(n int, idle time.Duration) rows {
	var r rows
	for i, stat := range []string{"median", "p90", "max"} {
		var t *Target
		if i == 0 {
			t = &Target{Kind: TargetFloorFactor, Value: 1.2, Text: "≤ 1.2x floor"}
		}
		r.crashStamp[i] = RowSpec{Key: "crash.stamp." + stat, Title: "1. crash → new process started (stamp), " + stat, Unit: "ms", Target: t}
		r.crashHealth[i] = RowSpec{Key: "crash.health." + stat, Title: "1. crash → new process /health 200, " + stat, Unit: "ms"}
	}
	r.crashSetsid[0] = RowSpec{Key: "crash.setsid.stamp.median", Title: "1. floor variant: spawn in a new session (setsid) → stamp, median", Unit: "ms"}
	r.crashSetsid[1] = RowSpec{Key: "crash.setsid.health.median", Title: "1. floor variant: spawn in a new session (setsid) → /health 200, median", Unit: "ms"}
	r.cold = RowSpec{Key: "cold", Title: fmt.Sprintf("2. cold start %d → all /health 200", n), Unit: "s",
		Target: &Target{Kind: TargetFloorFactor, Value: 1.2, Text: "≤ 1.2x floor"}}
	r.coldApply = RowSpec{Key: "cold.apply", Title: fmt.Sprintf("2. cold start %d, `procfleet apply --wait` → exit 0", n), Unit: "s",
		Target: &Target{Kind: TargetFloorFactor, Value: 1.2, Text: "≤ 1.2x floor"}}
	r.stop = RowSpec{Key: "stop", Title: fmt.Sprintf("3. stop all %d → no process, ports free", n), Unit: "s",
		Target: &Target{Kind: TargetMax, Value: 0.5, Text: "< 0.5 s"}}
	r.edit = RowSpec{Key: "edit", Title: "4. edit one server's args → new instance /health 200", Unit: "ms",
		Target: &Target{Kind: TargetFloorPlus, Value: 100, Text: "< 100 ms + server start (floor)"}}
	r.editOthers = RowSpec{Key: "edit.others", Title: fmt.Sprintf("4. edit: other servers restarted (of %d)", n-1), Unit: "count",
		Target: &Target{Kind: TargetMax, Value: 0, Text: "0"}}
	per := "per 30 s"
	if idle != 30*time.Second {
		per = fmt.Sprintf("per 30 s (scaled from %s)", idle)
	}
	r.idleCPU = RowSpec{Key: "idle.cpu", Title: fmt.Sprintf("5. idle %d: supervisor CPU %s, utime+stime", n, per), Unit: "ms",
		Target: &Target{Kind: TargetMax, Value: 40, Text: "< 40 ms"}}
	r.idleSched = RowSpec{Key: "idle.cpu.sched", Title: fmt.Sprintf("5. idle %d: supervisor CPU %s, schedstat", n, per), Unit: "ms",
		Target: &Target{Kind: TargetMax, Value: 40, Text: "< 40 ms"}}
	r.idleRSS = RowSpec{Key: "idle.rss", Title: fmt.Sprintf("5. idle %d: supervisor peak RSS (VmHWM)", n), Unit: "MiB",
		Target: &Target{Kind: TargetMax, Value: 30, Text: "< 30 MiB"}}
	r.plan = RowSpec{Key: "plan", Title: "6. reconcile pass (observe + plan), 1,000 servers", Unit: "ms",
		Target: &Target{Kind: TargetMax, Value: 50, Text: "< 50 ms"}}
	return r
}

// forScenario lists the rows a scenario fills.
func (r rows) forScenario(sc string) []RowSpec {
	switch sc {
	case scCrash:
		return append(append(r.crashStamp[:], r.crashHealth[:]...), r.crashSetsid[:]...)
	case scCold:
		return []RowSpec{r.cold}
	case scStop:
		return []RowSpec{r.stop}
	case scEdit:
		return []RowSpec{r.edit, r.editOthers}
	case scIdle:
		return []RowSpec{r.idleCPU, r.idleSched, r.idleRSS}
	case scPlan:
		return []RowSpec{r.plan}
	}
	return nil
}

// runner holds what every scenario needs.
type runner struct {
	log       *log.Logger
	res       *Results
	rows      rows
	tmp       string
	root      string // module root
	src       string // tree procfleet is built from (-src)
	workload  string
	ports     []int
	n         int
	kills     int
	crashSame bool
	idle      time.Duration
	scenarios map[string]bool
	client    *http.Client

	floorSpawnHealth []float64 // spawn → /health samples of the floor, for the edit target
}

func (r *runner) want(sc string) bool { return r.scenarios[sc] }

func (r *runner) failAll(peer string, scs []string, err error) {
	for _, sc := range scs {
		for _, spec := range r.rows.forScenario(sc) {
			r.res.Fail(spec, peer, err)
		}
	}
}

func (r *runner) peerDir(peer, what string) (string, error) {
	dir := filepath.Join(r.tmp, peer+"-"+what)
	if err := os.MkdirAll(filepath.Join(dir, "stamps"), 0o755); err != nil {
		return "", fmt.Errorf("make %s folder: %w", peer, err)
	}
	return dir, nil
}

// closePeer ends a peer and, as a safety net, every workload it left.
func (r *runner) closePeer(p Peer, f Fleet) {
	ctx, cancel := context.WithTimeout(context.Background(), cleanBound)
	defer cancel()
	if err := p.Close(ctx); err != nil {
		r.log.Printf("%s: close: %v", p.Name(), err)
		r.res.Note("%s: cleanup: %s", p.Name(), oneLine(err.Error()))
	}
	killed, err := f.killWorkloads(ctx)
	if err != nil {
		r.log.Printf("%s: cleanup: %v", p.Name(), err)
	}
	if killed > 0 {
		r.log.Printf("%s: cleanup: SIGKILLed %d workload processes the peer left running", p.Name(), killed)
		r.res.Note("%s: %d workload processes survived its shutdown and were killed by the bench", p.Name(), killed)
	}
}

// crashServers is how many servers the crash scenario's fleet has: one with
// -crash-same, else one per kill, so that every kill is a server's first
// crash (procfleet backs off from the second crash in a row, by design).
func (r *runner) crashServers() int {
	if r.crashSame {
		return 1
	}
	return r.kills
}

// crash: kill -9 a server r.kills times (each time a different server
// unless -crash-same), waiting for it to be back each time.
func (r *runner) crash(ctx context.Context, pm peerMaker) error {
	dir, err := r.peerDir(pm.name, "crash")
	if err != nil {
		return err
	}
	p := pm.make(dir)
	f := newFleet(r.workload, filepath.Join(dir, "stamps"), r.ports[:r.crashServers()])
	if err := r.portsFree(ctx, f.Ports()); err != nil {
		return err
	}
	defer r.closePeer(p, f)
	if err := p.Start(ctx, f); err != nil {
		return err
	}
	uctx, cancel := context.WithTimeout(ctx, upBound)
	_, err = waitAllHealth(uctx, r.client, f.Ports(), p.Err)
	cancel()
	if err != nil {
		return fmt.Errorf("%s: first start: %w", p.Name(), err)
	}
	w, err := NewStampWatcher(filepath.Join(dir, "stamps"))
	if err != nil {
		return err
	}
	defer w.Close()

	var stampLat, healthLat []float64
	for i := 0; i < r.kills; i++ {
		srv := f.Servers[i%len(f.Servers)]
		stamps, err := readStamps(srv.Stamp)
		if err != nil {
			return err
		}
		if len(stamps) == 0 {
			return fmt.Errorf("%s: server %s wrote no stamp", p.Name(), srv.Name)
		}
		old := stamps[len(stamps)-1].PID
		argv, err := readCmdline(old)
		if err != nil || len(argv) == 0 || argv[0] != r.workload {
			return fmt.Errorf("%s: kill %d: pid %d is not the workload (argv %q, %v)", p.Name(), i+1, old, argv, err)
		}
		t0 := time.Now()
		if err := syscall.Kill(old, syscall.SIGKILL); err != nil {
			return fmt.Errorf("%s: kill %d: pid %d: %w", p.Name(), i+1, old, err)
		}
		kctx, cancel := context.WithTimeout(ctx, restartBound)
		st, _, err := w.WaitNew(kctx, srv.Stamp, len(stamps), func(s Stamp) bool { return s.PID != old }, p.Err)
		if err == nil {
			var th time.Time
			th, err = waitHealth(kctx, r.client, srv.Port, healthFrom(st.PID, ""), p.Err)
			healthLat = append(healthLat, ms(th.Sub(t0)))
			stampLat = append(stampLat, ms(st.Time.Sub(t0)))
		}
		cancel()
		if err != nil {
			return fmt.Errorf("%s: restart after kill %d of %s: %w", p.Name(), i+1, srv.Name, err)
		}
	}
	r.setCrash(p.Name(), stampLat, healthLat)
	if rr, ok := p.(restartReporter); ok {
		n, err := rr.Restarts(ctx)
		switch {
		case err != nil:
			r.res.Note("%s: could not read restart counts after the crash scenario: %s", p.Name(), oneLine(err.Error()))
		case n != r.kills:
			r.res.Note("%s: status reports %d restarts after %d kills", p.Name(), n, r.kills)
		default:
			r.log.Printf("%s: status reports %d restarts, as expected", p.Name(), n)
		}
	}
	return nil
}

func (r *runner) setCrash(peer string, stampLat, healthLat []float64) {
	s, h := Summarize(stampLat), Summarize(healthLat)
	for i, v := range []float64{s.Median, s.P90, s.Max} {
		r.res.Set(r.rows.crashStamp[i], peer, v)
	}
	for i, v := range []float64{h.Median, h.P90, h.Max} {
		r.res.Set(r.rows.crashHealth[i], peer, v)
	}
	r.res.SetSamples(r.rows.crashStamp[0], peer, stampLat)
	r.res.SetSamples(r.rows.crashHealth[0], peer, healthLat)
	r.log.Printf("%s: crash → stamp median %.1f ms p90 %.1f max %.1f; → /health median %.1f ms p90 %.1f max %.1f",
		peer, s.Median, s.P90, s.Max, h.Median, h.P90, h.Max)
}

// floorCrash: the bench spawns the server itself, k times, and sees its
// stamp and its /health.
func (r *runner) floorCrash(ctx context.Context, k int, setsid bool) ([]float64, []float64, error) {
	what := "spawn"
	if setsid {
		what = "spawn-setsid"
	}
	dir, err := r.peerDir(peerFloor, what)
	if err != nil {
		return nil, nil, err
	}
	f := newFleet(r.workload, filepath.Join(dir, "stamps"), r.ports[:1])
	srv := f.Servers[0]
	if err := r.portsFree(ctx, f.Ports()); err != nil {
		return nil, nil, err
	}
	w, err := NewStampWatcher(filepath.Dir(srv.Stamp))
	if err != nil {
		return nil, nil, err
	}
	defer w.Close()
	var stampLat, healthLat []float64
	for i := 0; i < k; i++ {
		stamps, err := readStamps(srv.Stamp)
		if err != nil {
			return nil, nil, err
		}
		cmd := exec.Command(f.Workload, srv.Args()...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: setsid}
		t0 := time.Now()
		if err := cmd.Start(); err != nil {
			return nil, nil, fmt.Errorf("floor: spawn %d: %w", i+1, err)
		}
		pid := cmd.Process.Pid
		kctx, cancel := context.WithTimeout(ctx, restartBound)
		st, _, err := w.WaitNew(kctx, srv.Stamp, len(stamps), func(s Stamp) bool { return s.PID == pid }, noCheck)
		if err == nil {
			var th time.Time
			th, err = waitHealth(kctx, r.client, srv.Port, healthFrom(pid, ""), noCheck)
			stampLat = append(stampLat, ms(st.Time.Sub(t0)))
			healthLat = append(healthLat, ms(th.Sub(t0)))
		}
		cancel()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if err != nil {
			return nil, nil, fmt.Errorf("floor: spawn %d: %w", i+1, err)
		}
	}
	return stampLat, healthLat, nil
}

// portsFree waits (bounded) for ports to be free: the previous peer's
// servers must be gone before the next peer starts.
func (r *runner) portsFree(ctx context.Context, ports []int) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := waitPortsFree(ctx, ports); err != nil {
		return fmt.Errorf("ports in use before the scenario: %w", err)
	}
	return nil
}

// fleet runs cold start, idle, edit and stop, in that order, on one fleet.
func (r *runner) fleet(ctx context.Context, pm peerMaker) {
	name := pm.name
	todo := []string{}
	for _, sc := range []string{scCold, scIdle, scEdit, scStop} {
		if r.want(sc) {
			todo = append(todo, sc)
		}
	}
	if len(todo) == 0 {
		return
	}
	r.log.Printf("%s: fleet scenarios (%s)", name, strings.Join(todo, ", "))
	fail := func(err error) {
		r.log.Printf("%s: %v", name, err)
		r.failAll(name, todo, err)
	}
	dir, err := r.peerDir(name, "fleet")
	if err != nil {
		fail(err)
		return
	}
	p := pm.make(dir)
	f := newFleet(r.workload, filepath.Join(dir, "stamps"), r.ports[:r.n])
	if err := r.portsFree(ctx, f.Ports()); err != nil {
		fail(err)
		return
	}
	defer func() { r.closePeer(p, f) }()

	t0 := time.Now()
	if err := p.Start(ctx, f); err != nil {
		fail(fmt.Errorf("start: %w", err))
		return
	}
	uctx, cancel := context.WithTimeout(ctx, upBound)
	tAll, err := waitAllHealth(uctx, r.client, f.Ports(), p.Err)
	cancel()
	if err != nil {
		fail(fmt.Errorf("cold start: %w", err))
		return
	}
	cold := tAll.Sub(t0)
	r.log.Printf("%s: cold start %d → all /health in %.2f s", name, len(f.Servers), cold.Seconds())
	if r.want(scCold) {
		r.res.Set(r.rows.cold, name, cold.Seconds())
	}

	if r.want(scIdle) {
		if err := r.idleCost(ctx, p, f); err != nil {
			r.log.Printf("%s: idle: %v", name, err)
			r.failAll(name, []string{scIdle}, err)
		}
	}
	if r.want(scEdit) {
		f2, err := r.edit(ctx, p, f)
		if err != nil {
			r.log.Printf("%s: edit: %v", name, err)
			r.failAll(name, []string{scEdit}, err)
		} else {
			f = f2
		}
	}
	if r.want(scStop) {
		if err := r.stopAll(ctx, p, f); err != nil {
			r.log.Printf("%s: stop: %v", name, err)
			r.failAll(name, []string{scStop}, err)
			return
		}
		// With everything stopped, a peer with a converge-once command
		// gets a second cold start through it.
		if ap, ok := p.(onceApplier); ok && r.want(scCold) {
			if err := r.coldOnce(ctx, p, ap, f); err != nil {
				r.log.Printf("%s: cold start (apply once): %v", name, err)
				r.res.Fail(r.rows.coldApply, name, err)
			}
		}
	}
}

func (r *runner) coldOnce(ctx context.Context, p Peer, ap onceApplier, f Fleet) error {
	if err := r.portsFree(ctx, f.Ports()); err != nil {
		return err
	}
	t0 := time.Now()
	if err := ap.ApplyOnce(ctx, f); err != nil {
		return err
	}
	d := time.Since(t0)
	// apply --wait said every server is Ready: they must answer now.
	hctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	_, err := waitAllHealth(hctx, r.client, f.Ports(), noCheck)
	cancel()
	if err != nil {
		return fmt.Errorf("after apply --wait exited 0: %w", err)
	}
	r.res.Set(r.rows.coldApply, p.Name(), d.Seconds())
	r.log.Printf("%s: cold start %d with apply --wait in %.2f s", p.Name(), len(f.Servers), d.Seconds())
	pids, err := f.currentPIDs()
	if err != nil {
		return err
	}
	if err := p.StopAll(ctx); err != nil {
		return err
	}
	sctx, cancel := context.WithTimeout(ctx, stopBound)
	defer cancel()
	_, err = waitStopped(sctx, pids, f.Ports())
	return err
}

func (r *runner) idleCost(ctx context.Context, p Peer, f Fleet) error {
	pid, err := p.SupervisorPID()
	if err != nil {
		return err
	}
	before, err := f.stampCounts()
	if err != nil {
		return err
	}
	c0, err := readCPU(pid)
	if err != nil {
		return err
	}
	// The idle window is a measurement interval, not a wait for an event.
	t := time.NewTimer(r.idle)
	select {
	case <-ctx.Done():
		t.Stop()
		return context.Cause(ctx)
	case <-t.C:
	}
	if err := p.Err(); err != nil {
		return err
	}
	c1, err := readCPU(pid)
	if err != nil {
		return err
	}
	rss, err := readPeakRSS(pid)
	if err != nil {
		return err
	}
	after, err := f.stampCounts()
	if err != nil {
		return err
	}
	if n := restartedExcept(before, after, ""); n > 0 {
		r.res.Note("%s: %d servers restarted during the idle window", p.Name(), n)
	}
	scale := float64(30*time.Second) / float64(r.idle)
	cpu := ms(c1.Ticks-c0.Ticks) * scale
	sched := ms(c1.Sched-c0.Sched) * scale
	mib := float64(rss) / (1 << 20)
	r.res.Set(r.rows.idleCPU, p.Name(), cpu)
	r.res.Set(r.rows.idleSched, p.Name(), sched)
	r.res.Set(r.rows.idleRSS, p.Name(), mib)
	r.log.Printf("%s: idle: pid %d CPU %.0f ms (schedstat %.1f ms) per 30 s, peak RSS %.1f MiB", p.Name(), pid, cpu, sched, mib)
	return nil
}

// restartedExcept counts servers other than skip whose stamp count grew.
func restartedExcept(before, after map[string]int, skip string) int {
	n := 0
	for name, a := range after {
		if name != skip && a > before[name] {
			n++
		}
	}
	return n
}

func (r *runner) edit(ctx context.Context, p Peer, f Fleet) (Fleet, error) {
	f2 := Fleet{Workload: f.Workload, Servers: slices.Clone(f.Servers)}
	i := len(f2.Servers) / 2
	target := &f2.Servers[i]
	target.Gen++
	gen := strconv.Itoa(target.Gen)
	before, err := f.stampCounts()
	if err != nil {
		return f, err
	}
	t0 := time.Now()
	if err := p.Apply(ctx, f2); err != nil {
		return f, err
	}
	ectx, cancel := context.WithTimeout(ctx, upBound)
	th, err := waitHealth(ectx, r.client, target.Port, healthFrom(0, gen), p.Err)
	cancel()
	if err != nil {
		return f, fmt.Errorf("changed server %s: %w", target.Name, err)
	}
	lat := th.Sub(t0)
	// Watch the others a little longer: a late restart counts too.
	t := time.NewTimer(editWindow)
	select {
	case <-ctx.Done():
		t.Stop()
		return f2, context.Cause(ctx)
	case <-t.C:
	}
	after, err := f2.stampCounts()
	if err != nil {
		return f2, err
	}
	others := restartedExcept(before, after, target.Name)
	r.res.Set(r.rows.edit, p.Name(), ms(lat))
	r.res.Set(r.rows.editOthers, p.Name(), float64(others))
	r.log.Printf("%s: edit → %s gen %s answering in %.0f ms; %d other servers restarted", p.Name(), target.Name, gen, ms(lat), others)
	// Wait until every server answers again before the stop scenario.
	uctx, cancel := context.WithTimeout(ctx, upBound)
	defer cancel()
	if _, err := waitAllHealth(uctx, r.client, f2.Ports(), p.Err); err != nil {
		return f2, fmt.Errorf("after edit: %w", err)
	}
	return f2, nil
}

func (r *runner) stopAll(ctx context.Context, p Peer, f Fleet) error {
	pids, err := f.currentPIDs()
	if err != nil {
		return err
	}
	if err := p.PrepareStop(ctx); err != nil {
		return err
	}
	t0 := time.Now()
	if err := p.StopAll(ctx); err != nil {
		return err
	}
	sctx, cancel := context.WithTimeout(ctx, stopBound)
	defer cancel()
	tEnd, err := waitStopped(sctx, pids, f.Ports())
	if err != nil {
		return err
	}
	d := tEnd.Sub(t0)
	r.res.Set(r.rows.stop, p.Name(), d.Seconds())
	r.log.Printf("%s: stop all %d → gone, ports free in %.2f s", p.Name(), len(pids), d.Seconds())
	return nil
}

// floorFleet starts the fleet directly, all in parallel, then stops it with
// SIGTERM to every server: the floor for cold start (and, for reference,
// for stop).
func (r *runner) floorFleet(ctx context.Context) error {
	dir, err := r.peerDir(peerFloor, "fleet")
	if err != nil {
		return err
	}
	f := newFleet(r.workload, filepath.Join(dir, "stamps"), r.ports[:r.n])
	if err := r.portsFree(ctx, f.Ports()); err != nil {
		return err
	}
	cmds := make([]*exec.Cmd, len(f.Servers))
	var wg sync.WaitGroup
	defer func() {
		for _, c := range cmds {
			if c != nil && c.Process != nil {
				_ = c.Process.Kill() // os.Process: never a reused pid before Wait
			}
		}
		wg.Wait()
	}()
	errs := make([]error, len(f.Servers))
	var started sync.WaitGroup
	t0 := time.Now()
	for i, s := range f.Servers {
		started.Add(1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := exec.Command(f.Workload, s.Args()...)
			err := cmd.Start()
			if err == nil {
				cmds[i] = cmd
			}
			errs[i] = err
			started.Done()
			if err == nil {
				_ = cmd.Wait()
			}
		}()
	}
	started.Wait()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("floor: spawn: %w", err)
	}
	uctx, cancel := context.WithTimeout(ctx, upBound)
	tAll, err := waitAllHealth(uctx, r.client, f.Ports(), noCheck)
	cancel()
	if err != nil {
		return fmt.Errorf("floor: cold start: %w", err)
	}
	if r.want(scCold) {
		r.res.Set(r.rows.cold, peerFloor, tAll.Sub(t0).Seconds())
		r.res.Set(r.rows.coldApply, peerFloor, tAll.Sub(t0).Seconds())
	}
	r.log.Printf("floor: cold start %d → all /health in %.2f s", len(f.Servers), tAll.Sub(t0).Seconds())

	if !r.want(scStop) {
		return nil
	}
	pids := make([]int, len(cmds))
	for i, c := range cmds {
		pids[i] = c.Process.Pid
	}
	t1 := time.Now()
	for _, c := range cmds {
		_ = c.Process.Signal(syscall.SIGTERM)
	}
	sctx, cancel := context.WithTimeout(ctx, stopBound)
	defer cancel()
	tEnd, err := waitStopped(sctx, pids, f.Ports())
	if err != nil {
		return fmt.Errorf("floor: stop: %w", err)
	}
	r.res.Set(r.rows.stop, peerFloor, tEnd.Sub(t1).Seconds())
	r.log.Printf("floor: stop all %d in %.2f s", len(pids), tEnd.Sub(t1).Seconds())
	return nil
}

// floor runs the bench's own baselines.
func (r *runner) floor(ctx context.Context) {
	if r.want(scCrash) || r.want(scEdit) {
		k := r.kills
		if !r.want(scCrash) {
			k = 5
		}
		stampLat, healthLat, err := r.floorCrash(ctx, k, false)
		if err != nil {
			r.log.Printf("floor: %v", err)
			r.failAll(peerFloor, []string{scCrash}, err)
		} else {
			r.floorSpawnHealth = healthLat
			if r.want(scCrash) {
				r.setCrash(peerFloor, stampLat, healthLat)
			}
			if r.want(scEdit) {
				r.res.Set(r.rows.edit, peerFloor, Summarize(healthLat).Median)
			}
		}
	}
	if r.want(scCrash) {
		// procfleet (and PM2) start servers in a new session; with the
		// kernel's autogroup scheduling a new session is a new scheduling
		// group, which can start slower on a busy machine. Measured beside
		// the plain floor so the difference is visible.
		stampLat, healthLat, err := r.floorCrash(ctx, r.kills, true)
		if err != nil {
			r.log.Printf("floor (setsid): %v", err)
			r.res.Fail(r.rows.crashSetsid[0], peerFloor, err)
		} else {
			s, h := Summarize(stampLat), Summarize(healthLat)
			r.res.Set(r.rows.crashSetsid[0], peerFloor, s.Median)
			r.res.Set(r.rows.crashSetsid[1], peerFloor, h.Median)
			r.res.SetSamples(r.rows.crashSetsid[0], peerFloor, stampLat)
			r.log.Printf("floor (setsid): spawn → stamp median %.1f ms, → /health median %.1f ms", s.Median, h.Median)
		}
	}
	if r.want(scCold) || r.want(scStop) {
		if err := r.floorFleet(ctx); err != nil {
			r.log.Printf("floor: %v", err)
			r.failAll(peerFloor, []string{scCold, scStop}, err)
		}
	}
}
