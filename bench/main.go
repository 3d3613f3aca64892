package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

type options struct {
	peers     []string
	scenarios []string
	sizes     []int
	kills     int
	idle      time.Duration
	window    time.Duration
	scale     [2]int
	logsRate  int
	portBase  int
	jsonPath  string
	mdPath    string
	floor     bool
	keep      bool
	pm2Dir    string
	install   bool

	procfleetBin string
	src          string
	baseline     string
	rounds       int
}

// intList is a flag of comma-separated positive integers.
type intList struct{ v *[]int }

func (l intList) String() string {
	if l.v == nil {
		return ""
	}
	parts := make([]string, len(*l.v))
	for i, n := range *l.v {
		parts[i] = strconv.Itoa(n)
	}
	return strings.Join(parts, ",")
}

func (l intList) Set(s string) error {
	var out []int
	for _, x := range splitList(s) {
		n, err := strconv.Atoi(x)
		if err != nil || n <= 0 {
			return fmt.Errorf("%q is not a positive number", x)
		}
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	if len(out) == 0 {
		return errors.New("empty list")
	}
	slices.Sort(out)
	*l.v = out
	return nil
}

// Bounds of the fleet sizes: the port range and the machine's memory (1,000
// small Go servers take about 8 GiB) set the upper one.
const (
	minFleet = 2
	maxFleet = 2000
)

func parseFlags(args []string, stderr io.Writer) (options, error) {
	home, _ := os.UserHomeDir()
	o := options{sizes: []int{100, 1000}}
	scale := []int{10, 100}
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	peers := fs.String("peers", "procfleet,supervisord,pm2", "supervisors to measure, comma-separated")
	scenarios := fs.String("scenarios", strings.Join(allScenarios, ","), "scenarios to run, comma-separated")
	sizes := intList{&o.sizes}
	fs.Var(sizes, "fleet", "fleet sizes of the cold, stop, edit, idle, logs-idle and ui scenarios, comma-separated")
	fs.Var(sizes, "n", "the same as -fleet")
	fs.IntVar(&o.kills, "kills", 20, "crash: servers in the fleet, each killed twice (a first crash, and a second once it has been Ready over 10 s)")
	fs.DurationVar(&o.idle, "idle", 30*time.Second, "idle window")
	fs.DurationVar(&o.window, "window", 10*time.Second, "CPU window of the logs, logs-idle, neighbour and ui scenarios")
	fs.Var(intList{&scale}, "scale", "scale: FROM,TO instances (scaled up FROM → TO, then back)")
	fs.IntVar(&o.logsRate, "logs-rate", 100000, "logs: lines a second the server prints")
	fs.IntVar(&o.portBase, "port-base", 20000, "first loopback port to try; ports are checked free")
	fs.StringVar(&o.jsonPath, "json", "", "write the results as JSON to this file")
	fs.StringVar(&o.mdPath, "md", "", "also write the markdown report (header and table) to this file")
	fs.BoolVar(&o.floor, "floor", true, "measure the floors (the bench starting the servers itself)")
	fs.BoolVar(&o.keep, "keep", false, "keep the temp folder (configs, logs, stamps)")
	fs.StringVar(&o.pm2Dir, "pm2-dir", filepath.Join(home, ".cache", "procfleet-bench", "pm2"), "where PM2 is installed from npm")
	fs.StringVar(&o.procfleetBin, "procfleet-bin", "", "use this procfleet binary instead of building ./cmd/procfleet")
	fs.StringVar(&o.src, "src", "head", "what procfleet is built and benchmarked from: head (the committed HEAD, exported with git archive) or worktree (the work tree as it is)")
	fs.BoolVar(&o.install, "install", true, "install supervisord (apt-get) and PM2 (npm) when missing")
	fs.StringVar(&o.baseline, "baseline", "", "also measure this procfleet, a git revision (built from it) or a binary, in a column of its own: an A/B in one run")
	fs.IntVar(&o.rounds, "rounds", 1, "run every scenario this many times, the peers in turn (reversed every other round); rows show the median and the range")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	o.peers = splitList(*peers)
	o.scenarios = splitList(*scenarios)
	for _, p := range o.peers {
		if !slices.Contains([]string{peerProcfleet, peerSupervisord, peerPM2}, p) {
			return o, fmt.Errorf("unknown peer %q (want procfleet, supervisord, pm2)", p)
		}
	}
	for _, s := range o.scenarios {
		if !slices.Contains(allScenarios, s) {
			return o, fmt.Errorf("unknown scenario %q (want %s)", s, strings.Join(allScenarios, ", "))
		}
	}
	if o.src != "head" && o.src != "worktree" {
		return o, fmt.Errorf("-src %q: want head or worktree", o.src)
	}
	if o.sizes[0] < minFleet || o.sizes[len(o.sizes)-1] > maxFleet {
		return o, fmt.Errorf("-fleet %s: each size must be %d to %d", intList{&o.sizes}, minFleet, maxFleet)
	}
	if len(scale) != 2 || scale[1] > maxFleet {
		return o, fmt.Errorf("-scale %s: want FROM,TO with FROM < TO ≤ %d", intList{&scale}, maxFleet)
	}
	o.scale = [2]int{scale[0], scale[1]}
	if o.kills < 1 || o.idle <= 0 || o.window <= 0 || o.logsRate <= 0 || o.rounds < 1 {
		return o, errors.New("-kills, -logs-rate and -rounds must be at least 1, -idle and -window positive")
	}
	if o.baseline != "" {
		if !slices.Contains(o.peers, peerProcfleet) {
			return o, errors.New("-baseline is compared with procfleet: -peers must include it")
		}
		o.peers = slices.Insert(o.peers, slices.Index(o.peers, peerProcfleet)+1, peerBaseline)
	}
	return o, nil
}

func splitList(s string) []string {
	var out []string
	for _, x := range strings.Split(s, ",") {
		if x = strings.TrimSpace(x); x != "" && !slices.Contains(out, x) {
			out = append(out, x)
		}
	}
	return out
}

func run(args []string, stdout, stderr io.Writer) error {
	o, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	if err := platformCheck(); err != nil {
		return err
	}
	lg := log.New(stderr, "bench: ", log.Ltime|log.Lmicroseconds)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	started := time.Now()
	machine := machineInfo()

	root, err := moduleRoot(ctx)
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "procfleet-bench-")
	if err != nil {
		return fmt.Errorf("make temp folder: %w", err)
	}
	if o.keep {
		lg.Printf("keeping %s", tmp)
	} else {
		defer os.RemoveAll(tmp)
	}

	lg.Printf("building the workload")
	workload := filepath.Join(tmp, "workload")
	if _, err := runCmdIn(ctx, root, 5*time.Minute, "go", "build", "-o", workload, "./bench/workload"); err != nil {
		return fmt.Errorf("build workload: %w", err)
	}

	rep := &Report{
		Date:    started.UTC(),
		Command: "go run ./bench " + strings.Join(args, " "),
		Config: Config{Peers: o.peers, Scenarios: o.scenarios, Sizes: o.sizes, Kills: o.kills,
			Idle: o.idle.String(), Window: o.window.String(), Scale: o.scale, LogsRate: o.logsRate, PortBase: o.portBase,
			Baseline: o.baseline, Rounds: o.rounds},
	}
	res := NewResults()
	rs := newRows(settings{sizes: o.sizes, idle: o.idle, window: o.window, scale: o.scale, logsRate: o.logsRate, neighbourN: neighbourServers})
	sc := map[string]bool{}
	for _, s := range o.scenarios {
		sc[s] = true
	}
	withApply := slices.Contains(o.peers, peerProcfleet) && sc[scStop]
	for _, s := range allScenarios {
		if !sc[s] {
			continue
		}
		for _, spec := range rs.forScenario(s) {
			if strings.HasPrefix(spec.Key, "cold.apply.") && !withApply {
				continue
			}
			res.Declare(spec)
		}
	}

	maxN := o.sizes[len(o.sizes)-1]
	// Every fleet takes a prefix of ports; the last one is the dashboard's.
	ports, err := pickPorts(o.portBase, max(maxN, o.kills, neighbourServers)+1)
	if err != nil {
		return err
	}
	var scalePorts []int
	if sc[scScale] {
		if scalePorts, err = pickRange(ports[len(ports)-1]+1, o.scale[1]); err != nil {
			return err
		}
	}
	r := &runner{
		log: lg, res: res, rows: rs, tmp: tmp, root: root, src: root, workload: workload,
		ports: ports[:len(ports)-1], uiPort: ports[len(ports)-1], scalePorts: scalePorts,
		sizes: o.sizes, kills: o.kills, idle: o.idle, window: o.window, scale: o.scale, logsRate: o.logsRate,
		scenarios: sc, withApply: withApply, client: newHealthClient(), planSrc: map[string]string{},
	}

	peers, versions := r.preparePeers(ctx, o)
	rep.Versions = versions
	lg.Printf("load %s; ports %d-%d; fleets of %s; peers %s; scenarios %s", machine.LoadStart, ports[0], ports[len(ports)-1],
		intList{&o.sizes}, strings.Join(o.peers, ","), strings.Join(o.scenarios, ","))

	for round := range o.rounds {
		r.round = round
		if o.rounds > 1 {
			lg.Printf("round %d of %d", round+1, o.rounds)
		}
		if o.floor && ctx.Err() == nil {
			r.floor(ctx)
		}
		order := slices.Clone(peers)
		if round%2 == 1 {
			slices.Reverse(order) // neither peer always first
		}
		for _, p := range order {
			if ctx.Err() == nil {
				r.peerRound(ctx, p)
			}
		}
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("interrupted: %w", err)
	}
	r.growth()

	machine.LoadEnd = loadAverage()
	rep.Machine = machine
	if noisy(machine.LoadStart, machine.NProc) || noisy(machine.LoadEnd, machine.NProc) {
		res.Note("a busy machine: load average %s at the start and %s at the end, on %d CPUs; these figures are not comparable with a quiet run's", machine.LoadStart, machine.LoadEnd, machine.NProc)
	}
	rep.Duration = time.Since(started).Round(time.Second).String()
	rep.Rows, rep.Notes = res.Finish()
	var md bytes.Buffer
	if err := writeHeader(&md, rep); err != nil {
		return err
	}
	if err := RenderTable(&md, rep.Rows, rep.Notes); err != nil {
		return err
	}
	if _, err := stdout.Write(md.Bytes()); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	if o.mdPath != "" {
		if err := os.WriteFile(o.mdPath, md.Bytes(), 0o644); err != nil {
			return fmt.Errorf("write markdown: %w", err)
		}
		lg.Printf("wrote %s", o.mdPath)
	}
	if o.jsonPath != "" {
		data, err := json.MarshalIndent(rep, "", "  ")
		if err != nil {
			return fmt.Errorf("encode json: %w", err)
		}
		if err := os.WriteFile(o.jsonPath, append(data, '\n'), 0o644); err != nil {
			return fmt.Errorf("write json: %w", err)
		}
		lg.Printf("wrote %s", o.jsonPath)
	}
	return nil
}

func writeHeader(w io.Writer, rep *Report) error {
	m, v := rep.Machine, rep.Versions
	_, err := fmt.Fprintf(w, "procfleet bench, %s (took %s)\n\n"+
		"- machine: %d CPUs (%s), %s memory, Linux %s; load average %s at the start, %s at the end\n"+
		"- versions: %s; procfleet %s%s; supervisord %s; PM2 %s; node %s\n"+
		"- command: `%s`\n\n",
		rep.Date.Format("2006-01-02 15:04 UTC"), rep.Duration,
		m.NProc, m.CPU, m.MemTotal, m.Kernel, m.LoadStart, m.LoadEnd,
		v.Go, v.Procfleet, baselineText(v.Baseline, rep.Config.Rounds), orNone(v.Supervisord), orNone(v.PM2), orNone(v.Node), rep.Command)
	if err != nil {
		return fmt.Errorf("write header: %w", err)
	}
	return nil
}

func orNone(v string) string {
	if v == "" {
		return "not run"
	}
	return v
}

func baselineText(baseline string, rounds int) string {
	s := ""
	if baseline != "" {
		s = "; baseline procfleet " + baseline
	}
	if rounds > 1 {
		s += fmt.Sprintf("; %d rounds", rounds)
	}
	return s
}

// peerRound runs every scenario of one peer once.
func (r *runner) peerRound(ctx context.Context, p peerMaker) {
	if r.want(scCrash) {
		r.log.Printf("%s: crash scenario", p.name)
		if err := r.crash(ctx, p); err != nil {
			r.log.Printf("%s: crash: %v", p.name, err)
			r.failAll(p.name, []string{scCrash}, err)
		}
	}
	for _, n := range r.sizes {
		if ctx.Err() == nil {
			r.fleet(ctx, p, n)
		}
	}
	if r.want(scScale) && ctx.Err() == nil {
		r.log.Printf("%s: scale scenario", p.name)
		r.scaleTest(ctx, p)
	}
	if !isProcfleet(p.name) {
		return
	}
	if r.want(scLogs) && ctx.Err() == nil {
		r.log.Printf("%s: logs scenario", p.name)
		if err := r.logsStream(ctx, p); err != nil {
			r.log.Printf("%s: logs: %v", p.name, err)
			r.failAll(p.name, []string{scLogs}, err)
		}
	}
	if r.want(scNeighbour) && ctx.Err() == nil {
		r.log.Printf("%s: neighbour scenario", p.name)
		if err := r.neighbour(ctx, p); err != nil {
			r.log.Printf("%s: neighbour: %v", p.name, err)
			r.failAll(p.name, []string{scNeighbour}, err)
		}
	}
	if r.want(scPlan) && ctx.Err() == nil {
		if src, ok := r.planSrc[p.name]; ok {
			r.plan(ctx, p.name, src)
		} else {
			r.res.Fail(r.rows.plan, p.name, errors.New("no source to run the benchmark from (a prebuilt binary)"))
		}
	}
}

// preparePeers builds procfleet and installs the peers as needed. A peer
// that cannot be prepared gets its rows marked failed, with the reason.
func (r *runner) preparePeers(ctx context.Context, o options) ([]peerMaker, Versions) {
	v := Versions{Go: runtime.Version()}
	if out, err := exec.CommandContext(ctx, "node", "--version").Output(); err == nil {
		v.Node = strings.TrimSpace(string(out))
	}
	peerScs := slices.DeleteFunc(slices.Clone(o.scenarios), func(s string) bool { return s == scPlan })
	var peers []peerMaker
	for _, name := range o.peers {
		var mk func(dir string) Peer
		var err error
		switch name {
		case peerProcfleet:
			var bin string
			v.Procfleet, err = r.procfleetSource(ctx, o)
			if err == nil {
				bin, err = r.buildProcfleet(ctx, r.src, "procfleet", o.procfleetBin)
			}
			if err != nil && r.src != r.root {
				r.log.Printf("procfleet: HEAD does not build, measuring the work tree: %v", err)
				r.res.Note("procfleet: the committed HEAD did not build (%s); the work tree was measured instead", oneLine(err.Error()))
				r.src = r.root
				v.Procfleet = gitRev(ctx, r.root)
				bin, err = r.buildProcfleet(ctx, r.src, "procfleet", o.procfleetBin)
			}
			if err == nil {
				if o.procfleetBin == "" {
					r.planSrc[name] = r.src
				}
				mk = func(dir string) Peer { return newProcfleetPeer(bin, dir, peerProcfleet) }
			}
		case peerBaseline:
			var bin string
			bin, v.Baseline, err = r.prepareBaseline(ctx, o.baseline)
			if err == nil {
				columnTitle[peerBaseline] = "procfleet@" + v.Baseline
				mk = func(dir string) Peer { return newProcfleetPeer(bin, dir, peerBaseline) }
			}
		case peerSupervisord:
			err = ensureSupervisord(ctx, r.log, o.install)
			if err == nil {
				if out, verr := exec.CommandContext(ctx, "supervisord", "--version").Output(); verr == nil {
					v.Supervisord = strings.TrimSpace(string(out))
				}
				mk = func(dir string) Peer { return newSupervisordPeer(dir) }
			}
		case peerPM2:
			var bin string
			bin, err = ensurePM2(ctx, r.log, o.pm2Dir, o.install)
			if err == nil {
				v.PM2 = pm2Version(o.pm2Dir)
				mk = func(dir string) Peer { return newPM2Peer(bin, dir) }
			}
		}
		if err != nil {
			r.log.Printf("%s: not measured: %v", name, err)
			r.failAll(name, peerScs, err)
			r.res.Note("%s not measured: %s", name, oneLine(err.Error()))
			continue
		}
		peers = append(peers, peerMaker{name: name, make: mk})
	}
	return peers, v
}

// buildProcfleet builds src's ./cmd/procfleet as bin/<name> (or takes
// prebuilt) and checks that it has the commands the bench drives.
func (r *runner) buildProcfleet(ctx context.Context, src, name, prebuilt string) (string, error) {
	bin := prebuilt
	if bin == "" {
		bin = filepath.Join(r.tmp, "bin", name)
		if _, err := runCmdIn(ctx, src, 5*time.Minute, "go", "build", "-o", bin, "./cmd/procfleet"); err != nil {
			return "", fmt.Errorf("build procfleet: %w", err)
		}
	}
	for _, c := range []string{"up", "down"} {
		out, err := runCmd(ctx, 30*time.Second, nil, bin, c, "--help")
		if err != nil || !strings.Contains(string(out), c) {
			return "", fmt.Errorf("procfleet %s is not available yet (%s --help: %v, %q)", c, c, err, tail(out, 200))
		}
	}
	return bin, nil
}

func runCmdIn(ctx context.Context, dir string, timeout time.Duration, argv ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("run %s: %w: %s", strings.Join(argv, " "), err, tail(out, 1000))
	}
	return out, nil
}

func moduleRoot(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("find module root: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", errors.New("find module root: run the bench from inside the procfleet repository")
	}
	return filepath.Dir(mod), nil
}

// procfleetSource sets r.src, the tree procfleet is built and benchmarked
// from, and returns its version text. With -src head it is the committed
// HEAD exported into the temp folder, so other people's uncommitted edits in
// a shared work tree are not measured.
func (r *runner) procfleetSource(ctx context.Context, o options) (string, error) {
	r.src = r.root
	if o.src == "worktree" || o.procfleetBin != "" {
		return gitRev(ctx, r.root), nil
	}
	rev, err := headRev(ctx, r.root)
	if err != nil {
		return "", fmt.Errorf("find HEAD: %w", err)
	}
	// rev, not HEAD: others commit to the shared tree meanwhile, and the
	// version reported must be the one exported.
	dst := filepath.Join(r.tmp, "src")
	if err := exportRev(ctx, r.root, rev, dst); err != nil {
		return "", fmt.Errorf("export HEAD: %w", err)
	}
	r.src = dst
	return rev + " (committed HEAD)", nil
}

// exportRev writes the tree of commit rev of the repository at root into
// dst (git archive), so that it builds apart from the work tree.
func exportRev(ctx context.Context, root, rev, dst string) error {
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return fmt.Errorf("export %s: %w", rev, err)
	}
	archive := dst + ".tar"
	if _, err := runCmdIn(ctx, root, 2*time.Minute, "git", "archive", "--format=tar", "-o", archive, rev); err != nil {
		return fmt.Errorf("export %s: %w", rev, err)
	}
	if _, err := runCmdIn(ctx, dst, 2*time.Minute, "tar", "-xf", archive); err != nil {
		return fmt.Errorf("export %s: %w", rev, err)
	}
	return nil
}

// prepareBaseline returns the baseline binary and its name: baseline is
// an executable file, used as it is, or a git revision, exported and
// built (and its reconciler benchmark run from that tree).
func (r *runner) prepareBaseline(ctx context.Context, baseline string) (string, string, error) {
	if st, err := os.Stat(baseline); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
		bin, err := r.buildProcfleet(ctx, "", "", baseline)
		return bin, filepath.Base(baseline), err
	}
	out, err := runCmdIn(ctx, r.root, 30*time.Second, "git", "rev-parse", "--short", "--verify", baseline+"^{commit}")
	if err != nil {
		return "", "", fmt.Errorf("-baseline %q is neither an executable file nor a commit: %w", baseline, err)
	}
	rev := strings.TrimSpace(string(out))
	dst := filepath.Join(r.tmp, "src-baseline")
	if err := exportRev(ctx, r.root, rev, dst); err != nil {
		return "", "", err
	}
	bin, err := r.buildProcfleet(ctx, dst, "procfleet-baseline", "")
	if err == nil {
		r.planSrc[peerBaseline] = dst
	}
	return bin, rev, err
}

// headRev is the short hash of the commit HEAD names now.
func headRev(ctx context.Context, root string) (string, error) {
	out, err := runCmdIn(ctx, root, 30*time.Second, "git", "rev-parse", "--short", "HEAD")
	return strings.TrimSpace(string(out)), err
}

func gitRev(ctx context.Context, root string) string {
	rev, err := headRev(ctx, root)
	if err != nil {
		return "unknown"
	}
	if st, err := runCmdIn(ctx, root, 30*time.Second, "git", "status", "--porcelain", "--untracked-files=no"); err == nil && len(strings.TrimSpace(string(st))) > 0 {
		rev += " (work tree with uncommitted changes)"
	}
	return rev
}

// pickPorts returns n loopback ports from base upwards that nothing listens
// on and that can be bound now.
func pickPorts(base, n int) ([]int, error) {
	listening, err := listeningPorts()
	if err != nil {
		return nil, err
	}
	var out []int
	for p := base; p < 65536 && len(out) < n; p++ {
		if p-base >= n+200 {
			break
		}
		if listening[p] {
			continue
		}
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			continue
		}
		_ = l.Close()
		out = append(out, p)
	}
	if len(out) < n {
		return nil, fmt.Errorf("pick ports: only %d free ports in %d-%d, need %d", len(out), base, base+n+199, n)
	}
	return out, nil
}

// pickRange returns the first n consecutive free loopback ports from base
// on (replicated servers take port+i).
func pickRange(base, n int) ([]int, error) {
	for start := base; start+n <= 65536 && start < base+1000; {
		ports, err := pickPorts(start, n)
		if err != nil {
			return nil, fmt.Errorf("pick %d consecutive ports: %w", n, err)
		}
		if ports[n-1]-ports[0] == n-1 {
			return ports, nil
		}
		// Restart past the first gap.
		for i := 1; i < n; i++ {
			if ports[i] != ports[i-1]+1 {
				start = ports[i-1] + 1
				break
			}
		}
	}
	return nil, fmt.Errorf("pick %d consecutive ports from %d: none free", n, base)
}

// loadAverage returns the three load averages of /proc/loadavg.
func loadAverage() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(data))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// noisy reports whether a load line (loadAverage) shows a busy machine:
// its 1-minute load above half the CPUs.
func noisy(load string, nproc int) bool {
	f := strings.Fields(load)
	if len(f) == 0 {
		return false
	}
	l, err := strconv.ParseFloat(f[0], 64)
	return err == nil && l > float64(nproc)/2
}

func machineInfo() Machine {
	m := Machine{NProc: runtime.NumCPU(), MemTotal: "unknown", Kernel: "unknown", CPU: "unknown", LoadStart: loadAverage()}
	if data, err := os.ReadFile("/proc/meminfo"); err == nil {
		if kb, err := parseStatusKB(data, "MemTotal"); err == nil {
			m.MemTotal = fmt.Sprintf("%.1f GiB", float64(kb)/(1<<20))
		}
	}
	if data, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(data))
	}
	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
	}
	return m
}

// ensureSupervisord installs the Debian package "supervisor" when
// supervisord or supervisorctl is missing.
func ensureSupervisord(ctx context.Context, lg *log.Logger, install bool) error {
	_, e1 := exec.LookPath("supervisord")
	_, e2 := exec.LookPath("supervisorctl")
	if e1 == nil && e2 == nil {
		return nil
	}
	if !install {
		return errors.New("supervisord is not installed (apt-get install supervisor, or run with -install)")
	}
	lg.Printf("installing supervisor (apt-get)")
	env := []string{"DEBIAN_FRONTEND=noninteractive"}
	if _, err := runCmd(ctx, 5*time.Minute, env, "apt-get", "update"); err != nil {
		return fmt.Errorf("install supervisord: %w", err)
	}
	if _, err := runCmd(ctx, 5*time.Minute, env, "apt-get", "install", "-y", "supervisor"); err != nil {
		return fmt.Errorf("install supervisord: %w", err)
	}
	return nil
}

// ensurePM2 installs PM2 from npm into dir when missing and returns the pm2
// executable.
func ensurePM2(ctx context.Context, lg *log.Logger, dir string, install bool) (string, error) {
	bin := filepath.Join(dir, "node_modules", ".bin", "pm2")
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	if !install {
		return "", fmt.Errorf("pm2 is not installed in %s (run with -install)", dir)
	}
	if _, err := exec.LookPath("npm"); err != nil {
		return "", fmt.Errorf("install pm2: npm not found: %w", err)
	}
	lg.Printf("installing pm2 (npm) into %s", dir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("install pm2: %w", err)
	}
	if _, err := runCmd(ctx, 5*time.Minute, nil, "npm", "install", "--prefix", dir, "--no-audit", "--no-fund", "pm2"); err != nil {
		return "", fmt.Errorf("install pm2: %w", err)
	}
	if _, err := os.Stat(bin); err != nil {
		return "", fmt.Errorf("install pm2: %w", err)
	}
	return bin, nil
}

func pm2Version(dir string) string {
	data, err := os.ReadFile(filepath.Join(dir, "node_modules", "pm2", "package.json"))
	if err != nil {
		return "unknown"
	}
	var pkg struct {
		Version string `json:"version"`
	}
	if json.Unmarshal(data, &pkg) != nil {
		return "unknown"
	}
	return pkg.Version
}

// plan runs the reconciler's 1,000-server benchmark of src, when it
// exists, for peer's column.
func (r *runner) plan(ctx context.Context, peer, src string) {
	const name = "BenchmarkReconcilePass1000"
	found := false
	files, _ := filepath.Glob(filepath.Join(src, "reconciler", "*_test.go"))
	for _, f := range files {
		if data, err := os.ReadFile(f); err == nil && strings.Contains(string(data), "func "+name+"(") {
			found = true
		}
	}
	if !found {
		r.res.Fail(r.rows.plan, peer, fmt.Errorf("%s not found in ./reconciler", name))
		return
	}
	r.log.Printf("%s: plan: go test -bench %s ./reconciler/", peer, name)
	out, err := runCmdIn(ctx, src, 10*time.Minute, "go", "test", "-run=^$", "-bench=^"+name+"$", "-benchmem", "-count=1", "./reconciler/")
	if err != nil {
		r.res.Fail(r.rows.plan, peer, err)
		return
	}
	ns, err := parseBenchNsPerOp(out, name)
	if err != nil {
		r.res.Fail(r.rows.plan, peer, err)
		return
	}
	r.res.Set(r.rows.plan, peer, ns/1e6)
	r.log.Printf("%s: plan: %.2f ms per pass", peer, ns/1e6)
}
