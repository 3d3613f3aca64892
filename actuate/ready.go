package actuate

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/procfleet/procfleet/internal/safefile"
	"github.com/procfleet/procfleet/observe"
)

const (
	fastReadyPeriod = 2 * time.Millisecond
	fastReadyWindow = time.Second
	logTailBytes    = 64 << 10
)

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
	exited, stopWatch := a.exitChannel(r)
	defer stopWatch()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	if ready == nil && req.Port > 0 {
		err := a.waitListening(ctx, req, r, exited, deadline.C, timeout)
		if err != errNoListenWatch {
			return err
		}
	}
	// Without a listener table, the default check is a connect to loopback
	// (tens of microseconds), run every 2 ms for the first second, so that
	// a server listening within milliseconds is seen within milliseconds;
	// then every period. A declared check runs every period from the start.
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

// waitListening is WaitReady's default check where the kernel's listener
// table can be read: the server is ready once a socket listens on its port
// where a connect to 127.0.0.1 or [::1] reaches it (the kernel completes
// such a connect by itself, before the server calls accept), made in the
// server's cgroup when it has one. One loop serves every starting server
// (listenWatch). errNoListenWatch: no table; the caller connects instead.
func (a *Actuator) waitListening(ctx context.Context, req StartRequest, r *Running, exited <-chan struct{}, deadline <-chan time.Time, timeout time.Duration) error {
	w := listenWatch.add(req.Port)
	defer listenWatch.remove(w)
	select {
	case <-w.done:
		if w.err != nil {
			return w.err
		}
		// It may have died right after listening; then it is not ready.
		select {
		case <-exited:
			return a.failExited(ctx, req, r)
		default:
		}
		return nil
	case <-exited:
		return a.failExited(ctx, req, r)
	case <-deadline:
		return a.failTimeout(ctx, req, r, timeout, fmt.Sprintf("nothing listens on port %d", req.Port))
	case <-ctx.Done():
		if r.Handle != nil {
			_ = r.Handle.Close()
		}
		return fmt.Errorf("wait for server %s to be ready: %w", req.Name, ctx.Err())
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
// returns the error that says how it ended. A first process that exited 0
// leaving a member of the server running daemonized: the error says so
// (Reason Daemonized), naming the daemon, and the daemon is stopped.
func (a *Actuator) failExited(ctx context.Context, req StartRequest, r *Running) error {
	se := &StartError{Name: req.Name, Reason: ReasonFailed, ExitCode: -1}
	var st ExitStatus
	exited := false
	if r.child != nil {
		// It exited: reaping follows at once.
		if waitDone(ctx, r.child.done, DefaultKillTimeout) {
			st, exited = r.child.status, true
			se.ExitCode, se.Signal = st.Code, st.Signal
		}
	}
	switch {
	case exited:
		se.Message = ExitMessage(r.Record, st)
		if st.Signal == "SIGKILL" {
			if se.OOM = st.OOM; se.OOM == "" {
				se.OOM, _ = OOMEvidence(r.Record)
			}
		}
	default:
		se.Message = "exited"
	}
	se.Message += " before it was ready"
	if r.Handle != nil {
		if exited && st.Code == 0 && st.Signal == "" {
			if pid, cmdline := a.daemonOf(ctx, r.Record); pid > 0 {
				se.Reason, se.DaemonPID = ReasonDaemonized, pid
				se.Message = a.daemonizedMessage(ctx, req, pid, cmdline, se)
			}
		}
		grace, killTimeout := durationOr(req.Grace, DefaultGrace), durationOr(req.KillTimeout, DefaultKillTimeout)
		// We held the leader from its spawn to its exit: the rest of its
		// group may go too.
		if err := a.cleanup(ctx, r.Record, true, grace, killTimeout); err != nil {
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

// daemonOf finds a process left running by a server whose first process
// exited: in its cgroup, or (session) in its group or carrying its token.
// It prefers the one holding the declared port. 0 when none is left.
func (a *Actuator) daemonOf(ctx context.Context, rec Record) (int, []string) {
	var pids []int
	if rec.Cgroup != "" {
		if dir, err := cgroupDir(rec.Cgroup); err == nil {
			pids, _ = observe.CgroupProcs(dir)
		}
	} else {
		ms := a.sessionExtras(rec, map[int]bool{}, rec.PGID > 1)
		for _, m := range ms {
			pids = append(pids, m.h.PID())
		}
		closeMembers(ms)
	}
	if len(pids) == 0 {
		return 0, nil
	}
	pid := pids[0]
	if rec.Port > 0 {
		if h := observe.HolderOf(ctx, rec.Port); h != nil {
			for _, p := range h.PIDs {
				if slices.Contains(pids, p) {
					pid = p
					break
				}
			}
		}
	}
	id, _ := observe.ReadIdentity(pid)
	return pid, id.Cmdline
}

// daemonizedMessage says that a server daemonized, what the daemon holds,
// and how to run the program in the foreground.
func (a *Actuator) daemonizedMessage(ctx context.Context, req StartRequest, pid int, cmdline []string, se *StartError) string {
	holds := ""
	if req.Port > 0 {
		if h := observe.HolderOf(ctx, req.Port); h != nil && slices.Contains(h.PIDs, pid) {
			se.Holder = h
			holds = fmt.Sprintf(", holding port %d", req.Port)
		} else {
			holds = fmt.Sprintf(", not listening on port %d", req.Port)
		}
	}
	return fmt.Sprintf("daemonized: its first process exited with code 0 before it was ready and left pid %d (%s) running in the background%s; "+
		"procfleet runs servers in the foreground: start it so (nginx: -g 'daemon off;', redis: --daemonize no, memcached: without -d, postgres: run postgres, not pg_ctl start); the daemon is stopped",
		pid, observe.FormatCmdline(cmdline), holds)
}

// failTimeout stops a server that was not ready in time.
func (a *Actuator) failTimeout(ctx context.Context, req StartRequest, r *Running, timeout time.Duration, last string) error {
	se := &StartError{Name: req.Name, Reason: ReasonFailed, ExitCode: -1,
		Message: fmt.Sprintf("not ready after %s", formatSeconds(timeout))}
	if last != "" {
		se.Message += " (last check: " + last + ")"
	}
	err := a.Stop(ctx, r.Record, StopOptions{Grace: req.Grace, KillTimeout: req.KillTimeout, Held: r.Handle})
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

// logTail returns the last LogTailLines lines written to the log after
// offset (this run's output).
func (a *Actuator) logTail(name string, offset int64) []string {
	f, err := safefile.Open(a.Dir.LogPath(name), os.O_RDONLY, 0)
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
