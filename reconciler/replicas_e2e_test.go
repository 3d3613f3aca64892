package reconciler

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"

	"github.com/procfleet/procfleet/internal/testserver"
	"github.com/procfleet/procfleet/spec"
)

// instances lists api-0 ... api-<n-1>.
func instances(server string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = spec.InstanceName(server, i)
	}
	return out
}

// pidsOf maps each name to its pid in st.
func pidsOf(st Status, names ...string) map[string]int {
	out := map[string]int{}
	for _, n := range names {
		out[n] = pidOf(st, n)
	}
	return out
}

// healthPID asks the test server on port which pid answers (its /health
// says "pid N").
func healthPID(t *testing.T, port int) int {
	t.Helper()
	c := http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(fmt.Sprintf("http://127.0.0.1:%d/health", port))
	if err != nil {
		t.Fatalf("ask port %d which pid answers: %v", port, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	f := strings.Fields(string(b))
	if len(f) != 2 || f[0] != "pid" {
		t.Fatalf("port %d answered %q, want \"pid N\"", port, b)
	}
	pid, _ := strconv.Atoi(f[1])
	return pid
}

// readySampler counts, every 10 ms, the instances of a server that are
// Running and Ready in the reconciler's status (one consistent snapshot
// each time), and keeps the lowest count seen, and when, from the first
// sample in which at least arm were Ready.
type readySampler struct {
	stop    chan struct{}
	done    chan struct{}
	arm     int
	mu      sync.Mutex
	samples int // counted once armed
	lowest  int
	lowAt   string
}

// sampleReady starts sampling the instances of names in r's status. It
// takes the first sample before it returns, so that a change the caller
// makes next is sampled from its start.
func sampleReady(r *Reconciler, names []string, arm int) *readySampler {
	s := &readySampler{stop: make(chan struct{}), done: make(chan struct{}), arm: arm, lowest: len(names)}
	sample := func() {
		st := r.Status()
		n := 0
		for _, name := range names {
			if ss, ok := st.Get(name); ok && ss.Phase == PhaseRunning && ss.Ready {
				n++
			}
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.samples > 0 || n >= s.arm {
			s.samples++
			if n < s.lowest {
				s.lowest, s.lowAt = n, dumpStatus(st)
			}
		}
	}
	sample()
	go func() {
		defer close(s.done)
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-s.stop:
				return
			case <-tick.C:
			}
			sample()
		}
	}()
	return s
}

// end stops the sampler and returns how many samples it took once armed
// and the lowest count of Ready instances, with the status it saw then.
func (s *readySampler) end() (samples, lowest int, at string) {
	close(s.stop)
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.samples, s.lowest, s.lowAt
}

// checkInstances checks that each instance of api in st runs on its own
// port (base + index), answers there with the pid status shows, and is
// reported as a replica.
func checkInstances(t *testing.T, st Status, base int, names ...string) {
	t.Helper()
	for _, n := range names {
		ss, _ := st.Get(n)
		_, i, _ := SplitInstance(n)
		if ss.Port != base+i || ss.ReplicaOf != "api" || ss.Index == nil || *ss.Index != i {
			t.Errorf("%s: port %d replicaOf %q index %v; want port %d, replica %d of api", n, ss.Port, ss.ReplicaOf, ss.Index, base+i, i)
			continue
		}
		if pid := healthPID(t, base+i); pid != ss.PID {
			t.Errorf("%s: pid %d answers on port %d, status says pid %d", n, pid, base+i, ss.PID)
		}
	}
	if _, ok := st.Get("api"); ok {
		t.Errorf("status lists a server api beside its instances:\n%s", dumpStatus(st))
	}
}

// TestReplicasScale: three replicas come up on three ports (each with its
// record and its $(PORT) and $(PROCFLEET_REPLICA)); kill -9 of api-1
// restarts only it; replicas 3 -> 5 starts api-3 and api-4, touching no
// other; 5 -> 2 stops api-4, api-3 and api-2 (in parallel: each has had
// its SIGTERM before any is killed), forgets them, frees their ports and
// leaves api-0 and api-1 alone.
func TestReplicasScale(t *testing.T) {
	f := newTestFleet(t)
	base := testserver.FreePortRange(t, 5)
	n := 3
	// Ignoring SIGTERM, a stopped instance is killed after the grace
	// period (5 s): stops made one after another would take 15 s.
	api := f.add(&testSpec{name: "api", port: base, replicas: &n, args: []string{"-ignore-term"}})
	f.write()
	rr := f.run(t, nil)

	three := instances("api", 3)
	st := waitStatus(t, rr.r, "three replicas", allReady(three...))
	checkInstances(t, st, base, three...)
	for i, name := range three {
		rec, err := f.state.ReadRecord(name)
		if err != nil || rec.Port != base+i || rec.PID != pidOf(st, name) {
			t.Errorf("%s: record %+v (%v), want its pid on port %d", name, rec, err, base+i)
		}
		if got := len(f.starts(name)); got != 1 {
			t.Errorf("%s started %d times, want 1 (its stamp file names its $(PROCFLEET_REPLICA))", name, got)
		}
	}
	pids := pidsOf(st, three...)

	// kill -9 api-1: only it restarts.
	if err := syscall.Kill(pids["api-1"], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	st = waitStatus(t, rr.r, "api-1 restarted", func(st Status) bool {
		s, _ := st.Get("api-1")
		return s.Ready && s.PID != 0 && s.PID != pids["api-1"]
	})
	if pidOf(st, "api-0") != pids["api-0"] || pidOf(st, "api-2") != pids["api-2"] {
		t.Errorf("kill -9 of api-1 touched the others: %v -> api-0 %d api-2 %d", pids, pidOf(st, "api-0"), pidOf(st, "api-2"))
	}
	if s, _ := st.Get("api-1"); s.Restarts != 1 || s.LastExit == nil || s.LastExit.Signal != "SIGKILL" {
		t.Errorf("api-1 after kill -9: restarts %d, lastExit %+v; want 1, SIGKILL", s.Restarts, s.LastExit)
	}
	pids = pidsOf(st, three...)

	// 3 -> 5: api-3 and api-4 start; the others are untouched.
	n = 5
	api.replicas = &n
	f.write()
	five := instances("api", 5)
	st = waitStatus(t, rr.r, "five replicas", allReady(five...))
	checkInstances(t, st, base, five...)
	for _, name := range three {
		if pidOf(st, name) != pids[name] {
			t.Errorf("scaling up replaced %s: pid %d -> %d", name, pids[name], pidOf(st, name))
		}
	}
	for name, want := range map[string]int{"api-0": 1, "api-1": 2, "api-2": 1, "api-3": 1, "api-4": 1} {
		if got := len(f.starts(name)); got != want {
			t.Errorf("%s started %d times, want %d", name, got, want)
		}
	}
	pids = pidsOf(st, five...)

	// 5 -> 2: api-2, api-3 and api-4 stop, in parallel; 0 and 1 stay.
	n = 2
	api.replicas = &n
	f.write()
	st = waitStatus(t, rr.r, "api-2..4 stopped and forgotten", func(st Status) bool {
		for _, name := range five[2:] {
			if _, ok := st.Get(name); ok {
				return false
			}
		}
		return true
	})
	for i, name := range five[2:] {
		if _, err := f.state.ReadRecord(name); err == nil {
			t.Errorf("%s's record still there after scaling down", name)
		}
		if !testserver.PortFree(base + 2 + i) {
			t.Errorf("%s's port %d still held after scaling down", name, base+2+i)
		}
		if syscall.Kill(pids[name], 0) == nil {
			t.Errorf("%s's pid %d alive after scaling down", name, pids[name])
		}
		if i := rr.ev.index(name, ReasonStopping); i < 0 || !strings.Contains(rr.ev.all()[i].Message, "scaled down: api declares 2 replicas") {
			t.Errorf("%s: no Stopping event saying it was scaled down", name)
		}
	}
	if got := pidsOf(st, "api-0", "api-1"); got["api-0"] != pids["api-0"] || got["api-1"] != pids["api-1"] {
		t.Errorf("scaling down touched api-0 or api-1: %v -> %v", pids, got)
	}
	// In parallel: every SIGTERM was sent before the first SIGKILL.
	lastTerm, firstKill := -1, -1
	for i, e := range rr.ev.all() {
		if e.Reason != "Signal" {
			continue
		}
		switch {
		case strings.Contains(e.Message, "sent SIGTERM"):
			lastTerm = i
		case strings.Contains(e.Message, "sent SIGKILL") && firstKill < 0:
			firstKill = i
		}
	}
	if lastTerm < 0 || firstKill < 0 || lastTerm > firstKill {
		t.Errorf("scaling down: last SIGTERM event %d, first SIGKILL event %d; want every SIGTERM first (the stops in parallel)", lastTerm, firstKill)
	}
}

// TestReplicasRollingReplace: an args change replaces the replicas one at a
// time, in index order, each only once the one before is Ready again: at
// least two of three are Ready in every sample (every 10 ms), each
// instance runs one process at a time, and all three end with new pids.
func TestReplicasRollingReplace(t *testing.T) {
	f := newTestFleet(t)
	base := testserver.FreePortRange(t, 3)
	n := 3
	api := f.add(&testSpec{name: "api", port: base, replicas: &n})
	f.write()
	rr := f.run(t, nil)
	names := instances("api", 3)
	st := waitStatus(t, rr.r, "three replicas", allReady(names...))
	old := pidsOf(st, names...)

	sampler := sampleReady(rr.r, names, 3)
	api.args = []string{"-print", "v2"}
	f.write()
	st = waitStatus(t, rr.r, "all three replaced", func(st Status) bool {
		for _, name := range names {
			if s, _ := st.Get(name); !s.Ready || s.Phase != PhaseRunning || s.PID == 0 || s.PID == old[name] {
				return false
			}
		}
		return true
	})
	samples, lowest, at := sampler.end()
	t.Logf("%d samples, at least %d of 3 Ready in each", samples, lowest)
	if lowest < 2 || samples == 0 {
		t.Errorf("only %d of 3 replicas Ready during the rolling replace (of %d samples), at:\n%s", lowest, samples, at)
	}
	checkInstances(t, st, base, names...)
	checkReplacedInOrder(t, rr.ev.all(), "replaced", "api-0", "api-1", "api-2")
	for _, name := range names {
		if got := len(f.starts(name)); got != 2 {
			t.Errorf("%s started %d times, want 2 (one replacement)", name, got)
		}
	}
}

// TestReplicasDependsOn: a server that depends on a replicated one starts
// only once every instance is Ready (they become Ready 0, 100 and 200 ms
// after their start); a down of everything stops it before any of them.
func TestReplicasDependsOn(t *testing.T) {
	f := newTestFleet(t)
	base := testserver.FreePortRange(t, 4)
	n := 3
	f.add(&testSpec{name: "api", port: base, replicas: &n, args: []string{"-listen-delay", "$(PROCFLEET_REPLICA)00ms"}})
	f.add(&testSpec{name: "web", port: base + 3, deps: []string{"api"}})
	f.write()
	rr := f.run(t, nil)
	names := instances("api", 3)
	waitStatus(t, rr.r, "api and web", allReady(append(names, "web")...))
	webStart := rr.ev.index("web", ReasonStarting)
	for _, name := range names {
		if ready := rr.ev.index(name, ReasonReady); ready < 0 || webStart < ready {
			t.Errorf("web started (event %d) before %s was Ready (event %d)", webStart, name, ready)
		}
	}
	rr.stop(t)

	var ev events
	if err := Down(context.Background(), DownConfig{Files: []string{f.file}, StateDir: f.state, Log: testr.New(t), OnEvent: ev.add}, nil); err != nil {
		t.Fatalf("Down: %v", err)
	}
	webStopped := ev.index("web", ReasonStopped)
	for _, name := range names {
		if stopping := ev.index(name, ReasonStopping); webStopped < 0 || stopping < webStopped {
			t.Errorf("%s began stopping (event %d) before web had stopped (event %d)", name, stopping, webStopped)
		}
	}
	if recs, _ := f.state.Records(); len(recs) != 0 {
		t.Errorf("%d records left after down", len(recs))
	}
}

// TestReplicasAdoptedThenRolled: a reconciler that goes away leaves the
// replicas running; the next adopts every one (no second start) and, the
// args having changed meanwhile, rolls through them one at a time.
func TestReplicasAdoptedThenRolled(t *testing.T) {
	f := newTestFleet(t)
	base := testserver.FreePortRange(t, 3)
	n := 3
	api := f.add(&testSpec{name: "api", port: base, replicas: &n})
	f.write()
	names := instances("api", 3)
	rr := f.run(t, nil)
	st := waitStatus(t, rr.r, "three replicas", allReady(names...))
	old := pidsOf(st, names...)
	rr.stop(t)

	rr = f.run(t, nil)
	st = waitStatus(t, rr.r, "three adopted", allReady(names...))
	for _, name := range names {
		if pidOf(st, name) != old[name] || rr.ev.count(name, ReasonAdopted) != 1 || len(f.starts(name)) != 1 {
			t.Errorf("%s after restart: pid %d (was %d), %d Adopted events, %d starts; want adopted once, never started again",
				name, pidOf(st, name), old[name], rr.ev.count(name, ReasonAdopted), len(f.starts(name)))
		}
	}
	rr.stop(t)

	api.args = []string{"-print", "v2"}
	f.write()
	rr = f.run(t, nil)
	// Adopted, none counts as Ready until its check: the bound holds from
	// the first sample in which two were (a replace needs the others
	// Ready, so there is one before the first replace).
	sampler := sampleReady(rr.r, names, 2)
	waitStatus(t, rr.r, "all three replaced", func(st Status) bool {
		for _, name := range names {
			if s, _ := st.Get(name); !s.Ready || s.PID == 0 || s.PID == old[name] {
				return false
			}
		}
		return true
	})
	samples, lowest, at := sampler.end()
	if lowest < 2 || samples == 0 {
		t.Errorf("only %d of 3 replicas Ready during the rolling replace after adoption (of %d samples), at:\n%s", lowest, samples, at)
	}
	for _, name := range names {
		if rr.ev.count(name, ReasonAdopted) != 1 || rr.ev.count(name, ReasonReplacing) != 1 || len(f.starts(name)) != 2 {
			t.Errorf("%s: %d Adopted, %d Replacing events, %d starts; want 1, 1, 2",
				name, rr.ev.count(name, ReasonAdopted), rr.ev.count(name, ReasonReplacing), len(f.starts(name)))
		}
	}
}

// TestReplicasApplyRolls: apply (Converge) replaces a replicated server's
// instances one at a time too, and returns only once every one runs the
// new spec.
func TestReplicasApplyRolls(t *testing.T) {
	f, api, names, old := appliedReplicas(t, 3)

	api.args = []string{"-print", "v2"}
	f.write()
	var ev events
	r, err := New(Config{Files: []string{f.file}, StateDir: f.state, Log: testr.New(t), OneShot: true, OnEvent: ev.add})
	if err != nil {
		t.Fatal(err)
	}
	sampler := sampleReady(r, names, 2) // adopted first, as after an up restart
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, err := r.Converge(ctx, ConvergeOptions{Wait: true})
	samples, lowest, at := sampler.end()
	if err != nil {
		t.Fatalf("Converge after an args change: %v", err)
	}
	checkNewPIDs(t, st, old, "apply")
	if lowest < 2 || samples == 0 {
		t.Errorf("only %d of 3 replicas Ready during apply's rolling replace (of %d samples), at:\n%s", lowest, samples, at)
	}
	checkReplacedInOrder(t, ev.all(), "apply replaced", "api-0", "api-1", "api-2")
}

// TestReplicasRestartRolls: restart api replaces its instances one at a
// time, in index order, each once the one before is Ready again (at least
// two of three Ready in every sample), and returns once all three run new
// pids; restart api-1 replaces only api-1.
func TestReplicasRestartRolls(t *testing.T) {
	f := newTestFleet(t)
	base := testserver.FreePortRange(t, 3)
	n := 3
	f.add(&testSpec{name: "api", port: base, replicas: &n})
	f.write()
	rr := f.run(t, nil)
	names := instances("api", 3)
	st := waitStatus(t, rr.r, "three replicas", allReady(names...))
	old := pidsOf(st, names...)

	sampler := sampleReady(rr.r, names, 3)
	st, err := verb(t, rr.r, VerbRestart, "api")
	samples, lowest, at := sampler.end()
	if err != nil {
		t.Fatalf("restart api: %v", err)
	}
	t.Logf("%d samples, at least %d of 3 Ready in each", samples, lowest)
	checkNewPIDs(t, st, old, "restart api")
	if lowest < 2 || samples == 0 {
		t.Errorf("only %d of 3 replicas Ready during restart api (of %d samples), at:\n%s", lowest, samples, at)
	}
	checkInstances(t, st, base, names...)
	checkReplacedInOrder(t, rr.ev.all(), "restart api replaced", "api-0", "api-1", "api-2")

	before := pidsOf(st, names...)
	st, err = verb(t, rr.r, VerbRestart, "api-1")
	if err != nil {
		t.Fatalf("restart api-1: %v", err)
	}
	after := pidsOf(st, names...)
	if after["api-1"] == before["api-1"] || after["api-0"] != before["api-0"] || after["api-2"] != before["api-2"] {
		t.Errorf("restart api-1: pids %v -> %v; want only api-1's to change", before, after)
	}
}

// TestReplicasRestartWithoutUp: restart api with no up running (the CLI's
// Act on a reconciler of its own) adopts the replicas, then rolls them in
// index order, at least two of three Ready throughout. Before, each
// adopted replica waited for the others' readiness, which nothing
// checked, until the timeout.
func TestReplicasRestartWithoutUp(t *testing.T) {
	f, _, names, old := appliedReplicas(t, 3)

	var ev events
	r, err := New(Config{Files: []string{f.file}, StateDir: f.state, Log: testr.New(t), OneShot: true, ResyncPeriod: -1, OnEvent: ev.add})
	if err != nil {
		t.Fatal(err)
	}
	sampler := sampleReady(r, names, 2)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, err := r.Act(ctx, VerbRestart, []string{"api"}, true)
	samples, lowest, at := sampler.end()
	if err != nil {
		t.Fatalf("restart api without up: %v", err)
	}
	checkNewPIDs(t, st, old, "restart api")
	for _, name := range names {
		if ev.count(name, ReasonAdopted) != 1 || ev.count(name, ReasonReplacing) != 1 || len(f.starts(name)) != 2 {
			t.Errorf("%s: %d Adopted, %d Replacing events, %d starts; want 1, 1, 2",
				name, ev.count(name, ReasonAdopted), ev.count(name, ReasonReplacing), len(f.starts(name)))
		}
	}
	if lowest < 2 || samples == 0 {
		t.Errorf("only %d of 3 replicas Ready during restart api without up (of %d samples), at:\n%s", lowest, samples, at)
	}
	checkReplacedInOrder(t, ev.all(), "restart api without up replaced", "api-0", "api-1", "api-2")
}

// checkReplacedInOrder fails the test unless evs replaced (Replacing
// events) exactly the named servers, in that order; what says who did.
func checkReplacedInOrder(t *testing.T, evs []Event, what string, names ...string) {
	t.Helper()
	var order []string
	for _, e := range evs {
		if e.Reason == ReasonReplacing {
			order = append(order, e.Server)
		}
	}
	if !slices.Equal(order, names) {
		t.Errorf("%s in the order %v, want %v", what, order, names)
	}
}

// appliedReplicas converges a fleet of one server, api, with n replicas,
// and returns it with the instances' names and pids.
func appliedReplicas(t *testing.T, n int) (*testFleet, *testSpec, []string, map[string]int) {
	t.Helper()
	f := newTestFleet(t)
	api := f.add(&testSpec{name: "api", port: testserver.FreePortRange(t, n), replicas: &n})
	f.write()
	names := instances("api", n)
	st, err := converge(t, f, true)
	if err != nil {
		t.Fatalf("Converge: %v", err)
	}
	return f, api, names, pidsOf(st, names...)
}

// checkNewPIDs fails the test unless every server of old is Ready in st
// with a pid other than its old one; what says what replaced them.
func checkNewPIDs(t *testing.T, st Status, old map[string]int, what string) {
	t.Helper()
	for name, pid := range old {
		if s, _ := st.Get(name); !s.Ready || s.PID == 0 || s.PID == pid {
			t.Errorf("%s after %s: %+v; want Ready with a new pid (was %d)", name, what, s, pid)
		}
	}
}
