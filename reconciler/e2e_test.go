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

	"github.com/go-logr/logr/testr"

	"github.com/procfleet/procfleet/actuate"
	"github.com/procfleet/procfleet/internal/testserver"
	"github.com/procfleet/procfleet/observe"
)

func TestMain(m *testing.M) {
	testserver.RunIfHelper()
	runBenchApplyIfHelper()
	os.Exit(m.Run())
}

// testFleet is a fleet of test servers in a temporary folder.
type testFleet struct {
	t     *testing.T
	dir   string
	file  string
	state *actuate.StateDir
	specs map[string]*testSpec
	order []string
}

type testSpec struct {
	name    string
	port    int
	args    []string
	deps    []string
	policy  string
	extra   string // more YAML under spec:, indented by two spaces
	noStamp bool
	grace   int // terminationGracePeriodSeconds; 0 means 5
	// replicas, when set, runs the server as that many instances on
	// port, port+1, ..., each stamping <name>-<index>.stamp.
	replicas *int
}

func newTestFleet(t *testing.T) *testFleet {
	t.Helper()
	dir := t.TempDir()
	sd, err := actuate.OpenStateDir(filepath.Join(dir, ".procfleet"))
	if err != nil {
		t.Fatal(err)
	}
	f := &testFleet{t: t, dir: dir, file: filepath.Join(dir, "procfleet.yaml"), state: sd, specs: map[string]*testSpec{}}
	t.Cleanup(f.killAll)
	return f
}

func (f *testFleet) stamp(name string) string { return filepath.Join(f.dir, name+".stamp") }

func (f *testFleet) add(s *testSpec) *testSpec {
	// A port added later by FreePort may repeat one the fleet has: keep a
	// fleet's distinct (tests that pick several at once use FreePorts).
	for taken := true; taken && s.port > 0; {
		taken = false
		for n, o := range f.specs {
			if n != s.name && o.port == s.port {
				taken, s.port = true, testserver.FreePort(f.t)
			}
		}
	}
	if _, ok := f.specs[s.name]; !ok {
		f.order = append(f.order, s.name)
	}
	f.specs[s.name] = s
	return s
}

func (f *testFleet) remove(name string) {
	delete(f.specs, name)
	for i, n := range f.order {
		if n == name {
			f.order = append(f.order[:i], f.order[i+1:]...)
			break
		}
	}
}

// write saves the fleet file atomically, as editors do.
func (f *testFleet) write() {
	f.t.Helper()
	var b strings.Builder
	for i, n := range f.order {
		s := f.specs[n]
		if i > 0 {
			b.WriteString("---\n")
		}
		args := append([]string{}, s.args...)
		port, stamp := strconv.Itoa(s.port), f.stamp(n)
		if s.replicas != nil {
			port, stamp = "$(PORT)", f.stamp(n+"-$(PROCFLEET_REPLICA)")
		}
		if s.port > 0 {
			args = append(args, "-port", port)
		}
		if !s.noStamp {
			args = append(args, "-stamp", stamp)
		}
		argv := testserver.Command(args...)
		q := make([]string, len(argv))
		for i, a := range argv {
			q[i] = strconv.Quote(a)
		}
		fmt.Fprintf(&b, "apiVersion: procfleet.dev/v1alpha1\nkind: Server\nmetadata:\n  name: %s\nspec:\n", n)
		fmt.Fprintf(&b, "  command: [%s]\n", strings.Join(q, ", "))
		fmt.Fprintf(&b, "  env: [{name: %s, value: \"1\"}]\n", testserver.EnvVar)
		grace := s.grace
		if grace == 0 {
			grace = 5
		}
		fmt.Fprintf(&b, "  terminationGracePeriodSeconds: %d\n  killTimeoutSeconds: 5\n", grace)
		if s.port > 0 {
			fmt.Fprintf(&b, "  port: %d\n", s.port)
		}
		if len(s.deps) > 0 {
			fmt.Fprintf(&b, "  dependsOn: [%s]\n", strings.Join(s.deps, ", "))
		}
		if s.replicas != nil {
			fmt.Fprintf(&b, "  replicas: %d\n", *s.replicas)
		}
		if s.policy != "" {
			fmt.Fprintf(&b, "  restartPolicy: %s\n", s.policy)
		}
		b.WriteString(s.extra)
	}
	tmp := f.file + ".tmp"
	if err := os.WriteFile(tmp, []byte(b.String()), 0o644); err != nil {
		f.t.Fatal(err)
	}
	if err := os.Rename(tmp, f.file); err != nil {
		f.t.Fatal(err)
	}
}

// starts returns the pids in a server's stamp file: one line per instance
// that ever started.
func (f *testFleet) starts(name string) []int {
	b, err := os.ReadFile(f.stamp(name))
	if err != nil {
		return nil
	}
	var pids []int
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		fields := strings.Fields(line)
		if len(fields) == 2 {
			pid, _ := strconv.Atoi(fields[1])
			pids = append(pids, pid)
		}
	}
	return pids
}

// killAll SIGKILLs every test server this fleet ever started that is still
// alive: each pid from the stamp files, and each process whose command line
// names this fleet's folder (one spawned as the reconciler ended, that had
// not written its stamp yet: up leaves its servers running by design),
// pinned and checked again to name this fleet's folder before it is
// signalled. It runs after Run has returned, so no spawn is in flight.
func (f *testFleet) killAll() {
	pids := map[int]bool{}
	entries, _ := os.ReadDir(f.dir)
	for _, e := range entries {
		if name, ok := strings.CutSuffix(e.Name(), ".stamp"); ok {
			for _, pid := range f.starts(name) {
				pids[pid] = true
			}
		}
	}
	procs, _ := os.ReadDir("/proc") // none where there is no /proc: stamps only
	for _, e := range procs {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline")); err == nil && strings.Contains(string(b), f.dir) {
			pids[pid] = true
		}
	}
	for pid := range pids {
		h, err := observe.Pin(pid)
		if err != nil {
			continue
		}
		id, err := h.Identity()
		if err == nil && strings.Contains(strings.Join(id.Cmdline, " "), f.dir) {
			_ = h.Signal(syscall.SIGKILL)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_ = h.Wait(ctx)
			cancel()
		}
		_ = h.Close()
	}
}

// events collects OnEvent calls.
type events struct {
	mu   sync.Mutex
	list []Event
}

func (e *events) add(ev Event) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.list = append(e.list, ev)
}

func (e *events) all() []Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]Event(nil), e.list...)
}

// index returns the position of the first event of server with reason, -1
// when none.
func (e *events) index(server, reason string) int {
	for i, ev := range e.all() {
		if ev.Server == server && ev.Reason == reason {
			return i
		}
	}
	return -1
}

func (e *events) count(server, reason string) int {
	n := 0
	for _, ev := range e.all() {
		if ev.Server == server && ev.Reason == reason {
			n++
		}
	}
	return n
}

type running struct {
	r      *Reconciler
	ev     *events
	cancel context.CancelFunc
	done   chan struct{} // closed when Run returned, with err set
	err    error
}

// stop ends Run (servers keep running) and waits for it.
func (rr *running) stop(t *testing.T) {
	t.Helper()
	rr.cancel()
	select {
	case <-rr.done:
		if rr.err != nil {
			t.Errorf("Run: %v", rr.err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
}

func (f *testFleet) run(t *testing.T, mut func(*Config)) *running {
	t.Helper()
	ev := &events{}
	cfg := Config{Files: []string{f.file}, StateDir: f.state, Log: testr.New(t), OnEvent: ev.add, ResyncPeriod: -1}
	if mut != nil {
		mut(&cfg)
	}
	r, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	rr := &running{r: r, ev: ev, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(rr.done)
		rr.err = r.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-rr.done
	})
	return rr
}

// waitStatus polls the reconciler's status until cond holds (bounded).
func waitStatus(t *testing.T, r *Reconciler, what string, cond func(Status) bool) Status {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		st := r.Status()
		if cond(st) {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s; status:\n%s", what, dumpStatus(st))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func dumpStatus(st Status) string {
	var b strings.Builder
	for _, s := range st.Servers {
		fmt.Fprintf(&b, "  %s: %s ready=%v pid=%d restarts=%d reason=%q message=%q\n", s.Name, s.Phase, s.Ready, s.PID, s.Restarts, s.Reason, s.Message)
	}
	for _, e := range st.Errors {
		fmt.Fprintf(&b, "  error: %s:%d: %s: %s\n", e.File, e.Line, e.Field, e.Message)
	}
	return b.String()
}

func allReady(names ...string) func(Status) bool {
	return func(st Status) bool {
		for _, n := range names {
			s, ok := st.Get(n)
			if !ok || s.Phase != PhaseRunning || !s.Ready {
				return false
			}
		}
		return true
	}
}

func pidOf(st Status, name string) int {
	s, _ := st.Get(name)
	return s.PID
}

// TestFleetLifecycle drives one fleet through DESIGN.md "Reconciling": cold
// start in dependsOn order, kill -9 => restart by exit event (resync is
// off), args edit => only that server replaced, probe-only edit => no
// restart, removal => stopped with its record gone and its port free.
func TestFleetLifecycle(t *testing.T) {
	f := newTestFleet(t)
	ports := testserver.FreePorts(t, 3)
	f.add(&testSpec{name: "db", port: ports[0], args: []string{"-listen-delay", "150ms"}})
	f.add(&testSpec{name: "api", port: ports[1], deps: []string{"db"}})
	f.add(&testSpec{name: "web", port: ports[2]})
	f.write()
	rr := f.run(t, nil)

	st := waitStatus(t, rr.r, "cold start", allReady("db", "api", "web"))
	if dbReady, apiStart := rr.ev.index("db", ReasonReady), rr.ev.index("api", ReasonStarting); dbReady < 0 || apiStart < dbReady {
		t.Errorf("api started (event %d) before db was Ready (event %d)", apiStart, dbReady)
	}
	pids := map[string]int{"db": pidOf(st, "db"), "api": pidOf(st, "api"), "web": pidOf(st, "web")}

	// kill -9 web: restarted through its exit event (no resync runs).
	if err := syscall.Kill(pids["web"], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	st = waitStatus(t, rr.r, "web restarted", func(st Status) bool {
		s, _ := st.Get("web")
		return s.Ready && s.PID != pids["web"] && s.PID != 0
	})
	web, _ := st.Get("web")
	if web.Restarts != 1 || web.LastExit == nil || web.LastExit.Signal != "SIGKILL" {
		t.Errorf("web after kill -9: restarts %d, lastExit %+v; want 1 and SIGKILL", web.Restarts, web.LastExit)
	}
	if pidOf(st, "db") != pids["db"] || pidOf(st, "api") != pids["api"] {
		t.Errorf("kill of web touched others: %v -> db %d api %d", pids, pidOf(st, "db"), pidOf(st, "api"))
	}
	pids["web"] = web.PID

	// Identical content saved atomically, then deleted and written again:
	// nothing restarts (the start counts are checked at the end).
	f.write()
	if err := os.Remove(f.file); err != nil {
		t.Fatal(err)
	}
	f.write()

	// Edit api's args and web's probes in one save: api replaced, web not.
	f.specs["api"].args = []string{"-print", "v2"}
	f.specs["web"].extra = "  readinessProbe:\n    httpGet: {path: /health}\n    periodSeconds: 1\n"
	f.write()
	st = waitStatus(t, rr.r, "api replaced", func(st Status) bool {
		s, _ := st.Get("api")
		return s.Ready && s.PID != pids["api"] && s.PID != 0
	})
	if pidOf(st, "db") != pids["db"] || pidOf(st, "web") != pids["web"] {
		t.Errorf("args edit of api restarted others: before %v, now db %d web %d", pids, pidOf(st, "db"), pidOf(st, "web"))
	}
	if n := len(f.starts("web")); n != 2 {
		t.Errorf("web started %d times, want 2 (the probe-only change must not restart it)", n)
	}
	pids["api"] = pidOf(st, "api")

	// Remove web: stopped, record gone, port free.
	webPort := f.specs["web"].port
	f.remove("web")
	f.write()
	waitStatus(t, rr.r, "web gone", func(st Status) bool { _, ok := st.Get("web"); return !ok })
	if _, err := f.state.ReadRecord("web"); err == nil {
		t.Errorf("web's record still there after prune")
	}
	if !testserver.PortFree(webPort) {
		t.Errorf("web's port %d still held after prune", webPort)
	}
	st = rr.r.Status()
	if pidOf(st, "db") != pids["db"] || pidOf(st, "api") != pids["api"] {
		t.Errorf("pruning web touched others")
	}
	for name, want := range map[string]int{"db": 1, "api": 2, "web": 2} {
		if got := len(f.starts(name)); got != want {
			t.Errorf("%s started %d times, want %d", name, got, want)
		}
	}
	// status.json is written.
	rr.stop(t)
	disk, err := ReadStatus(f.state.StatusPath())
	if err != nil {
		t.Fatal(err)
	}
	if s, ok := disk.Get("db"); !ok || s.Phase != PhaseRunning || s.PID != pids["db"] {
		t.Errorf("status.json db = %+v", s)
	}
}

// TestAdoptionAfterRestart: a reconciler that goes away leaves its servers
// running; the next one adopts them and never starts a second instance.
func TestAdoptionAfterRestart(t *testing.T) {
	f := newTestFleet(t)
	f.add(&testSpec{name: "a", port: testserver.FreePort(t)})
	f.add(&testSpec{name: "b"})
	f.write()
	rr := f.run(t, nil)
	st := waitStatus(t, rr.r, "first start", allReady("a", "b"))
	a1, b1 := pidOf(st, "a"), pidOf(st, "b")
	rr.stop(t)

	rr2 := f.run(t, nil)
	st = waitStatus(t, rr2.r, "adoption", allReady("a", "b"))
	if pidOf(st, "a") != a1 || pidOf(st, "b") != b1 {
		t.Errorf("after restart pids a %d b %d, want adopted %d %d", pidOf(st, "a"), pidOf(st, "b"), a1, b1)
	}
	if rr2.ev.count("a", ReasonAdopted) != 1 || rr2.ev.count("a", ReasonStarting) != 0 {
		t.Errorf("a: %d Adopted, %d Starting events; want 1, 0", rr2.ev.count("a", ReasonAdopted), rr2.ev.count("a", ReasonStarting))
	}
	for _, n := range []string{"a", "b"} {
		// b has no port: Ready as soon as it runs, maybe before its stamp.
		waitFor(t, n+"'s stamp", func() bool { return len(f.starts(n)) >= 1 })
		if got := len(f.starts(n)); got != 1 {
			t.Errorf("%s started %d times, want 1", n, got)
		}
	}
	// The adopted process is watched: kill -9 restarts it.
	if err := syscall.Kill(a1, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	st = waitStatus(t, rr2.r, "adopted a restarted", func(st Status) bool {
		s, _ := st.Get("a")
		return s.Ready && s.PID != a1 && s.PID != 0
	})
	// -1 either way: status unknown, or killed by SIGKILL once learned from
	// its pidfd after its parent (this test process) reaped it.
	if s, _ := st.Get("a"); s.LastExit == nil || s.LastExit.Code != -1 ||
		(s.LastExit.Signal != "SIGKILL" && !strings.Contains(s.LastExit.Reason, "status unknown")) {
		t.Errorf("adopted a's lastExit = %+v, want status unknown (-1) or killed by SIGKILL", s.LastExit)
	}
}

// TestPortConflictQuarantines: a stranger on the port => Quarantined /
// PortConflict, nothing started, the stranger never signalled; once the
// port is free (found by the resync), the server starts.
func TestPortConflictQuarantines(t *testing.T) {
	f := newTestFleet(t)
	port := testserver.FreePort(t)
	// The stranger: a test server started by the test, not by procfleet.
	sigFile := filepath.Join(f.dir, "stranger.signals")
	ready := filepath.Join(f.dir, "stranger.ready")
	stranger := startStranger(t, port, sigFile, ready)
	f.add(&testSpec{name: "api", port: port})
	f.write()
	rr := f.run(t, func(c *Config) { c.ResyncPeriod = 100 * time.Millisecond })

	st := waitStatus(t, rr.r, "quarantine", func(st Status) bool {
		s, _ := st.Get("api")
		return s.Phase == PhaseQuarantined
	})
	s, _ := st.Get("api")
	if s.Reason != ReasonPortConflict || !strings.Contains(s.Message, strconv.Itoa(stranger.Process.Pid)) {
		t.Errorf("quarantine reason %q, message %q; want PortConflict naming the holder pid %d", s.Reason, s.Message, stranger.Process.Pid)
	}
	if n := len(f.starts("api")); n != 0 {
		t.Errorf("api started %d times while its port was held", n)
	}
	if b, _ := os.ReadFile(sigFile); len(b) != 0 {
		t.Errorf("the stranger received signals: %q", b)
	}
	// Free the port: the resync sees it and starts the server.
	_ = stranger.Process.Kill()
	_, _ = stranger.Process.Wait()
	waitStatus(t, rr.r, "api running once the port is free", allReady("api"))
}

// startStranger starts a test server that procfleet does not own, and
// waits for its ready-file handshake.
func startStranger(t *testing.T, port int, sigFile, ready string) *exec.Cmd {
	t.Helper()
	argv := testserver.Command("-port", strconv.Itoa(port), "-signals", sigFile, "-ready-file", ready)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), testserver.Env())
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_, _ = cmd.Process.Wait()
	})
	deadline := time.Now().Add(10 * time.Second)
	for {
		if b, err := os.ReadFile(ready); err == nil && len(b) > 0 {
			return cmd
		}
		if time.Now().After(deadline) {
			t.Fatal("stranger did not become ready")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
