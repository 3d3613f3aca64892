package actuate

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/utils/clock"

	"github.com/procfleet/procfleet/observe"
)

// Defaults used when a StartRequest or StopOptions field is zero.
const (
	DefaultStartupTimeout = 300 * time.Second
	DefaultGrace          = 20 * time.Second
	DefaultKillTimeout    = 10 * time.Second
	DefaultReadyPeriod    = 100 * time.Millisecond
	// PortReleaseTimeout bounds the wait, after a stop, for nothing to accept
	// TCP connections on the server's port.
	PortReleaseTimeout = 5 * time.Second
	// LogTailLines is how many log lines a StartError carries.
	LogTailLines = 20

	portPollPeriod  = 20 * time.Millisecond
	fastReadyPeriod = 2 * time.Millisecond
	fastReadyWindow = time.Second
	logTailBytes    = 64 << 10
)

// EventSink receives the events of servers: every signal sent (with the
// evidence that allowed it), records removed, quarantines, starts and stops.
type EventSink interface {
	Event(server, reason, message string)
}

// Event reasons.
const (
	EventStarted       = "Started"
	EventSignal        = "Signal"
	EventStopped       = "Stopped"
	EventRecordRemoved = "RecordRemoved"
	EventQuarantined   = "Quarantined"
	EventStartFailed   = "StartFailed"
)

// Actuator starts and stops servers. Its zero value is not usable: Dir is
// required. It is safe for concurrent use on different servers; callers do
// not act on one server from two goroutines at once.
type Actuator struct {
	// Dir is the state folder (records and logs). Required.
	Dir *StateDir
	// Log receives one line per action; the zero Logger discards.
	Log logr.Logger
	// Events receives the events of servers; nil means log only.
	Events EventSink
	// Clock reads the time for StartedAt; nil means the real clock. Waits
	// use timers and process exit notifications, not this clock.
	Clock clock.PassiveClock

	// signal sends sig to a target; nil means target.send. Tests replace it
	// to simulate what the kernel cannot be made to do on demand (a process
	// that outlives SIGKILL).
	signal func(t target, sig syscall.Signal) (how string, err error)

	mu       sync.Mutex
	children map[int]*child // our own unreaped children, by pid
}

// StartRequest is what Spawn and Start need to start one server.
type StartRequest struct {
	Name string
	// Argv is command and args; Argv[0] without a slash is looked up in
	// procfleet's PATH, a relative one is relative to Dir.
	Argv []string
	// Dir is the working folder; empty means procfleet's.
	Dir string
	// Env is added to procfleet's own environment ("NAME=value").
	Env []string
	// Port is the TCP port the server listens on (0: none). It must be free.
	Port     int
	SpecHash string
	// StartupTimeout bounds WaitReady (default 300 s).
	StartupTimeout time.Duration
	// Grace and KillTimeout are used to stop a server that was not ready in
	// time (defaults 20 s and 10 s).
	Grace, KillTimeout time.Duration
	// Ready is the readiness check. nil: the port accepts TCP, or, with
	// Port 0, running is ready.
	Ready func(ctx context.Context) observe.ProbeResult
	// ReadyPeriod is the time between readiness checks (default 100 ms).
	ReadyPeriod time.Duration
}

// Running is a server started by Spawn.
type Running struct {
	Record Record
	// Handle pins the process; the caller closes it when done with it.
	Handle *observe.Handle

	child     *child
	logOffset int64 // size of the log before this run
}

// Done is closed when the process has exited and been reaped (nil for a
// Running not made by Spawn).
func (r *Running) Done() <-chan struct{} {
	if r.child == nil {
		return nil
	}
	return r.child.done
}

// Exit returns how the process ended, once Done is closed.
func (r *Running) Exit() (ExitStatus, bool) {
	if r.child == nil {
		return ExitStatus{}, false
	}
	select {
	case <-r.child.done:
		return r.child.status, true
	default:
		return ExitStatus{}, false
	}
}

// ExitStatus is how a process ended.
type ExitStatus struct {
	// Code is the exit code, or -1 when killed by a signal.
	Code int
	// Signal is the name of the signal that killed it ("SIGKILL"), or "".
	Signal string
}

// String is "exited with code N" or "killed by signal N (NAME)".
func (s ExitStatus) String() string {
	if s.Signal != "" {
		return fmt.Sprintf("killed by signal %d (%s)", signalNumber(s.Signal), s.Signal)
	}
	return fmt.Sprintf("exited with code %d", s.Code)
}

// child is a process this Actuator started and reaps.
type child struct {
	pid    int
	done   chan struct{}
	status ExitStatus
}

func (a *Actuator) now() time.Time {
	if a.Clock == nil {
		return time.Now()
	}
	return a.Clock.Now()
}

func (a *Actuator) event(server, reason, message string) {
	if a.Events != nil {
		// The sink reports it (the reconciler logs it and the commands
		// print progress); a V(0) line here would say it twice.
		a.Log.V(1).Info("event", "server", server, "reason", reason, "message", message)
		a.Events.Event(server, reason, message)
		return
	}
	a.Log.Info("event", "server", server, "reason", reason, "message", message)
}

// Start is Spawn followed by WaitReady.
func (a *Actuator) Start(ctx context.Context, req StartRequest) (*Running, error) {
	r, err := a.Spawn(ctx, req)
	if err != nil {
		return nil, err
	}
	if err := a.WaitReady(ctx, req, r); err != nil {
		return nil, err
	}
	return r, nil
}

// Spawn starts a server: it checks that the port is free (a holder gives
// *StartError with Reason "PortConflict", naming its pid and command when
// visible; nothing is started or signalled), starts argv in a new session
// (setsid) with the declared folder and environment, stdin from /dev/null,
// stdout and stderr appended to logs/<name>.log (a file, never a pipe) and
// no other inherited descriptor, pins the child, reads its identity from the
// kernel and writes its record. The process is reaped by this Actuator. If
// the process exits before its record is written, Spawn cleans up and
// returns the *StartError WaitReady would have.
func (a *Actuator) Spawn(ctx context.Context, req StartRequest) (*Running, error) {
	if err := checkName(req.Name); err != nil {
		return nil, fmt.Errorf("start server: %w", err)
	}
	if len(req.Argv) == 0 || req.Argv[0] == "" {
		return nil, &StartError{Name: req.Name, Reason: ReasonFailed, ExitCode: -1, Message: "empty command"}
	}
	log := a.Log.WithValues("server", req.Name)
	if req.Port > 0 {
		if h, busy := portHolder(ctx, req.Port); busy {
			msg := fmt.Sprintf("port %d is held by %s", req.Port, h.desc)
			a.event(req.Name, EventStartFailed, msg)
			return nil, &StartError{Name: req.Name, Reason: ReasonPortConflict, ExitCode: -1, Message: msg, HolderPIDs: h.pids}
		}
	}

	logPath := a.Dir.LogPath(req.Name)
	logf, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND|noFollow, logMode)
	if err != nil {
		return nil, &StartError{Name: req.Name, Reason: ReasonFailed, ExitCode: -1, Message: "open log", Err: err}
	}
	var offset int64
	if fi, err := logf.Stat(); err == nil {
		offset = fi.Size()
	}
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		_ = logf.Close()
		return nil, &StartError{Name: req.Name, Reason: ReasonFailed, ExitCode: -1, Message: "open " + os.DevNull, Err: err}
	}
	if err := closeInheritedFDs(); err != nil {
		log.Error(err, "cannot mark inherited descriptors close-on-exec")
	}
	cmd := exec.Command(req.Argv[0], req.Argv[1:]...)
	cmd.Dir = req.Dir
	cmd.Env = append(os.Environ(), req.Env...)
	cmd.Stdin = devnull
	cmd.Stdout = logf
	cmd.Stderr = logf
	cmd.SysProcAttr = newSessionAttr()
	err = cmd.Start()
	// The child has its own copies; ours close now, whatever happened.
	_ = devnull.Close()
	_ = logf.Close()
	if err != nil {
		msg := fmt.Sprintf("exec %s", quoteArgv(req.Argv))
		a.event(req.Name, EventStartFailed, msg+": "+err.Error())
		return nil, &StartError{Name: req.Name, Reason: ReasonFailed, ExitCode: -1, Message: msg, Err: err}
	}
	pid := cmd.Process.Pid
	// Nothing reaps the child before the pins below: its pid cannot be
	// reused, so the pins hold this very process.
	h, pinErr := observe.Pin(pid)
	ch := a.reap(cmd)
	r := &Running{Handle: h, child: ch, logOffset: offset}
	if pinErr != nil {
		// Only a reaped child is unpinnable, and nothing reaped it yet.
		a.killOwnChild(ctx, req.Name, nil, cmd.Process, ch)
		return nil, &StartError{Name: req.Name, Reason: ReasonFailed, ExitCode: -1, Message: "pin the new process", Err: pinErr}
	}
	id, idErr := spawnIdentity(ctx, h)
	if idErr != nil {
		if errors.Is(idErr, observe.ErrUntrusted) || errors.Is(idErr, observe.ErrGone) {
			// It exited already: report how.
			r.Record = Record{Name: req.Name, PID: pid, PGID: pid}
			return nil, a.failExited(ctx, req, r)
		}
		a.killOwnChild(ctx, req.Name, h, cmd.Process, ch)
		_ = h.Close()
		return nil, &StartError{Name: req.Name, Reason: ReasonFailed, ExitCode: -1, Message: "read the identity of the new process", Err: idErr}
	}
	boot, err := observe.BootID()
	if err != nil {
		a.killOwnChild(ctx, req.Name, h, cmd.Process, ch)
		_ = h.Close()
		return nil, &StartError{Name: req.Name, Reason: ReasonFailed, ExitCode: -1, Message: "read boot id", Err: err}
	}
	inode, _ := h.PidfdInode()
	r.Record = Record{
		Version: RecordVersion, Name: req.Name, PID: pid, PGID: id.PGID, StartTime: id.StartTime,
		BootID: boot, UID: id.UID, Cmdline: id.Cmdline, Port: req.Port, SpecHash: req.SpecHash,
		StartedAt: a.now().UTC().Truncate(time.Second), PidfdInode: inode,
	}
	if err := a.Dir.WriteRecord(r.Record); err != nil {
		a.killOwnChild(ctx, req.Name, h, cmd.Process, ch)
		_ = h.Close()
		return nil, &StartError{Name: req.Name, Reason: ReasonFailed, ExitCode: -1, Message: "write record", Err: err}
	}
	log.V(1).Info("spawned", "pid", pid, "startTime", id.StartTime, "pinMode", h.Mode().String())
	a.event(req.Name, EventStarted, fmt.Sprintf("started pid %d (%s), start time %d", pid, quoteArgv(id.Cmdline), id.StartTime))
	return r, nil
}

// spawnIdentity reads the identity of a child that has just exec'd. The
// parent learns of the exec (exec.Cmd's close-on-exec pipe closes) before
// the kernel has set up the new program's arguments, and in that window
// /proc/PID/cmdline reads empty (seen here: Linux 6.18, a small Go binary);
// so an empty command line is read again, with a short backoff, for up to
// two seconds.
func spawnIdentity(ctx context.Context, h *observe.Handle) (observe.Identity, error) {
	deadline := time.Now().Add(2 * time.Second)
	wait := 100 * time.Microsecond
	for {
		id, err := h.Identity()
		if err != nil || len(id.Cmdline) > 0 || time.Now().After(deadline) {
			return id, err
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return id, ctx.Err()
		}
		wait = min(2*wait, 20*time.Millisecond)
	}
}

// reap waits for our child in a goroutine and keeps its exit status. On
// Linux the goroutine parks on a pidfd (no OS thread held) and calls
// cmd.Wait only once the child has exited.
func (a *Actuator) reap(cmd *exec.Cmd) *child {
	ch := &child{pid: cmd.Process.Pid, done: make(chan struct{})}
	a.mu.Lock()
	if a.children == nil {
		a.children = make(map[int]*child)
	}
	a.children[ch.pid] = ch
	a.mu.Unlock()
	// A second pin, owned by this goroutine (the caller may close its own).
	hw, err := observe.Pin(ch.pid)
	go func() {
		defer close(ch.done)
		if err == nil {
			if hw.Mode() != observe.PinNone {
				_ = hw.Wait(context.Background())
			}
			_ = hw.Close()
		}
		werr := cmd.Wait()
		ch.status = exitStatusOf(cmd.ProcessState, werr)
		a.mu.Lock()
		delete(a.children, ch.pid)
		a.mu.Unlock()
	}()
	return ch
}

// ownChild returns our unreaped child with that pid, or nil.
func (a *Actuator) ownChild(pid int) *child {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.children[pid]
}

// killOwnChild SIGKILLs a child we just started, and its group through the
// pin while it leads it, then waits for it to be reaped. Both paths go
// through a pidfd (the pin, or os.Process's own), so they cannot reach a
// reused pid.
func (a *Actuator) killOwnChild(ctx context.Context, name string, h *observe.Handle, p *os.Process, ch *child) {
	select {
	case <-ch.done:
		return
	default:
	}
	if h != nil {
		if how, err := signalGroupOf(h, h.PID(), syscall.SIGKILL); err == nil {
			a.event(name, EventSignal, fmt.Sprintf("sent SIGKILL to process group %d %s; evidence: our own child pid %d, pinned at spawn (failed start)", h.PID(), how, h.PID()))
			waitDone(ctx, ch.done, DefaultKillTimeout)
			return
		}
	}
	if err := p.Signal(syscall.SIGKILL); err == nil {
		a.event(name, EventSignal, fmt.Sprintf("sent SIGKILL to pid %d through os.Process; evidence: our own unreaped child (failed start)", p.Pid))
	}
	waitDone(ctx, ch.done, DefaultKillTimeout)
}

// waitDone waits for done, up to d or ctx.
func waitDone(ctx context.Context, done <-chan struct{}, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
		return false
	case <-ctx.Done():
		return false
	}
}

// WaitReady waits until the server is ready, checking every ReadyPeriod while
// watching for its exit. Exit before ready gives *StartError ("exited with
// code N", or "killed by signal 9 (SIGKILL)" with an out-of-memory hint) with
// the last log lines, after its record is removed; no readiness within
// StartupTimeout stops it with the full stop sequence, then gives
// *StartError "not ready after Ns". In both cases the process, its record
// and the handle are gone when it returns. If ctx ends first, the server is
// left running with its record (it is adopted later), r.Handle is closed,
// and ctx's error is returned.
func (a *Actuator) WaitReady(ctx context.Context, req StartRequest, r *Running) error {
	timeout := req.StartupTimeout
	if timeout <= 0 {
		timeout = DefaultStartupTimeout
	}
	period := req.ReadyPeriod
	if period <= 0 {
		period = DefaultReadyPeriod
	}
	ready := req.Ready
	// The default check is a connect to loopback (tens of microseconds),
	// cheap enough to run every 2 ms for the first second, so that a server
	// listening within milliseconds is seen within milliseconds; then every
	// period. A declared check runs every period from the start.
	next := period
	fastUntil := time.Now()
	if ready == nil && req.Port > 0 {
		next = min(fastReadyPeriod, period)
		fastUntil = fastUntil.Add(fastReadyWindow)
		port := req.Port
		ready = func(ctx context.Context) observe.ProbeResult {
			if observe.PortAccepting(ctx, port) {
				return observe.ProbeResult{OK: true}
			}
			return observe.ProbeResult{Message: fmt.Sprintf("port %d does not accept connections", port)}
		}
	}

	exited, stopWatch := a.exitChannel(r)
	defer stopWatch()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTimer(next)
	defer tick.Stop()
	dctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	last := ""
	for {
		select {
		case <-exited:
			return a.failExited(ctx, req, r)
		default:
		}
		if ready == nil {
			return nil // running is ready
		}
		res := ready(dctx)
		if res.OK {
			// It may have died right after answering; then it is not ready.
			select {
			case <-exited:
				return a.failExited(ctx, req, r)
			default:
			}
			return nil
		}
		last = res.Message
		select {
		case <-tick.C:
			if time.Now().After(fastUntil) {
				next = period
			}
			tick.Reset(next)
		case <-exited:
			return a.failExited(ctx, req, r)
		case <-deadline.C:
			return a.failTimeout(ctx, req, r, timeout, last)
		case <-ctx.Done():
			if r.Handle != nil {
				_ = r.Handle.Close()
			}
			return fmt.Errorf("wait for server %s to be ready: %w", req.Name, ctx.Err())
		}
	}
}

// exitChannel returns a channel closed when r's process has exited.
func (a *Actuator) exitChannel(r *Running) (<-chan struct{}, func()) {
	if r.child != nil {
		return r.child.done, func() {}
	}
	ch := make(chan struct{})
	wctx, cancel := context.WithCancel(context.Background())
	go func() {
		if r.Handle.Wait(wctx) == nil {
			close(ch)
		}
	}()
	return ch, cancel
}

// failExited cleans up after a process that exited before it was ready and
// returns the error that says how it ended.
func (a *Actuator) failExited(ctx context.Context, req StartRequest, r *Running) error {
	se := &StartError{Name: req.Name, Reason: ReasonFailed, ExitCode: -1}
	if r.child != nil {
		// It exited: reaping follows at once.
		if waitDone(ctx, r.child.done, DefaultKillTimeout) {
			st := r.child.status
			se.ExitCode, se.Signal = st.Code, st.Signal
			se.Message = st.String()
			if st.Signal == "SIGKILL" {
				se.Message += " (the out-of-memory killer may have ended it)"
			}
		} else {
			se.Message = "exited"
		}
	} else {
		se.Message = "exited"
	}
	se.Message += " before it was ready"
	// Whatever it left in its group or below it goes too.
	if r.Handle != nil {
		if err := a.cleanupLeftovers(ctx, r.Record, req); err != nil {
			se.Err = err
		}
		_ = r.Handle.Close()
	}
	if err := a.Dir.RemoveRecord(req.Name); err != nil && se.Err == nil {
		se.Err = err
	}
	se.LogTail = a.logTail(req.Name, r.logOffset)
	a.event(req.Name, EventStartFailed, se.Message)
	return se
}

// failTimeout stops a server that was not ready in time.
func (a *Actuator) failTimeout(ctx context.Context, req StartRequest, r *Running, timeout time.Duration, last string) error {
	se := &StartError{Name: req.Name, Reason: ReasonFailed, ExitCode: -1,
		Message: fmt.Sprintf("not ready after %s", formatSeconds(timeout))}
	if last != "" {
		se.Message += " (last check: " + last + ")"
	}
	err := a.Stop(ctx, r.Record, StopOptions{Grace: req.Grace, KillTimeout: req.KillTimeout})
	if err != nil {
		se.Err = err
	}
	if r.child != nil && !waitDone(ctx, r.child.done, DefaultKillTimeout) && se.Err == nil {
		se.Err = fmt.Errorf("pid %d was not reaped", r.Record.PID)
	}
	if r.Handle != nil {
		_ = r.Handle.Close()
	}
	se.LogTail = a.logTail(req.Name, r.logOffset)
	a.event(req.Name, EventStartFailed, se.Message)
	return se
}

// cleanupLeftovers stops what a failed start left in its process group or
// below it, once its leader has exited: only pinned, verified processes are
// signalled.
func (a *Actuator) cleanupLeftovers(ctx context.Context, rec Record, req StartRequest) error {
	if rec.PGID <= 1 {
		return nil
	}
	members := a.addStragglers(ctx, rec, nil)
	if len(members) == 0 {
		return nil
	}
	defer closeTargets(members)
	return a.terminate(ctx, rec, members, "", durationOr(req.Grace, DefaultGrace), durationOr(req.KillTimeout, DefaultKillTimeout))
}

func durationOr(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

func formatSeconds(d time.Duration) string {
	if d%time.Second == 0 {
		return fmt.Sprintf("%ds", int64(d/time.Second))
	}
	return d.String()
}

// logTail returns the last LogTailLines lines written to the log after
// offset (this run's output).
func (a *Actuator) logTail(name string, offset int64) []string {
	f, err := os.OpenFile(a.Dir.LogPath(name), os.O_RDONLY|noFollow, 0)
	if err != nil {
		return nil
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil
	}
	size := fi.Size()
	if offset > size {
		offset = 0 // rotated or truncated
	}
	start := offset
	if size-start > logTailBytes {
		start = size - logTailBytes
	}
	b, err := io.ReadAll(io.NewSectionReader(f, start, size-start))
	if err != nil {
		return nil
	}
	text := strings.TrimRight(string(b), "\n")
	if text == "" {
		return nil
	}
	lines := strings.Split(text, "\n")
	if start > offset && len(lines) > 1 {
		lines = lines[1:] // the first one is cut
	}
	if len(lines) > LogTailLines {
		lines = lines[len(lines)-LogTailLines:]
	}
	return lines
}
