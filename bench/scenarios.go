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

// Scenario names (the -scenarios flag), in the order they run.
const (
	scCrash     = "crash"
	scCold      = "cold"
	scStop      = "stop"
	scEdit      = "edit"
	scIdle      = "idle"
	scLogsIdle  = "logs-idle"
	scUI        = "ui"
	scScale     = "scale"
	scLogs      = "logs"
	scNeighbour = "neighbour"
	scPlan      = "plan"
)

var allScenarios = []string{scCrash, scCold, scStop, scEdit, scIdle, scLogsIdle, scUI, scScale, scLogs, scNeighbour, scPlan}

// procfleetOnly are the scenarios that drive what only procfleet has;
// the other peers' columns stay empty in their rows.
var procfleetOnly = []string{scLogsIdle, scUI, scLogs, scNeighbour, scPlan}

// peerScenarios returns the scenarios of scs that apply to peer.
func peerScenarios(peer string, scs []string) []string {
	if isProcfleet(peer) {
		return scs
	}
	return slices.DeleteFunc(slices.Clone(scs), func(s string) bool { return slices.Contains(procfleetOnly, s) })
}

// fleetScenarios run on one fleet per size, in this order (cold first: the
// others need the fleet it starts; stop last: it ends it).
var fleetScenarios = []string{scCold, scIdle, scLogsIdle, scEdit, scUI, scStop}

// Bounds on the waits of a scenario step that do not grow with the fleet.
const (
	restartBound = 30 * time.Second // one crash to the new instance healthy
	cleanBound   = 5 * time.Minute  // a peer's shutdown and the safety net, 1,000 servers
	// editWindow is how long the bench keeps watching the other servers'
	// stamp files after an edit took effect, to catch late restarts.
	editWindow = 2 * time.Second
	// secondCrashAge is how long a server has answered /health before its
	// second kill: DESIGN.md restarts at once a server that had been Ready
	// for 10 s; 2 s more covers the supervisor seeing Ready after the bench.
	secondCrashAge = 12 * time.Second
)

// coldLimit and stopLimit bound starting and stopping a fleet of n. A peer
// that does not finish within them is reported with the limit as a bound,
// never left out. They grow with n because peers start and stop servers one
// at a time (supervisord about 75 ms each, PM2 about 80 ms, on a quiet
// machine; three times that at load 15).
func coldLimit(n int) time.Duration { return 60*time.Second + time.Duration(n)*150*time.Millisecond }
func stopLimit(n int) time.Duration { return 30*time.Second + time.Duration(n)*100*time.Millisecond }

// idleTargets are DESIGN.md's idle targets for a fleet of n: CPU per 30 s
// and resident memory. They are set for 100 and 1,000 servers: a fleet up
// to 100 is held to the first, one up to 1,000 to the second, a larger one
// to none.
func idleTargets(n int) (cpuMs, rssMiB float64, ok bool) {
	switch {
	case n <= 100:
		return 10, 30, true
	case n <= 1000:
		return 20, 40, true
	}
	return 0, 0, false
}

// crashRows are the rows of one kind of crash (first, or second after
// Ready > 10 s): kill to stamp and kill to /health, median, p90, max; and
// exit to stamp, median and p90: the kill's figure holds the kernel's
// teardown of the killed process, which the floor (a spawn) does not; this
// one starts when the bench's own pidfd of the killed process is readable,
// and so is the supervisor's own share.
type crashRows struct {
	stamp, health [3]RowSpec
	exitStamp     [2]RowSpec
}

// sizeRows are the rows of one fleet size.
type sizeRows struct {
	n                           int
	cold, coldApply, stop       RowSpec
	edit, editOthers            RowSpec
	idleCPU, idleSched, idleRSS RowSpec
	idleRSSNow, idleRSSFile     RowSpec
	idleReadyLag                RowSpec
	idleReadyCPU, idleReadySch  RowSpec
	follow                      RowSpec
	uiNoPage, uiPage            RowSpec
}

// rows holds the specs of every row, built from the run's settings.
type rows struct {
	crash                  [2]crashRows // first crashes, second crashes
	crashSetsid            [2]RowSpec   // floor variant: stamp, health medians
	sizes                  []int
	size                   map[int]*sizeRows
	coldGrowth, stopGrowth RowSpec // only with two sizes or more
	scaleUp, scaleDown     RowSpec
	scaleOthers            RowSpec
	logsCPU, logsLost      RowSpec
	neighbourBase          RowSpec
	neighbour, neighbourRe RowSpec
	plan                   RowSpec
}

// settings are what the rows' titles name.
type settings struct {
	sizes      []int
	idle       time.Duration
	window     time.Duration
	scale      [2]int
	logsRate   int
	neighbourN int
}

func newRows(st settings) rows {
	r := rows{sizes: st.sizes, size: map[int]*sizeRows{}}
	for k, kind := range []string{"first crash", "second crash (Ready > 10 s)"} {
		key := []string{"crash.first", "crash.second"}[k]
		for i, stat := range []string{"median", "p90", "max"} {
			var t *Target
			if i < 2 {
				t = &Target{Kind: TargetFloorFactor, Value: 1.1, Text: "≤ 1.1x floor"}
			}
			r.crash[k].stamp[i] = RowSpec{Key: key + ".stamp." + stat, Title: fmt.Sprintf("1. %s → new process started (stamp), %s", kind, stat), Unit: "ms", Target: t}
			r.crash[k].health[i] = RowSpec{Key: key + ".health." + stat, Title: fmt.Sprintf("1. %s → new process /health 200, %s", kind, stat), Unit: "ms"}
			if i < 2 {
				r.crash[k].exitStamp[i] = RowSpec{Key: key + ".exit-stamp." + stat, Title: fmt.Sprintf("1. %s: exit seen (pidfd) → new process started (stamp), %s", kind, stat), Unit: "ms"}
			}
		}
	}
	r.crashSetsid[0] = RowSpec{Key: "crash.setsid.stamp.median", Title: "1. floor variant: spawn in a new session (setsid) → stamp, median", Unit: "ms"}
	r.crashSetsid[1] = RowSpec{Key: "crash.setsid.health.median", Title: "1. floor variant: spawn in a new session (setsid) → /health 200, median", Unit: "ms"}
	per := "per 30 s"
	if st.idle != 30*time.Second {
		per = fmt.Sprintf("per 30 s (scaled from %s)", st.idle)
	}
	perWindow := "over 10 s"
	if st.window != 10*time.Second {
		perWindow = fmt.Sprintf("over 10 s (scaled from %s)", st.window)
	}
	for _, n := range st.sizes {
		k := fmt.Sprintf(".n%d", n)
		sr := &sizeRows{n: n}
		sr.cold = RowSpec{Key: "cold" + k, Title: fmt.Sprintf("2. cold start %d → all /health 200", n), Unit: "s",
			Target: &Target{Kind: TargetFloorFactor, Value: 1, Text: "≤ floor"}}
		sr.coldApply = RowSpec{Key: "cold.apply" + k, Title: fmt.Sprintf("2. cold start %d, `procfleet apply --wait` → exit 0", n), Unit: "s",
			Target: &Target{Kind: TargetFloorFactor, Value: 1, Text: "≤ floor"}}
		sr.stop = RowSpec{Key: "stop" + k, Title: fmt.Sprintf("3. stop all %d → no process, ports free", n), Unit: "s",
			Target: &Target{Kind: TargetFloorFactor, Value: 1.5, Text: "≤ 1.5x floor"}}
		sr.edit = RowSpec{Key: "edit" + k, Title: fmt.Sprintf("4. edit one server's args, fleet of %d → new instance /health 200", n), Unit: "ms",
			Target: &Target{Kind: TargetFloorPlus, Value: 100, Text: "< 100 ms + server start (floor)"}}
		sr.editOthers = RowSpec{Key: "edit.others" + k, Title: fmt.Sprintf("4. edit: other servers restarted (of %d)", n-1), Unit: "count",
			Target: &Target{Kind: TargetMax, Value: 0, Text: "0"}}
		sr.idleCPU = RowSpec{Key: "idle.cpu" + k, Title: fmt.Sprintf("5. idle %d: supervisor CPU %s, utime+stime", n, per), Unit: "ms"}
		sr.idleSched = RowSpec{Key: "idle.cpu.sched" + k, Title: fmt.Sprintf("5. idle %d: supervisor CPU %s, schedstat", n, per), Unit: "ms"}
		sr.idleRSS = RowSpec{Key: "idle.rss" + k, Title: fmt.Sprintf("5. idle %d: supervisor peak RSS (VmHWM)", n), Unit: "MiB"}
		sr.idleRSSNow = RowSpec{Key: "idle.rss.now" + k, Title: fmt.Sprintf("5. idle %d: supervisor RSS at the window's end (VmRSS)", n), Unit: "MiB"}
		sr.idleRSSFile = RowSpec{Key: "idle.rss.file" + k, Title: fmt.Sprintf("5. idle %d: of that, file-backed (RssFile: the binary's pages)", n), Unit: "MiB"}
		sr.idleReadyLag = RowSpec{Key: "idle.readylag" + k, Title: fmt.Sprintf("5. idle %d: all ready in the supervisor's own status, after all /health 200 (peers that report readiness)", n), Unit: "s"}
		sr.idleReadyCPU = RowSpec{Key: "idle.ready.cpu" + k, Title: fmt.Sprintf("5. idle %d: supervisor CPU %s from all ready in its own status, utime+stime", n, per), Unit: "ms"}
		sr.idleReadySch = RowSpec{Key: "idle.ready.cpu.sched" + k, Title: fmt.Sprintf("5. idle %d: supervisor CPU %s from all ready in its own status, schedstat", n, per), Unit: "ms"}
		if cpu, rss, ok := idleTargets(n); ok {
			sr.idleCPU.Target = &Target{Kind: TargetMax, Value: cpu, Text: fmt.Sprintf("< %.0f ms", cpu)}
			sr.idleSched.Target = &Target{Kind: TargetMax, Value: cpu, Text: fmt.Sprintf("< %.0f ms", cpu)}
			sr.idleReadyCPU.Target = &Target{Kind: TargetMax, Value: cpu, Text: fmt.Sprintf("< %.0f ms", cpu)}
			sr.idleReadySch.Target = &Target{Kind: TargetMax, Value: cpu, Text: fmt.Sprintf("< %.0f ms", cpu)}
			sr.idleRSS.Target = &Target{Kind: TargetMax, Value: rss, Text: fmt.Sprintf("< %.0f MiB", rss)}
		}
		sr.follow = RowSpec{Key: "logs.idle" + k, Title: fmt.Sprintf("6. `logs -f` of %d idle servers (floor: `tail -F` of their files): CPU %s", n, perWindow), Unit: "ms",
			Target: &Target{Kind: TargetMax, Value: 10, Text: "< 10 ms (no polling)"}}
		sr.uiNoPage = RowSpec{Key: "ui.nopage" + k, Title: fmt.Sprintf("7. `up --ui`, %d servers, no page open: up CPU", n), Unit: "ms/s"}
		sr.uiPage = RowSpec{Key: "ui.page" + k, Title: fmt.Sprintf("7. `up --ui`, %d servers: CPU added by one open page", n), Unit: "ms/s",
			Target: &Target{Kind: TargetMax, Value: 5, Text: "< 5 ms/s"}}
		r.size[n] = sr
	}
	if len(st.sizes) > 1 {
		lo, hi := st.sizes[0], st.sizes[len(st.sizes)-1]
		lin := fmt.Sprintf("%.2fx", float64(hi)/float64(lo))
		r.coldGrowth = RowSpec{Key: "cold.growth", Title: fmt.Sprintf("2. cold start: time at %d / time at %d (%s = linear)", hi, lo, lin), Unit: "x"}
		r.stopGrowth = RowSpec{Key: "stop.growth", Title: fmt.Sprintf("3. stop all: time at %d / time at %d (%s = linear)", hi, lo, lin), Unit: "x"}
	}
	from, to := st.scale[0], st.scale[1]
	r.scaleUp = RowSpec{Key: "scale.up", Title: fmt.Sprintf("8. scale %d → %d instances → all /health 200", from, to), Unit: "s"}
	r.scaleDown = RowSpec{Key: "scale.down", Title: fmt.Sprintf("8. scale %d → %d → stopped instances gone, ports free", to, from), Unit: "s"}
	r.scaleOthers = RowSpec{Key: "scale.others", Title: fmt.Sprintf("8. scale up: running instances restarted (of %d)", from), Unit: "count",
		Target: &Target{Kind: TargetMax, Value: 0, Text: "0"}}
	r.logsCPU = RowSpec{Key: "logs.cpu", Title: fmt.Sprintf("9. `logs -f` of one server printing %d lines/s (floor: `tail -F`): CPU", st.logsRate), Unit: "%",
		Target: &Target{Kind: TargetFloorFactor, Value: 2, Text: "≤ 2x floor"}}
	r.logsLost = RowSpec{Key: "logs.lost", Title: "9. `logs -f`: lines missing or printed twice", Unit: "count",
		Target: &Target{Kind: TargetMax, Value: 0, Text: "0"}}
	r.neighbourBase = RowSpec{Key: "neighbour.base", Title: fmt.Sprintf("10. `up` of %d servers, quiet folder: CPU", st.neighbourN), Unit: "%"}
	r.neighbour = RowSpec{Key: "neighbour.cpu", Title: fmt.Sprintf("10. `up` of %d servers, a file beside the fleet file written at %.0f MB/s: CPU", st.neighbourN, float64(neighbourRate)/1e6), Unit: "%",
		Target: &Target{Kind: TargetMax, Value: 2, Text: "< 2 %"}}
	r.neighbourRe = RowSpec{Key: "neighbour.restarts", Title: "10. busy neighbour file: servers restarted", Unit: "count",
		Target: &Target{Kind: TargetMax, Value: 0, Text: "0"}}
	r.plan = RowSpec{Key: "plan", Title: "11. reconcile pass (observe + plan), 1,000 servers", Unit: "ms",
		Target: &Target{Kind: TargetMax, Value: 10, Text: "< 10 ms"}}
	return r
}

// forScenario lists the rows a scenario fills, in table order: every size's
// rows together.
func (r rows) forScenario(sc string) []RowSpec {
	var out []RowSpec
	for _, n := range r.sizes {
		out = append(out, r.size[n].forScenario(sc)...)
	}
	switch sc {
	case scCrash:
		for _, c := range r.crash {
			out = append(append(append(out, c.stamp[:]...), c.health[:]...), c.exitStamp[:]...)
		}
		return append(out, r.crashSetsid[:]...)
	case scCold:
		if r.coldGrowth.Key != "" {
			out = append(out, r.coldGrowth)
		}
	case scStop:
		if r.stopGrowth.Key != "" {
			out = append(out, r.stopGrowth)
		}
	case scScale:
		return []RowSpec{r.scaleUp, r.scaleDown, r.scaleOthers}
	case scLogs:
		return []RowSpec{r.logsCPU, r.logsLost}
	case scNeighbour:
		return []RowSpec{r.neighbourBase, r.neighbour, r.neighbourRe}
	case scPlan:
		return []RowSpec{r.plan}
	}
	return out
}

// forScenario lists one size's rows of a fleet scenario.
func (sr *sizeRows) forScenario(sc string) []RowSpec {
	switch sc {
	case scCold:
		return []RowSpec{sr.cold, sr.coldApply}
	case scStop:
		return []RowSpec{sr.stop}
	case scEdit:
		return []RowSpec{sr.edit, sr.editOthers}
	case scIdle:
		return []RowSpec{sr.idleCPU, sr.idleSched, sr.idleReadyLag, sr.idleReadyCPU, sr.idleReadySch, sr.idleRSS, sr.idleRSSNow, sr.idleRSSFile}
	case scLogsIdle:
		return []RowSpec{sr.follow}
	case scUI:
		return []RowSpec{sr.uiNoPage, sr.uiPage}
	}
	return nil
}

// limitError is the cause of a scenario context whose limit passed.
type limitError struct {
	what  string
	limit time.Duration
}

func (e *limitError) Error() string {
	return fmt.Sprintf("%s did not finish within its limit of %s", e.what, e.limit)
}

// withLimit bounds a scenario step: past limit its context ends with a
// *limitError as its cause, which record reports as a limit.
func withLimit(ctx context.Context, limit time.Duration, what string) (context.Context, context.CancelFunc) {
	return context.WithTimeoutCause(ctx, limit, &limitError{what: what, limit: limit})
}

// unsupportedError says that a peer's binary lacks what a scenario drives.
type unsupportedError struct{ what string }

func (e *unsupportedError) Error() string { return "not supported by this binary: " + e.what }

// record reports err for peer on specs: a passed limit (from err or from
// lctx's cause) as that limit (as a failure on a row that counts), a binary without the feature as not
// supported, anything else as a failure.
func (r *runner) record(specs []RowSpec, peer string, lctx context.Context, err error) {
	var le *limitError
	var ue *unsupportedError
	limited := errors.As(err, &le)
	if !limited && lctx != nil && lctx.Err() != nil {
		limited = errors.As(context.Cause(lctx), &le)
	}
	for _, spec := range specs {
		switch {
		case limited && !isTime(spec.Unit):
			// A count has no bound to show: the step was cut short.
			r.res.Fail(spec, peer, le)
		case limited:
			r.res.Limit(spec, peer, inUnit(le.limit, spec.Unit))
		case errors.As(err, &ue):
			r.res.Unsupported(spec, peer, ue.what)
		default:
			r.res.Fail(spec, peer, err)
		}
	}
}

// isTime reports whether a row's unit is a duration.
func isTime(unit string) bool { return unit == "s" || unit == "ms" }

// inUnit converts d to a row's unit (seconds or milliseconds).
func inUnit(d time.Duration, unit string) float64 {
	if unit == "s" {
		return d.Seconds()
	}
	return ms(d)
}

// runner holds what every scenario needs.
type runner struct {
	log        *log.Logger
	res        *Results
	rows       rows
	tmp        string
	root       string // module root
	src        string // tree procfleet is built from (-src)
	workload   string
	ports      []int // free loopback ports, for fleets of every size
	scalePorts []int // a contiguous free range, for the scale scenario
	uiPort     int   // the dashboard's port
	sizes      []int
	kills      int
	idle       time.Duration
	window     time.Duration
	scale      [2]int
	logsRate   int
	scenarios  map[string]bool
	withApply  bool // procfleet's `apply --wait` cold start is measured too
	client     *http.Client
	planSrc    map[string]string // the tree a procfleet peer was built from
	round      int               // of -rounds, from 0
}

func (r *runner) want(sc string) bool { return r.scenarios[sc] }

func (r *runner) failAll(peer string, scs []string, err error) {
	for _, sc := range peerScenarios(peer, scs) {
		r.record(r.rows.forScenario(sc), peer, nil, err)
	}
}

func (r *runner) peerDir(peer, what string) (string, error) {
	dir := filepath.Join(r.tmp, fmt.Sprintf("r%d-%s-%s", r.round, peer, what))
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

// crash: kill -9 each server of a fleet of r.kills once (its first crash),
// then, once each has answered /health for secondCrashAge, once more (a
// second crash that DESIGN.md does not count as a loop), waiting for it to
// be back each time.
func (r *runner) crash(ctx context.Context, pm peerMaker) error {
	dir, err := r.peerDir(pm.name, "crash")
	if err != nil {
		return err
	}
	p := pm.make(dir)
	f := newFleet(r.workload, filepath.Join(dir, "stamps"), r.ports[:r.kills])
	if err := r.portsFree(ctx, f.Ports()); err != nil {
		return err
	}
	defer r.closePeer(p, f)
	if err := r.startFleet(ctx, p, f, "the crash fleet's start"); err != nil {
		return fmt.Errorf("%s: first start: %w", p.Name(), err)
	}
	w, err := NewStampWatcher(filepath.Join(dir, "stamps"))
	if err != nil {
		return err
	}
	defer w.Close()

	back := make([]time.Time, len(f.Servers)) // when each answered after its first crash
	for round := range 2 {
		var stampLat, healthLat, exitLat []float64
		for i, srv := range f.Servers {
			if round == 1 {
				// The server's age is the condition being set up, not an
				// event to wait for: a timer to that moment.
				if err := sleepUntil(ctx, back[i].Add(secondCrashAge)); err != nil {
					return err
				}
			}
			st, th, ex, err := r.killOnce(ctx, p, w, srv)
			if err != nil {
				return fmt.Errorf("%s: crash round %d: %w", p.Name(), round+1, err)
			}
			back[i] = th.At
			stampLat = append(stampLat, st)
			healthLat = append(healthLat, th.Lat)
			if ex >= 0 {
				exitLat = append(exitLat, ex)
			}
		}
		r.setCrash(r.rows.crash[round], p.Name(), stampLat, healthLat)
		r.setExitStamp(r.rows.crash[round], p.Name(), exitLat)
		if round == 0 {
			r.checkRestarts(ctx, p)
		}
	}
	return nil
}

// startFleet starts p with f and waits, within coldLimit, until every
// server answers /health.
func (r *runner) startFleet(ctx context.Context, p Peer, f Fleet, what string) error {
	lctx, cancel := withLimit(ctx, coldLimit(len(f.Servers)), what)
	defer cancel()
	if err := p.Start(lctx, f); err != nil {
		return err
	}
	_, err := waitAllHealth(lctx, r.client, f.Ports(), p.Err)
	return err
}

// healthAt is when a restarted server first answered, and how long after
// its kill.
type healthAt struct {
	At  time.Time
	Lat float64 // ms
}

// killOnce SIGKILLs srv's current instance (after checking that its pid
// runs the workload) and waits for the new one's stamp and /health. It
// returns kill to stamp, kill to /health, and exit to stamp (ms; -1 when
// the exit could not be watched: no pidfd).
func (r *runner) killOnce(ctx context.Context, p Peer, w *StampWatcher, srv ServerDef) (float64, healthAt, float64, error) {
	stamps, err := readStamps(srv.Stamp)
	if err != nil {
		return 0, healthAt{}, 0, err
	}
	if len(stamps) == 0 {
		return 0, healthAt{}, 0, fmt.Errorf("server %s wrote no stamp", srv.Name)
	}
	old := stamps[len(stamps)-1].PID
	argv, err := readCmdline(old)
	if err != nil || len(argv) == 0 || argv[0] != r.workload {
		return 0, healthAt{}, 0, fmt.Errorf("kill %s: pid %d is not the workload (argv %q, %v)", srv.Name, old, argv, err)
	}
	// Pinned before the kill and checked after the pin: the pidfd is of
	// this very process.
	exited, stopWatch, werr := watchExit(old)
	if werr == nil {
		defer stopWatch()
		if argv, err := readCmdline(old); err != nil || len(argv) == 0 || argv[0] != r.workload {
			return 0, healthAt{}, 0, fmt.Errorf("kill %s: pid %d is no longer the workload (argv %q, %v)", srv.Name, old, argv, err)
		}
	}
	t0 := time.Now()
	if err := syscall.Kill(old, syscall.SIGKILL); err != nil {
		return 0, healthAt{}, 0, fmt.Errorf("kill %s: pid %d: %w", srv.Name, old, err)
	}
	kctx, cancel := context.WithTimeout(ctx, restartBound)
	defer cancel()
	st, _, err := w.WaitNew(kctx, srv.Stamp, len(stamps), func(s Stamp) bool { return s.PID != old }, p.Err)
	if err != nil {
		return 0, healthAt{}, 0, fmt.Errorf("restart of %s after its kill: %w", srv.Name, err)
	}
	exitLat := -1.0
	if werr == nil {
		// The new process runs: the old one exited before, and its pidfd
		// said so within the poll's wakeup.
		select {
		case at := <-exited:
			exitLat = ms(st.Time.Sub(at))
		case <-kctx.Done():
		}
	}
	th, err := waitHealth(kctx, r.client, srv.Port, healthFrom(st.PID, ""), p.Err)
	if err != nil {
		return 0, healthAt{}, 0, fmt.Errorf("restart of %s after its kill: %w", srv.Name, err)
	}
	return ms(st.Time.Sub(t0)), healthAt{At: th, Lat: ms(th.Sub(t0))}, exitLat, nil
}

// checkRestarts cross-checks a peer's own restart count after the first
// round of kills, where it must equal the kills.
func (r *runner) checkRestarts(ctx context.Context, p Peer) {
	rr, ok := p.(restartReporter)
	if !ok {
		return
	}
	n, err := rr.Restarts(ctx)
	switch {
	case err != nil:
		r.res.Note("%s: could not read restart counts after the first crashes: %s", p.Name(), oneLine(err.Error()))
	case n != r.kills:
		r.res.Note("%s: status reports %d restarts after %d first crashes", p.Name(), n, r.kills)
	default:
		r.log.Printf("%s: status reports %d restarts, as expected", p.Name(), n)
	}
}

// sleepUntil waits until t, or for ctx.
// waitAllReady polls rr until every server is ready by its account, at
// most until deadline, and returns when it saw that.
func waitAllReady(ctx context.Context, rr readyReporter, deadline time.Time) (time.Time, error) {
	const every = 20 * time.Millisecond // well under the window, a file read per poll
	for {
		ok, notReady, err := rr.AllReady(ctx)
		now := time.Now()
		if ok {
			return now, nil
		}
		if now.After(deadline) {
			if err != nil {
				return now, fmt.Errorf("not all ready in the supervisor's status by the window's end: %w", err)
			}
			return now, fmt.Errorf("%d servers not ready in the supervisor's status by the window's end", notReady)
		}
		if err := sleepUntil(ctx, now.Add(every)); err != nil {
			return now, err
		}
	}
}

func sleepUntil(ctx context.Context, t time.Time) error {
	d := time.Until(t)
	if d <= 0 {
		return nil
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-tm.C:
		return nil
	}
}

func (r *runner) setCrash(rs crashRows, peer string, stampLat, healthLat []float64) {
	s, h := Summarize(stampLat), Summarize(healthLat)
	for i, v := range []float64{s.Median, s.P90, s.Max} {
		r.res.Set(rs.stamp[i], peer, v)
	}
	for i, v := range []float64{h.Median, h.P90, h.Max} {
		r.res.Set(rs.health[i], peer, v)
	}
	r.res.SetSamples(rs.stamp[0], peer, stampLat)
	r.res.SetSamples(rs.health[0], peer, healthLat)
	r.log.Printf("%s: %s → stamp median %.1f ms p90 %.1f max %.1f; → /health median %.1f ms p90 %.1f max %.1f",
		peer, rs.stamp[0].Key, s.Median, s.P90, s.Max, h.Median, h.P90, h.Max)
}

// setExitStamp sets the exit-to-stamp rows (median, p90) of one kind of
// crash; a peer none of whose exits could be watched gets a note.
func (r *runner) setExitStamp(rs crashRows, peer string, lat []float64) {
	if len(lat) == 0 {
		r.res.Note("%s: %s: no exit could be watched through a pidfd", peer, rs.exitStamp[0].Key)
		return
	}
	s := Summarize(lat)
	r.res.Set(rs.exitStamp[0], peer, s.Median)
	r.res.Set(rs.exitStamp[1], peer, s.P90)
	r.res.SetSamples(rs.exitStamp[0], peer, lat)
	r.log.Printf("%s: %s → median %.1f ms p90 %.1f", peer, rs.exitStamp[0].Key, s.Median, s.P90)
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

// fleet runs the fleet scenarios (fleetScenarios, in that order) on one
// fleet of n servers.
func (r *runner) fleet(ctx context.Context, pm peerMaker, n int) {
	name := pm.name
	sr := r.rows.size[n]
	var todo []string
	for _, sc := range peerScenarios(name, fleetScenarios) {
		if r.want(sc) {
			todo = append(todo, sc)
		}
	}
	if len(todo) == 0 {
		return
	}
	rowsOf := func(scs ...string) []RowSpec {
		var out []RowSpec
		for _, sc := range peerScenarios(name, scs) {
			if r.want(sc) {
				out = append(out, sr.forScenario(sc)...)
			}
		}
		return out
	}
	r.log.Printf("%s: fleet of %d (%s)", name, n, strings.Join(todo, ", "))
	dir, err := r.peerDir(name, fmt.Sprintf("fleet%d", n))
	if err != nil {
		r.record(rowsOf(todo...), name, nil, err)
		return
	}
	p := pm.make(dir)
	f := newFleet(r.workload, filepath.Join(dir, "stamps"), r.ports[:n])
	if err := r.portsFree(ctx, f.Ports()); err != nil {
		r.record(rowsOf(todo...), name, nil, err)
		return
	}
	defer func() { r.closePeer(p, f) }()

	t0 := time.Now()
	lctx, cancel := withLimit(ctx, coldLimit(n), fmt.Sprintf("the cold start of %d", n))
	err = p.Start(lctx, f)
	var tAll time.Time
	if err == nil {
		tAll, err = waitAllHealth(lctx, r.client, f.Ports(), p.Err)
	}
	if err != nil {
		r.log.Printf("%s: cold start %d: %v", name, n, err)
		if r.want(scCold) {
			r.record([]RowSpec{sr.cold}, name, lctx, err)
		}
		cancel()
		r.record(rowsOf(scIdle, scLogsIdle, scEdit, scUI, scStop), name, nil, fmt.Errorf("not run: cold start: %w", err))
		return
	}
	cancel()
	cold := tAll.Sub(t0)
	r.log.Printf("%s: cold start %d → all /health in %.2f s", name, n, cold.Seconds())
	if r.want(scCold) {
		r.res.Set(sr.cold, name, cold.Seconds())
	}

	if r.want(scIdle) {
		if err := r.idleCost(ctx, p, f, sr); err != nil {
			r.log.Printf("%s: idle: %v", name, err)
			r.record(rowsOf(scIdle), name, nil, err)
		}
	}
	pf, pfOK := p.(*procfleetPeer)
	if r.want(scLogsIdle) && pfOK {
		if err := r.followIdle(ctx, pf, f, sr); err != nil {
			r.log.Printf("%s: logs -f of the idle fleet: %v", name, err)
			r.record(rowsOf(scLogsIdle), name, nil, err)
		}
	}
	if r.want(scEdit) {
		lctx, cancel := withLimit(ctx, coldLimit(n), fmt.Sprintf("the edit in a fleet of %d", n))
		f2, err := r.edit(lctx, p, f, sr)
		if err != nil {
			r.log.Printf("%s: edit: %v", name, err)
			r.record(rowsOf(scEdit), name, lctx, err)
		}
		cancel()
		f = f2
	}
	if r.want(scUI) && pfOK {
		if err := r.ui(ctx, pf, f, sr); err != nil {
			r.log.Printf("%s: ui: %v", name, err)
			r.record(rowsOf(scUI), name, nil, err)
		}
	}
	if r.want(scStop) {
		lctx, cancel := withLimit(ctx, stopLimit(n), fmt.Sprintf("the stop of %d", n))
		err := r.stopAll(lctx, p, f, sr)
		if err != nil {
			r.log.Printf("%s: stop: %v", name, err)
			r.record(rowsOf(scStop), name, lctx, err)
		}
		cancel()
		if err != nil {
			return
		}
		// With everything stopped, a peer with a converge-once command
		// gets a second cold start through it.
		if ap, ok := p.(onceApplier); ok && r.want(scCold) {
			lctx, cancel := withLimit(ctx, coldLimit(n), fmt.Sprintf("apply --wait of %d", n))
			if err := r.coldOnce(ctx, lctx, p, ap, f, sr); err != nil {
				r.log.Printf("%s: cold start (apply once): %v", name, err)
				r.record([]RowSpec{sr.coldApply}, name, lctx, err)
			}
			cancel()
		}
	}
}

// coldOnce starts the fleet with the peer's converge-once command, bounded
// by lctx, then stops it again.
func (r *runner) coldOnce(ctx, lctx context.Context, p Peer, ap onceApplier, f Fleet, sr *sizeRows) error {
	if err := r.portsFree(ctx, f.Ports()); err != nil {
		return err
	}
	t0 := time.Now()
	if err := ap.ApplyOnce(lctx, f); err != nil {
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
	r.res.Set(sr.coldApply, p.Name(), d.Seconds())
	r.log.Printf("%s: cold start %d with apply --wait in %.2f s", p.Name(), len(f.Servers), d.Seconds())
	pids, err := f.currentPIDs()
	if err != nil {
		return err
	}
	sctx, cancel := context.WithTimeout(ctx, stopLimit(len(pids)))
	defer cancel()
	if err := p.StopAll(sctx); err != nil {
		return err
	}
	_, err = waitStopped(sctx, pids, f.Ports())
	return err
}

func (r *runner) idleCost(ctx context.Context, p Peer, f Fleet, sr *sizeRows) error {
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
	t0 := time.Now()
	// A second window begins once the peer's own status says every server
	// is ready (the first begins when the bench has seen every /health):
	// the first holds the tail of the start the supervisor had not seen
	// yet, the second only what it does at rest. A peer that does not
	// report readiness has one window, counted in both rows.
	rr, reports := p.(readyReporter)
	tReady, cReady := t0, c0
	if reports {
		if tReady, err = waitAllReady(ctx, rr, t0.Add(r.idle)); err != nil {
			return fmt.Errorf("idle: %w", err)
		}
		if cReady, err = readCPU(pid); err != nil {
			return err
		}
	}
	// The idle windows are measurement intervals, not waits for an event.
	if err := sleepUntil(ctx, t0.Add(r.idle)); err != nil {
		return err
	}
	if err := p.Err(); err != nil {
		return err
	}
	c1, err := readCPU(pid)
	if err != nil {
		return err
	}
	c2 := c1
	if reports {
		if err := sleepUntil(ctx, tReady.Add(r.idle)); err != nil {
			return err
		}
		if err := p.Err(); err != nil {
			return err
		}
		if c2, err = readCPU(pid); err != nil {
			return err
		}
	}
	rss, err := readRSS(pid)
	if err != nil {
		return err
	}
	after, err := f.stampCounts()
	if err != nil {
		return err
	}
	if n := restartedExcept(before, after, ""); n > 0 {
		r.res.Note("%s: %d servers restarted during the idle window of the fleet of %d", p.Name(), n, len(f.Servers))
	}
	scale := float64(30*time.Second) / float64(r.idle)
	cpu := ms(c1.Ticks-c0.Ticks) * scale
	sched := ms(c1.Sched-c0.Sched) * scale
	mib := func(b uint64) float64 { return float64(b) / (1 << 20) }
	r.res.Set(sr.idleCPU, p.Name(), cpu)
	r.res.Set(sr.idleSched, p.Name(), sched)
	readyCPU, readySched := ms(c2.Ticks-cReady.Ticks)*scale, ms(c2.Sched-cReady.Sched)*scale
	r.res.Set(sr.idleReadyCPU, p.Name(), readyCPU)
	r.res.Set(sr.idleReadySch, p.Name(), readySched)
	if reports {
		r.res.Set(sr.idleReadyLag, p.Name(), tReady.Sub(t0).Seconds())
		r.log.Printf("%s: idle %d: all ready in its status %.2f s after all /health; from there CPU %.0f ms (schedstat %.1f ms) per 30 s",
			p.Name(), len(f.Servers), tReady.Sub(t0).Seconds(), readyCPU, readySched)
	}
	r.res.Set(sr.idleRSS, p.Name(), mib(rss.Peak))
	r.res.Set(sr.idleRSSNow, p.Name(), mib(rss.Now))
	r.res.Set(sr.idleRSSFile, p.Name(), mib(rss.File))
	r.log.Printf("%s: idle %d: pid %d CPU %.0f ms (schedstat %.1f ms) per 30 s, RSS peak %.1f MiB, now %.1f MiB (%.1f file-backed)",
		p.Name(), len(f.Servers), pid, cpu, sched, mib(rss.Peak), mib(rss.Now), mib(rss.File))
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

// edit changes one server's args in the fleet file and returns the fleet
// now declared (the edited one, even when the edit failed: the file says
// so).
func (r *runner) edit(ctx context.Context, p Peer, f Fleet, sr *sizeRows) (Fleet, error) {
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
		return f2, err
	}
	th, err := waitHealth(ctx, r.client, target.Port, healthFrom(0, gen), p.Err)
	if err != nil {
		return f2, fmt.Errorf("changed server %s: %w", target.Name, err)
	}
	lat := th.Sub(t0)
	// Watch the others a little longer: a late restart counts too.
	if err := sleepUntil(ctx, time.Now().Add(editWindow)); err != nil {
		return f2, err
	}
	after, err := f2.stampCounts()
	if err != nil {
		return f2, err
	}
	others := restartedExcept(before, after, target.Name)
	r.res.Set(sr.edit, p.Name(), ms(lat))
	r.res.Set(sr.editOthers, p.Name(), float64(others))
	r.log.Printf("%s: edit → %s gen %s answering in %.0f ms; %d other servers restarted", p.Name(), target.Name, gen, ms(lat), others)
	// Wait until every server answers again before the next scenario.
	if _, err := waitAllHealth(ctx, r.client, f2.Ports(), p.Err); err != nil {
		return f2, fmt.Errorf("after edit: %w", err)
	}
	return f2, nil
}

func (r *runner) stopAll(ctx context.Context, p Peer, f Fleet, sr *sizeRows) error {
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
	tEnd, err := waitStopped(ctx, pids, f.Ports())
	if err != nil {
		return err
	}
	d := tEnd.Sub(t0)
	r.res.Set(sr.stop, p.Name(), d.Seconds())
	r.log.Printf("%s: stop all %d → gone, ports free in %.2f s", p.Name(), len(pids), d.Seconds())
	return nil
}

// floorStartStop starts one workload per port directly, all in parallel,
// until every one answers /health, then sends each SIGTERM until all are
// gone and the ports free: the floor of cold start and stop (and of
// scaling up and down). stamps is the stamp folder.
func (r *runner) floorStartStop(ctx context.Context, stamps string, ports []int) (start, stop time.Duration, err error) {
	f := newFleet(r.workload, stamps, ports)
	if err := r.portsFree(ctx, f.Ports()); err != nil {
		return 0, 0, err
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
		return 0, 0, fmt.Errorf("floor: spawn: %w", err)
	}
	uctx, cancel := context.WithTimeout(ctx, coldLimit(len(ports)))
	tAll, err := waitAllHealth(uctx, r.client, f.Ports(), noCheck)
	cancel()
	if err != nil {
		return 0, 0, fmt.Errorf("floor: start %d: %w", len(ports), err)
	}
	start = tAll.Sub(t0)
	pids := make([]int, len(cmds))
	for i, c := range cmds {
		pids[i] = c.Process.Pid
	}
	t1 := time.Now()
	for _, c := range cmds {
		_ = c.Process.Signal(syscall.SIGTERM)
	}
	sctx, cancel := context.WithTimeout(ctx, stopLimit(len(ports)))
	defer cancel()
	tEnd, err := waitStopped(sctx, pids, f.Ports())
	if err != nil {
		return start, 0, fmt.Errorf("floor: stop %d: %w", len(ports), err)
	}
	return start, tEnd.Sub(t1), nil
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
			if r.want(scCrash) {
				// One floor for both kinds of crash: the spawn is the same.
				for _, rs := range r.rows.crash {
					r.setCrash(rs, peerFloor, stampLat, healthLat)
					// The floor's spawn is after the exit: its figure is
					// the one an exit-to-stamp time compares with.
					r.setExitStamp(rs, peerFloor, stampLat)
				}
			}
			if r.want(scEdit) {
				for _, n := range r.sizes {
					r.res.Set(r.rows.size[n].edit, peerFloor, Summarize(healthLat).Median)
				}
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
			r.record(r.rows.crashSetsid[:], peerFloor, nil, err)
		} else {
			s, h := Summarize(stampLat), Summarize(healthLat)
			r.res.Set(r.rows.crashSetsid[0], peerFloor, s.Median)
			r.res.Set(r.rows.crashSetsid[1], peerFloor, h.Median)
			r.res.SetSamples(r.rows.crashSetsid[0], peerFloor, stampLat)
			r.log.Printf("floor (setsid): spawn → stamp median %.1f ms, → /health median %.1f ms", s.Median, h.Median)
		}
	}
	if r.want(scCold) || r.want(scStop) {
		for _, n := range r.sizes {
			sr := r.rows.size[n]
			dir, err := r.peerDir(peerFloor, fmt.Sprintf("fleet%d", n))
			var start, stop time.Duration
			if err == nil {
				start, stop, err = r.floorStartStop(ctx, filepath.Join(dir, "stamps"), r.ports[:n])
			}
			if start > 0 && r.want(scCold) {
				r.res.Set(sr.cold, peerFloor, start.Seconds())
				if r.withApply {
					r.res.Set(sr.coldApply, peerFloor, start.Seconds())
				}
			}
			if stop > 0 && r.want(scStop) {
				r.res.Set(sr.stop, peerFloor, stop.Seconds())
			}
			if err != nil {
				r.log.Printf("floor: %v", err)
				r.failAll(peerFloor, []string{scCold, scStop}, err)
				continue
			}
			r.log.Printf("floor: start %d → all /health in %.2f s; stop in %.2f s", n, start.Seconds(), stop.Seconds())
		}
	}
	if r.want(scScale) {
		r.floorScale(ctx)
	}
}

// growth fills the rows that divide the largest size's figure by the
// smallest's, for every column that has both.
func (r *runner) growth() {
	if len(r.sizes) < 2 {
		return
	}
	lo, hi := r.rows.size[r.sizes[0]], r.rows.size[r.sizes[len(r.sizes)-1]]
	for _, g := range []struct {
		sc       string
		row      RowSpec
		from, to RowSpec
	}{{scCold, r.rows.coldGrowth, lo.cold, hi.cold}, {scStop, r.rows.stopGrowth, lo.stop, hi.stop}} {
		if !r.want(g.sc) {
			continue
		}
		for _, c := range tableColumns {
			a, okA := r.res.Value(g.from, c)
			b, okB := r.res.Value(g.to, c)
			if okA && okB && a > 0 {
				r.res.Set(g.row, c, b/a)
			}
		}
	}
}
