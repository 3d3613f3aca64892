package actuate

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/utils/clock"

	"github.com/procfleet/procfleet/internal/safefile"
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

	portPollPeriod = 20 * time.Millisecond
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
	// EventCommandLineChanged: a held process showed another command line
	// (an exec, a retitle) or uid; the record was rewritten.
	EventCommandLineChanged = "CommandLineChanged"
	// EventQuarantineLifted: an UntrustedRecord quarantine was resolved.
	EventQuarantineLifted = "QuarantineLifted"
	// EventAdopted: an intent record was resolved to the live process that
	// carries its token, and a full record written for it.
	EventAdopted = "Adopted"
	// EventLogReplaced: something other than a regular file at a log path
	// was moved aside and a fresh log started.
	EventLogReplaced = "LogReplaced"
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

	// cgLocks serialize, per server name, making its cgroup (Spawn) with
	// the reaper's removal of an exited child's empty one, so that a reaper
	// never removes the fresh cgroup of the next spawn of the same name.
	cgLocks map[string]*sync.Mutex

	prepared map[string]*prepared // next spawns made ready (PrepareNext)
	prep     preparerState
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
	// OOM is the kernel's evidence, read when the process was reaped, that
	// the out-of-memory killer ended it (its cgroup's oom_kill count); ""
	// when there is none then. ExitMessage also looks in the kernel log.
	OOM string
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

// testHookAfterSpawn, when set (tests only), runs between the spawn and
// the write of the full record, with the server's name and the new pid: a
// test pauses there to stand for a crash between the intent record and the
// full one.
var testHookAfterSpawn func(name string, pid int)

// Spawn starts a server.
//
//  1. The port must be free: a holder gives *StartError PortConflict with
//     the holder as data (Holder); nothing is started or signalled.
//  2. logs/<name>.log is opened for appending without following a link or
//     blocking; something other than a regular file there is moved aside
//     (<path>.corrupt-<time>) and a fresh log started; a path that cannot
//     be moved fails the start, naming it.
//  3. A fresh instance token is made and, where procfleet can make cgroups
//     (Membership), a fresh cgroup for the server; an intent record (name,
//     token, cgroup, no pid) is written (its temp file is written and
//     synced while steps 1-3 run, and renamed into place after them).
//  4. argv starts in a new session (setsid: its own session and process
//     group), straight in its cgroup (clone3 CLONE_INTO_CGROUP: it is
//     never outside it), with procfleet's environment, then the declared
//     one, then PROCFLEET_SERVER and PROCFLEET_INSTANCE; stdin from
//     /dev/null, stdout and stderr to the log (a file, never a pipe), no
//     other descriptor.
//  5. The child is pinned, its identity read from the kernel, and the full
//     record written over the intent record before Spawn returns.
//
// The process is reaped by this Actuator. If it exits before its record is
// written, Spawn cleans up and returns the *StartError WaitReady would
// have; any other failure after the exec kills the child (its own,
// unreaped: no doubt) and removes what was written.
func (a *Actuator) Spawn(ctx context.Context, req StartRequest) (*Running, error) {
	if err := checkName(req.Name); err != nil {
		return nil, fmt.Errorf("start server: %w", err)
	}
	if len(req.Argv) == 0 || req.Argv[0] == "" {
		return nil, &StartError{Name: req.Name, Reason: ReasonFailed, ExitCode: -1, Message: "empty command"}
	}
	log := a.Log.WithValues("server", req.Name)
	primeKernelLog()

	// The intent record's temp file was written and synced while the
	// server ran (PrepareNext), or since its exit was seen
	// (PrepareRestart), or is written and synced while the port is
	// checked, the log opened and the cgroup made; it is renamed into
	// place once they are done, and removed if the spawn goes no further.
	startedAt := a.now().UTC().Truncate(time.Second)
	token := newToken()
	intent := a.intentRecord(req, token)
	var staged *stagedIntent
	p := a.usePrepared(intent)
	if p != nil {
		token, intent, staged = p.rec.Instance, p.rec, p.staged
	} else {
		intent.StartedAt = startedAt
		staged = a.Dir.stageIntent(intent)
	}
	committed := false
	defer func() {
		if !committed {
			staged.discard()
		}
	}()

	if req.Port > 0 {
		if h := portHolder(ctx, req.Port); h != nil {
			msg := fmt.Sprintf("port %d is held by %s", req.Port, h.String())
			a.event(req.Name, EventStartFailed, msg)
			return nil, &StartError{Name: req.Name, Reason: ReasonPortConflict, ExitCode: -1, Message: msg, Holder: h, HolderPIDs: h.PIDs}
		}
	}

	logPath := a.Dir.LogPath(req.Name)
	logf, moved, err := safefile.OpenAppend(logPath, logMode)
	if err != nil {
		msg := "open log " + logPath
		a.event(req.Name, EventStartFailed, msg+": "+err.Error())
		return nil, &StartError{Name: req.Name, Reason: ReasonFailed, ExitCode: -1, Message: msg, Err: err}
	}
	if moved != "" {
		a.event(req.Name, EventLogReplaced, fmt.Sprintf("%s was not a regular file: moved aside to %s, a fresh log started", logPath, moved))
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
	closeFiles := func() { _ = devnull.Close(); _ = logf.Close() }
	if err := closeInheritedFDs(); err != nil {
		log.Error(err, "Cannot mark inherited descriptors close-on-exec")
	}

	cgLock := a.cgroupLock(req.Name)
	cgLock.Lock()
	sc, why, err := a.Dir.makeServerCgroup(req.Name)
	cgLock.Unlock()
	if err != nil {
		closeFiles()
		a.event(req.Name, EventStartFailed, err.Error())
		return nil, &StartError{Name: req.Name, Reason: ReasonFailed, ExitCode: -1, Message: err.Error()}
	}
	dropCgroup := func() {
		if sc != nil {
			_ = sc.fd.Close()
			_ = removeCgroup(sc.dir)
		}
	}
	made := ""
	if sc != nil {
		made = sc.path
	} else {
		log.V(1).Info("Membership is the session", "why", why)
	}
	if made == intent.Cgroup {
		err = staged.commit()
		if errors.Is(err, fs.ErrNotExist) && p != nil {
			// A prepared one, swept meanwhile by age (sweepTemps).
			err = a.Dir.writeIntent(intent)
		}
	} else {
		staged.discard()
		intent.Cgroup = made
		err = a.Dir.writeIntent(intent)
	}
	committed = true
	if err != nil {
		closeFiles()
		dropCgroup()
		return nil, &StartError{Name: req.Name, Reason: ReasonFailed, ExitCode: -1, Message: "write intent record", Err: err}
	}
	intent.StartedAt = startedAt // a prepared record's file has none

	newCmd := func() *exec.Cmd {
		cmd := exec.Command(req.Argv[0], req.Argv[1:]...)
		cmd.Dir = req.Dir
		env := append(os.Environ(), req.Env...)
		cmd.Env = append(env, ServerEnv+"="+req.Name, InstanceEnv+"="+token)
		cmd.Stdin = devnull
		cmd.Stdout = logf
		cmd.Stderr = logf
		cmd.SysProcAttr = newSessionAttr()
		if sc != nil {
			intoCgroup(cmd.SysProcAttr, sc.fd)
		}
		return cmd
	}
	cmd := newCmd()
	err = cmd.Start()
	if err != nil && sc != nil && cloneRefused(err) {
		// clone3 refused (a seccomp filter, as old container profiles
		// have): start it in the session mode instead.
		log.Info("Cannot start a process straight into its cgroup: the session membership is used", "cgroup", sc.path, "error", err.Error())
		dropCgroup()
		sc = nil
		intent.Cgroup = ""
		if werr := a.Dir.writeIntent(intent); werr != nil {
			closeFiles()
			_ = a.Dir.RemoveRecord(req.Name)
			return nil, &StartError{Name: req.Name, Reason: ReasonFailed, ExitCode: -1, Message: "write intent record", Err: werr}
		}
		cmd = newCmd()
		err = cmd.Start()
	}
	// The child has its own copies; ours close now, whatever happened.
	closeFiles()
	if sc != nil {
		_ = sc.fd.Close()
	}
	if err != nil {
		dropCgroup()
		_ = a.Dir.RemoveRecord(req.Name)
		msg := fmt.Sprintf("exec %s", observe.FormatCmdline(req.Argv))
		a.event(req.Name, EventStartFailed, msg+": "+err.Error())
		return nil, &StartError{Name: req.Name, Reason: ReasonFailed, ExitCode: -1, Message: msg, Err: err}
	}
	pid := cmd.Process.Pid
	// Nothing reaps the child before the pins below: its pid cannot be
	// reused, so the pins hold this very process.
	h, pinErr := observe.Pin(pid)
	ch := a.reap(cmd.Process, sc, cgLock)
	r := &Running{Handle: h, child: ch, logOffset: offset}
	abort := func(msg string, err error) error {
		a.killOwnChild(ctx, req.Name, h, cmd.Process, ch, sc)
		if h != nil {
			_ = h.Close()
		}
		_ = a.Dir.RemoveRecord(req.Name)
		a.event(req.Name, EventStartFailed, msg+": "+err.Error())
		return &StartError{Name: req.Name, Reason: ReasonFailed, ExitCode: -1, Message: msg, Err: err}
	}
	if pinErr != nil {
		// Only a reaped child is unpinnable, and nothing reaped it yet.
		h = nil
		return nil, abort("pin the new process", pinErr)
	}
	if testHookAfterSpawn != nil {
		testHookAfterSpawn(req.Name, pid)
	}
	id, idErr := spawnIdentity(ctx, h)
	if idErr != nil {
		if errors.Is(idErr, observe.ErrUntrusted) || errors.Is(idErr, observe.ErrGone) {
			// It exited already: report how.
			r.Record = intent
			r.Record.PID, r.Record.PGID = pid, pid
			return nil, a.failExited(ctx, req, r)
		}
		return nil, abort("read the identity of the new process", idErr)
	}
	if id.PGID != pid || id.SID != pid {
		return nil, abort("check the new process", fmt.Errorf("pid %d is in group %d and session %d, not its own", pid, id.PGID, id.SID))
	}
	boot, err := observe.BootID()
	if err != nil {
		return nil, abort("read boot id", err)
	}
	inode, _ := h.PidfdInode()
	r.Record = intent
	r.Record.PID, r.Record.PGID, r.Record.StartTime, r.Record.BootID = pid, pid, id.StartTime, boot
	r.Record.UID, r.Record.Cmdline, r.Record.SpawnCmdline, r.Record.PidfdInode = id.UID, id.Cmdline, id.Cmdline, inode
	if err := a.Dir.WriteRecord(r.Record); err != nil {
		return nil, abort("write record", err)
	}
	membership := "session"
	if sc != nil {
		membership = "cgroup " + sc.path
	}
	log.V(1).Info("Spawned", "pid", pid, "startTime", id.StartTime, "pinMode", h.Mode().String(), "membership", membership)
	a.event(req.Name, EventStarted, fmt.Sprintf("started pid %d (%s), start time %d, instance %s, membership: %s",
		pid, observe.FormatCmdline(id.Cmdline), id.StartTime, token, membership))
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

// cgroupLock returns the lock of server name's cgroup.
func (a *Actuator) cgroupLock(name string) *sync.Mutex {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.cgLocks == nil {
		a.cgLocks = make(map[string]*sync.Mutex)
	}
	l := a.cgLocks[name]
	if l == nil {
		l = new(sync.Mutex)
		a.cgLocks[name] = l
	}
	return l
}

// dropExitedCgroup removes the cgroup of an exited child when it is still
// the one made for it (same inode) and empty, with the name's cgroup lock
// held. It returns the cgroup's out-of-memory evidence for a child killed
// by SIGKILL ("" for none).
func dropExitedCgroup(sc *serverCgroup, ino uint64, st ExitStatus) (oom string) {
	fi, err := os.Stat(sc.dir)
	if err != nil {
		return ""
	}
	if id, ok := fileID(fi); !ok || id.Ino != ino {
		return "" // a later spawn's cgroup
	}
	if n, ok := observe.CgroupOOMKills(sc.dir); ok && n > 0 && st.Signal == "SIGKILL" {
		oom = fmt.Sprintf("memory.events of cgroup %s counts oom_kill %d", sc.path, n)
	}
	if populated, err := observe.CgroupPopulated(sc.dir); err == nil && !populated {
		_ = removeCgroup(sc.dir)
	}
	return oom
}

// ownChild returns our unreaped child with that pid, or nil.
func (a *Actuator) ownChild(pid int) *child {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.children[pid]
}

// killOwnChild SIGKILLs a child we just started, and its group through the
// pin while it leads it (and its cgroup, when it has one), then waits for
// it to be reaped. Every path goes through a pidfd (the pin, or
// os.Process's own) or the cgroup made for it, so none can reach a reused
// pid.
func (a *Actuator) killOwnChild(ctx context.Context, name string, h *observe.Handle, p *os.Process, ch *child, sc *serverCgroup) {
	defer func() {
		if sc != nil {
			wctx, cancel := context.WithTimeout(ctx, DefaultKillTimeout)
			_ = observe.WaitCgroupEmpty(wctx, sc.dir)
			cancel()
			_ = removeCgroup(sc.dir)
		}
	}()
	if sc != nil {
		_ = a.sendSignal(target{name: name, cgroup: sc.path, cgroupDir: sc.dir, evidence: "the cgroup procfleet made for this spawn (failed start)"}, syscall.SIGKILL)
	}
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
