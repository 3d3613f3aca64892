package dashboard

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/procfleet/procfleet/actuate"
	"github.com/procfleet/procfleet/internal/testserver"
	"github.com/procfleet/procfleet/observe"
	"github.com/procfleet/procfleet/reconciler"
	"github.com/procfleet/procfleet/spec"
)

// procBackend is the tests' Backend while the reconciler is rebuilt: it
// runs REAL server processes (internal/testserver, through the test binary),
// each in its own session with its output appended to a log file, learns of
// their exits from Wait (the child's exit, not a poll), restarts one that
// dies (a new pid and one more restart), and stops, starts and restarts on
// request. Its state is what the reconciler reports for the same events:
// phases, readiness, last exit, events with each signal's evidence. It is
// not the reconciler and proves nothing about it: it gives the dashboard a
// fleet that really changes.
type procBackend struct {
	t   testing.TB
	dir string

	mu       sync.Mutex
	servers  map[string]*procServer
	fleet    *spec.Fleet
	closing  bool
	changeCh chan struct{}
	// hold, when set, makes a restart after a crash wait until it is closed
	// (the reconciler's backoff, made as long as the test needs): the page
	// can then be seen in CrashLoopBackOff before the server comes back.
	hold chan struct{}

	snapshots atomic.Int64 // Snapshot calls, to show the idle cost is nil
	requests  atomic.Int64 // Request calls
	wg        sync.WaitGroup
}

// procServer is one server of a procBackend; mu guards it.
type procServer struct {
	name    string
	port    int
	argv    []string
	logPath string

	phase     reconciler.Phase
	ready     bool
	pid       int
	restarts  int
	startedAt *time.Time
	reason    string
	message   string
	lastExit  *reconciler.LastExit
	cond      reconciler.Condition
	events    []reconciler.Event
	record    *actuate.Record
	proc      *os.Process
	gen       int    // bumped at each spawn: stale goroutines see a newer one
	after     string // what to do at the process's exit: "", "stop", "restart"
}

// fleetServer declares a test server: name, dependencies.
type fleetServer struct {
	name string
	deps []string
}

// quickStart is the quick-start fleet (examples/quickstart): web -> api ->
// backend.
var quickStart = []fleetServer{{"backend", nil}, {"api", []string{"backend"}}, {"web", []string{"api"}}}

// startProcBackend starts the fleet, in dependency order (each server once
// the ones it depends on are Ready), and stops every process at cleanup.
func startProcBackend(t testing.TB, decl []fleetServer) *procBackend {
	t.Helper()
	b := &procBackend{t: t, dir: t.TempDir(), servers: map[string]*procServer{}, changeCh: make(chan struct{})}
	ports := testserver.FreePorts(t, len(decl))
	f := &spec.Fleet{Files: []string{"procfleet.yaml"}}
	for i, d := range decl {
		argv := []string{"./bin/" + d.name, "-port", strconv.Itoa(ports[i]), "-print", d.name + ": listening on 127.0.0.1:" + strconv.Itoa(ports[i])}
		s := &procServer{
			name: d.name, port: ports[i], argv: argv,
			logPath: filepath.Join(b.dir, d.name+".log"),
			phase:   reconciler.PhasePending,
			cond:    reconciler.Condition{Type: reconciler.ConditionReady, Status: reconciler.ConditionUnknown},
		}
		b.servers[d.name] = s
		f.Servers = append(f.Servers, spec.Server{
			APIVersion: spec.APIVersion, Kind: spec.Kind,
			Metadata: spec.ObjectMeta{Name: d.name},
			Spec: spec.ServerSpec{
				Command: argv[:1], Args: argv[1:], WorkingDir: b.dir,
				// A secret: the page must show its name, never its value.
				Env:            []spec.EnvVar{{Name: "API_TOKEN", Value: secretValue}},
				Port:           ports[i],
				ReadinessProbe: &spec.Probe{HTTPGet: &spec.HTTPGetAction{Path: "/health", Port: ports[i]}},
				DependsOn:      d.deps,
			},
			Source: spec.Source{File: "procfleet.yaml", Line: 1 + 12*i},
		})
	}
	sort.Slice(f.Servers, func(i, j int) bool { return f.Servers[i].Metadata.Name < f.Servers[j].Metadata.Name })
	b.fleet = f
	t.Cleanup(b.close)
	for _, d := range decl {
		b.mu.Lock()
		err := b.spawnLocked(b.servers[d.name])
		b.mu.Unlock()
		if err != nil {
			t.Fatalf("start %s: %v", d.name, err)
		}
		b.waitFor(t, d.name, func(s reconciler.ServerStatus) bool { return s.Ready })
	}
	return b
}

var _ Backend = (*procBackend)(nil)

// secretValue is the value of every test server's API_TOKEN.
const secretValue = "s3cret-do-not-show-7f3a"

// notifyLocked wakes every waiter of Changed.
func (b *procBackend) notifyLocked() {
	close(b.changeCh)
	b.changeCh = make(chan struct{})
}

func (b *procBackend) eventLocked(s *procServer, typ, reason, msg string, detail bool) {
	s.events = append(s.events, reconciler.Event{Time: time.Now(), Server: s.name, Type: typ, Reason: reason, Message: msg, Detail: detail})
	if len(s.events) > 64 {
		s.events = s.events[len(s.events)-64:]
	}
}

// spawnLocked starts s's process, records its identity, and starts the
// goroutines that wait for its readiness and its exit.
func (b *procBackend) spawnLocked(s *procServer) error {
	logf, err := os.OpenFile(s.logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer logf.Close()
	self, err := os.Executable()
	if err != nil {
		return err
	}
	cmd := &exec.Cmd{
		Path: self, Args: s.argv, // argv[0] reads as the fleet file declares it
		Env:    append(os.Environ(), testserver.Env(), "API_TOKEN="+secretValue),
		Dir:    b.dir,
		Stdout: logf, Stderr: logf,
		SysProcAttr: &syscall.SysProcAttr{Setsid: true},
	}
	b.eventLocked(s, reconciler.EventNormal, reconciler.ReasonStarting, "starting "+spec.ShellText(s.argv), false)
	if err := cmd.Start(); err != nil {
		return err
	}
	now := time.Now()
	s.gen++
	s.pid, s.proc, s.startedAt, s.after = cmd.Process.Pid, cmd.Process, &now, ""
	s.phase, s.ready, s.reason, s.message = reconciler.PhaseStarting, false, "Starting", ""
	s.record = &actuate.Record{Version: actuate.RecordVersion, Name: s.name, PID: s.pid, PGID: s.pid, Cmdline: s.argv, Port: s.port, UID: os.Getuid(), SpecHash: "sha256:" + s.name, StartedAt: now.UTC()}
	// The process is our unreaped child: its pid cannot be reused before
	// Wait returns, so this identity is its own.
	if id, err := observe.ReadIdentity(s.pid); err == nil {
		s.record.StartTime, s.record.BootID = id.StartTime, id.BootID
	}
	b.eventLocked(s, reconciler.EventNormal, "Started", fmt.Sprintf("pid %d, start time %d, boot id %s", s.pid, s.record.StartTime, s.record.BootID), true)
	b.notifyLocked()
	gen := s.gen
	b.wg.Add(2)
	go b.awaitReady(s, gen)
	go b.awaitExit(s, gen, cmd)
	return nil
}

// awaitReady polls the port (a TCP connect every 10 ms, at most 30 s), as
// the default readiness probe does.
func (b *procBackend) awaitReady(s *procServer, gen int) {
	defer b.wg.Done()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		b.mu.Lock()
		stale := s.gen != gen || b.closing || s.proc == nil
		b.mu.Unlock()
		if stale {
			return
		}
		c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)), time.Second)
		if err == nil {
			c.Close()
			b.mu.Lock()
			if s.gen == gen && s.proc != nil {
				s.phase, s.ready, s.reason, s.message = reconciler.PhaseRunning, true, "ready", ""
				s.cond = reconciler.Condition{Type: reconciler.ConditionReady, Status: reconciler.ConditionTrue, Reason: "ProbeSucceeded", LastTransitionTime: time.Now()}
				b.eventLocked(s, reconciler.EventNormal, reconciler.ReasonReady, fmt.Sprintf("ready in %s (pid %d)", time.Since(*s.startedAt).Round(time.Millisecond), s.pid), false)
				b.notifyLocked()
			}
			b.mu.Unlock()
			return
		}
		time.Sleep(10 * time.Millisecond) // the probe's period, not a wait for an event
	}
}

// awaitExit waits for the process to exit and decides what follows:
// stopped by request, restarted by request, or a crash, restarted at once
// (after hold, when set) with one more restart counted.
func (b *procBackend) awaitExit(s *procServer, gen int, cmd *exec.Cmd) {
	defer b.wg.Done()
	err := cmd.Wait()
	le := &reconciler.LastExit{Code: cmd.ProcessState.ExitCode(), At: time.Now(), Reason: "exited with code " + strconv.Itoa(cmd.ProcessState.ExitCode())}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			le.Code, le.Signal = -1, signalName(ws.Signal())
			le.Reason = fmt.Sprintf("killed by signal %d (%s)", int(ws.Signal()), le.Signal)
		}
	}
	b.mu.Lock()
	if s.gen != gen || b.closing {
		b.mu.Unlock()
		return
	}
	after := s.after
	s.proc, s.pid, s.startedAt, s.ready, s.record, s.lastExit = nil, 0, nil, false, nil, le
	s.cond = reconciler.Condition{Type: reconciler.ConditionReady, Status: reconciler.ConditionFalse, Reason: "Exited", Message: le.Reason, LastTransitionTime: time.Now()}
	typ := reconciler.EventWarning
	if after != "" {
		typ = reconciler.EventNormal
	}
	b.eventLocked(s, typ, reconciler.ReasonExited, le.Reason, false)
	var hold chan struct{}
	switch after {
	case "stop":
		s.phase, s.reason, s.message = reconciler.PhaseStopped, "StoppedByUser", "stopped from the dashboard; start it to run it again"
		b.eventLocked(s, reconciler.EventNormal, reconciler.ReasonStopped, "stopped by request", false)
		b.notifyLocked()
		b.mu.Unlock()
		return
	case "restart":
	default:
		s.restarts++
		hold = b.hold
		if hold != nil {
			s.phase, s.reason, s.message = reconciler.PhaseCrashLoopBackOff, reconciler.ReasonBackOff, "back-off restarting after "+le.Reason
			b.eventLocked(s, reconciler.EventWarning, reconciler.ReasonBackOff, "restarting after a back-off", false)
			b.notifyLocked()
		}
	}
	b.mu.Unlock()
	if hold != nil {
		<-hold
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if s.gen != gen || b.closing {
		return
	}
	if err := b.spawnLocked(s); err != nil {
		s.phase, s.reason, s.message = reconciler.PhaseFailed, "StartFailed", err.Error()
		b.notifyLocked()
	}
}

func signalName(sig syscall.Signal) string {
	switch sig {
	case syscall.SIGKILL:
		return "SIGKILL"
	case syscall.SIGTERM:
		return "SIGTERM"
	}
	return sig.String()
}

// signalLocked sends sig to s's process group, through the process we hold
// (an unreaped child: its pid and group are its own), as an event with the
// evidence.
func (b *procBackend) signalLocked(s *procServer, sig syscall.Signal) error {
	if s.proc == nil {
		return errors.New("not running")
	}
	b.eventLocked(s, reconciler.EventNormal, "Signal", fmt.Sprintf("%s to process group %d (pid %d, start time %d, boot id %s; our child, not reaped)", signalName(sig), s.pid, s.pid, s.record.StartTime, s.record.BootID), true)
	return syscall.Kill(-s.pid, sig)
}

// close stops every process (SIGKILL to each group) and waits for every
// goroutine of the backend, at most 30 s.
func (b *procBackend) close() {
	b.mu.Lock()
	b.closing = true
	if b.hold != nil {
		close(b.hold)
		b.hold = nil
	}
	for _, s := range b.servers {
		if s.proc != nil {
			_ = syscall.Kill(-s.pid, syscall.SIGKILL)
		}
	}
	b.mu.Unlock()
	done := make(chan struct{})
	go func() { b.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		b.t.Errorf("procBackend: processes or goroutines still running 30 s after close")
	}
}

// setHold makes restarts after a crash wait until release is called.
func (b *procBackend) setHold() (release func()) {
	b.mu.Lock()
	defer b.mu.Unlock()
	h := make(chan struct{})
	b.hold = h
	return func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		if b.hold == h {
			close(h)
			b.hold = nil
		}
	}
}

// waitFor waits, at most 30 s, until the server's status satisfies ok, on
// the backend's change notifications.
func (b *procBackend) waitFor(t testing.TB, name string, ok func(reconciler.ServerStatus) bool) reconciler.ServerStatus {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		ch := b.Changed()
		st, _ := b.status().Get(name)
		if ok(st) {
			return st
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("server %s: status never reached the wanted state; last: %+v", name, st)
		}
	}
}

func (b *procBackend) status() reconciler.Status {
	b.mu.Lock()
	defer b.mu.Unlock()
	st := reconciler.Status{Servers: []reconciler.ServerStatus{}, Errors: []reconciler.StatusError{}}
	for _, s := range b.servers {
		ss := reconciler.ServerStatus{
			Name: s.name, Phase: s.phase, Ready: s.ready, PID: s.pid, Port: s.port,
			Restarts: s.restarts, Reason: s.reason, Message: s.message, LastExit: s.lastExit,
			Conditions: []reconciler.Condition{s.cond},
		}
		if s.startedAt != nil {
			at := *s.startedAt
			ss.StartedAt = &at
		}
		st.Servers = append(st.Servers, ss)
	}
	sort.Slice(st.Servers, func(i, j int) bool { return st.Servers[i].Name < st.Servers[j].Name })
	return st
}

// Snapshot implements Backend.
func (b *procBackend) Snapshot() Snapshot {
	b.snapshots.Add(1)
	return Snapshot{Status: b.status(), Fleet: b.fleet}
}

// Changed implements Backend.
func (b *procBackend) Changed() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.changeCh
}

// Detail implements Backend.
func (b *procBackend) Detail(_ context.Context, name string) (Detail, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.servers[name]
	if s == nil {
		return Detail{}, fmt.Errorf("%w: %s", ErrNotFound, name)
	}
	d := Detail{Events: append([]reconciler.Event(nil), s.events...), LogPath: s.logPath}
	if s.record != nil {
		r := *s.record
		d.Record = &r
		d.Ownership = Ownership{
			Verdict:    "owned",
			Held:       true,
			Evidence:   fmt.Sprintf("pid %d, start time %d, boot id %s; our child since spawn", r.PID, r.StartTime, r.BootID),
			Membership: fmt.Sprintf("process group %d (its own session)", r.PGID),
		}
		if id, err := observe.ReadIdentity(r.PID); err == nil {
			d.Ownership.Process = fmt.Sprintf("state %s, ppid %d, pgid %d, sid %d, uid %d", id.State, id.PPID, id.PGID, id.SID, id.UID)
		}
	}
	return d, nil
}

// Request implements Backend: stop and restart send SIGTERM to the group
// and return (the exit is awaited by the process's goroutine); start
// spawns a stopped server.
func (b *procBackend) Request(_ context.Context, name string, a Action) error {
	b.requests.Add(1)
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.servers[name]
	if s == nil {
		return fmt.Errorf("%w: %s", ErrNotFound, name)
	}
	switch a {
	case ActionStop, ActionRestart:
		if s.proc == nil {
			if a == ActionRestart && s.phase != reconciler.PhaseStarting {
				return b.spawnLocked(s)
			}
			return fmt.Errorf("%s is not running", name)
		}
		s.after = string(a)
		s.phase, s.ready, s.reason = reconciler.PhaseStopping, false, "Stopping"
		b.eventLocked(s, reconciler.EventNormal, reconciler.ReasonStopping, string(a)+" requested from the dashboard", false)
		b.notifyLocked()
		return b.signalLocked(s, syscall.SIGTERM)
	case ActionStart:
		if s.proc != nil {
			return nil
		}
		return b.spawnLocked(s)
	}
	return fmt.Errorf("unknown action %q", a)
}
