//go:build linux

package reconciler

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"golang.org/x/sys/unix"

	"github.com/procfleet/procfleet/actuate"
	"github.com/procfleet/procfleet/internal/testserver"
	"github.com/procfleet/procfleet/observe"
)

// The tests in this file make the kernel produce the faults of procfleet
// issue 8, point 4, for real: a state folder that is full (a small tmpfs
// filled up), or read-only (a tmpfs remounted read-only, read-only bind
// mounts), and a process whose /proc/PID/stat cannot be read (an empty file
// bind-mounted over it). Mounting needs root (CAP_SYS_ADMIN); without it, or
// when a mount is refused, the test is skipped and says why. Each defined
// outcome is stated in the test's comment and in doc.go ("Faults").

// requireMounts skips the test unless it can mount.
func requireMounts(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root (CAP_SYS_ADMIN) to mount the tmpfs and bind mounts that make the fault real")
	}
}

// mountTmpfs mounts a tmpfs of the given size (owner-only, as OpenStateDir
// wants) on dir, unmounted (detached) when the test ends. dir must have been
// made after t.TempDir, so that the unmount runs before the removal.
func mountTmpfs(t *testing.T, dir, size string) {
	t.Helper()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size="+size+",mode=0700"); err != nil {
		t.Skipf("cannot mount a tmpfs on %s (%v): the fault cannot be made here", dir, err)
	}
	t.Cleanup(func() { _ = unix.Unmount(dir, unix.MNT_DETACH) })
}

// bindMount mounts from on to, and returns a func that unmounts it (also run
// when the test ends; once is enough).
func bindMount(t *testing.T, from, to string) (undo func()) {
	t.Helper()
	if err := unix.Mount(from, to, "", unix.MS_BIND, ""); err != nil {
		t.Skipf("cannot bind-mount %s on %s (%v): the fault cannot be made here", from, to, err)
	}
	var once sync.Once
	undo = func() {
		once.Do(func() {
			// ENOENT: a mount on /proc/PID/... whose process has exited;
			// the kernel detached it with the entry.
			if err := unix.Unmount(to, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.ENOENT) {
				t.Errorf("unmount %s: %v", to, err)
			}
		})
	}
	t.Cleanup(undo)
	return undo
}

// readOnlyBind makes path read-only through a read-only bind mount of it on
// itself: opening it for writing fails with EROFS, while descriptors opened
// before keep working.
func readOnlyBind(t *testing.T, path string) (undo func()) {
	t.Helper()
	undo = bindMount(t, path, path)
	if err := unix.Mount("", path, "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY, ""); err != nil {
		t.Fatalf("remount the bind mount of %s read-only: %v", path, err)
	}
	return undo
}

// remountTmpfs switches a tmpfs between read-only and read-write. The kernel
// refuses a read-only remount (EBUSY) while a file on it is open for
// writing; the reconciler's status writer holds one for microseconds at a
// time, so EBUSY is tried again (bounded).
func remountTmpfs(t *testing.T, dir, size string, readOnly bool) {
	t.Helper()
	flags := uintptr(unix.MS_REMOUNT)
	if readOnly {
		flags |= unix.MS_RDONLY
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := unix.Mount("tmpfs", dir, "tmpfs", flags, "size="+size+",mode=0700")
		if err == nil {
			return
		}
		if !errors.Is(err, unix.EBUSY) || time.Now().After(deadline) {
			t.Fatalf("remount %s (read-only %v): %v", dir, readOnly, err)
		}
		runtime.Gosched()
	}
}

// fillUp writes a filler file in dir until the file system is full, proves
// it (a new one-byte file cannot be written), and returns a func that
// removes the filler.
func fillUp(t *testing.T, dir string) (remove func()) {
	t.Helper()
	path := filepath.Join(dir, "filler") // not *.json: never read as a record
	fh, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4096)
	for total := 0; ; total += len(buf) {
		if _, err := fh.Write(buf); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("fill %s: %v", dir, err)
			}
			break
		}
		if total > 64<<20 {
			t.Fatalf("fill %s: 64 MiB written and not full: is it the small tmpfs?", dir)
		}
	}
	_ = fh.Close()
	probe := filepath.Join(dir, "probe")
	err = os.WriteFile(probe, []byte{1}, 0o600)
	_ = os.Remove(probe)
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("%s filled, yet a one-byte write gives %v, want ENOSPC", dir, err)
	}
	return func() {
		if err := os.Remove(path); err != nil {
			t.Errorf("remove the filler: %v", err)
		}
	}
}

// newFleetIn is newTestFleet with the state folder at state (a mount made
// by the test).
func newFleetIn(t *testing.T, dir, state string) *testFleet {
	t.Helper()
	sd, err := actuate.OpenStateDir(state)
	if err != nil {
		t.Fatal(err)
	}
	f := &testFleet{t: t, dir: dir, file: filepath.Join(dir, "procfleet.yaml"), state: sd, specs: map[string]*testSpec{}}
	t.Cleanup(f.killAll)
	return f
}

// faultRun is a running reconciler whose events and logs wake waitUntil,
// with the logs kept for the test to read.
type faultRun struct {
	*running
	wake chan struct{}

	mu   sync.Mutex
	logs []string
}

func (fr *faultRun) poke() {
	select {
	case fr.wake <- struct{}{}:
	default:
	}
}

// logged reports whether a log line holds every one of parts.
func (fr *faultRun) logged(parts ...string) bool {
	fr.mu.Lock()
	defer fr.mu.Unlock()
	for _, l := range fr.logs {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(l, p)
		}
		if all {
			return true
		}
	}
	return false
}

// runFaults starts Run with a short restart backoff, a logger that keeps
// every line (all verbosities), and onEvent called for each event on the
// reconciler's goroutine, before the event's next step.
func (f *testFleet) runFaults(t *testing.T, onEvent func(Event)) *faultRun {
	t.Helper()
	fr := &faultRun{wake: make(chan struct{}, 1)}
	sink := func(prefix, args string) {
		fr.mu.Lock()
		fr.logs = append(fr.logs, args)
		fr.mu.Unlock()
		t.Log(prefix, args)
		fr.poke()
	}
	fr.running = f.run(t, func(c *Config) {
		c.Log = funcr.New(sink, funcr.Options{Verbosity: 9})
		// Restarts are retried within half a second (the backoff's
		// arithmetic is backoff_test.go's).
		c.Backoff = &Backoff{Base: 50 * time.Millisecond, Max: 500 * time.Millisecond}
		inner := c.OnEvent
		c.OnEvent = func(e Event) {
			inner(e)
			if onEvent != nil {
				onEvent(e)
			}
			fr.poke()
		}
	})
	return fr
}

// waitUntil waits until cond holds, woken by every change of the
// reconciler (phase, readiness, pass), event and log line; bounded.
func (fr *faultRun) waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	waitChange(t, fr.r, fr.wake, what, cond)
}

// resync makes the reconciler look at every server again (Reload without
// waiting for readiness) and waits until each of names has had a pass since.
func (fr *faultRun) resync(t *testing.T, names ...string) {
	t.Helper()
	fr.r.mu.Lock()
	since := fr.r.begun
	fr.r.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := fr.r.Reload(ctx, false, 0); err != nil {
		t.Fatalf("Reload: %v", err)
	}
	fr.waitUntil(t, "a pass over "+strings.Join(names, ", "), func() bool {
		fr.r.mu.Lock()
		defer fr.r.mu.Unlock()
		for _, n := range names {
			if s := fr.r.servers[n]; s == nil || s.lastPass <= since {
				return false
			}
		}
		return true
	})
}

func (fr *faultRun) ready(names ...string) func() bool {
	return func() bool { return allReady(names...)(fr.r.Status()) }
}

// eventsWith returns the events of server with reason whose message holds
// every one of parts.
func (fr *faultRun) eventsWith(server, reason string, parts ...string) []Event {
	var out []Event
	for _, e := range fr.ev.all() {
		if e.Server != server || e.Reason != reason {
			continue
		}
		all := true
		for _, p := range parts {
			all = all && strings.Contains(e.Message, p)
		}
		if all {
			out = append(out, e)
		}
	}
	return out
}

// signalEvents returns the Signal events (each signal procfleet sent) of a
// server.
func (fr *faultRun) signalEvents(server string) []Event {
	return fr.eventsWith(server, actuate.EventSignal)
}

// liveWith lists the live processes (zombies have no command line) whose
// command line holds arg.
func liveWith(arg string) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err == nil && strings.Contains(string(b), arg) {
			out = append(out, pid)
		}
	}
	return out
}

// leftovers collects, at each failed start of a server, the processes of
// that server still alive: there must be none (the failed start cleaned up
// before reporting, and the next start cannot begin before the event).
type leftovers struct {
	mu       sync.Mutex
	failures int
	found    []string
}

func (l *leftovers) check(f *testFleet, server string) func(Event) {
	return func(e Event) {
		if e.Server != server || e.Reason != ReasonFailed {
			return
		}
		pids := liveWith(f.stamp(server))
		l.mu.Lock()
		defer l.mu.Unlock()
		l.failures++
		if len(pids) > 0 {
			l.found = append(l.found, fmt.Sprintf("after %q: pids %v", e.Message, pids))
		}
	}
}

func (l *leftovers) report(t *testing.T, server string) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.failures == 0 {
		t.Errorf("%s: no failed start was checked for leftovers", server)
	}
	for _, s := range l.found {
		t.Errorf("%s: a process was left running without a record %s", server, s)
	}
}

// identity reads the start time of pid (Linux: /proc/PID/stat).
func startTime(t *testing.T, pid int) uint64 {
	t.Helper()
	id, err := observe.ReadIdentity(pid)
	if err != nil {
		t.Fatalf("read the identity of pid %d: %v", pid, err)
	}
	return id.StartTime
}

// pinned pins pid for the test: its Exited says whether it ended, without
// /proc, and cannot be fooled by pid reuse.
func pinned(t *testing.T, pid int) *observe.Handle {
	t.Helper()
	h, err := observe.Pin(pid)
	if err != nil {
		t.Fatalf("pin pid %d: %v", pid, err)
	}
	t.Cleanup(func() { _ = h.Close() })
	return h
}

func waitExit(t *testing.T, h *observe.Handle) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := h.Wait(ctx); err != nil {
		t.Fatalf("pid %d did not exit: %v", h.PID(), err)
	}
}

// signalsOf returns the lines of a test server's -signals file.
func signalsOf(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	text := strings.TrimSpace(string(b))
	if text == "" {
		return nil
	}
	return strings.Split(text, "\n")
}

// oneSIGTERM reports whether a -signals file's lines are one SIGTERM.
func oneSIGTERM(lines []string) bool {
	return len(lines) == 1 && strings.HasSuffix(lines[0], " SIGTERM")
}

// untouched checks that a server's process is alive, is the one first seen
// (same pid in status, same start time), received no signal and was
// started once.
func untouched(t *testing.T, fr *faultRun, f *testFleet, name string, pid int, start uint64, sigFile string) {
	t.Helper()
	if got := pidOf(fr.r.Status(), name); got != pid {
		t.Errorf("%s: pid %d in status, want %d (untouched)", name, got, pid)
	}
	if got := startTime(t, pid); got != start {
		t.Errorf("%s: pid %d has start time %d, want %d (the same process)", name, pid, got, start)
	}
	if sig := signalsOf(t, sigFile); len(sig) > 0 {
		t.Errorf("%s: received signals %v", name, sig)
	}
	if ev := fr.signalEvents(name); len(ev) > 0 {
		t.Errorf("%s: procfleet signalled it: %+v", name, ev)
	}
	if n := len(f.starts(name)); n != 1 {
		t.Errorf("%s: started %d times, want 1", name, n)
	}
}

// TestFaultStateFolderFull: the state folder's servers/ is a small tmpfs,
// filled up while one server ("steady") runs; a new server ("late") is then
// added. Defined outcome:
//   - late's record cannot be written (ENOSPC): Spawn SIGKILLs the child it
//     has just started (its own, pinned at spawn: the Signal event says so)
//     and reaps it before the failure is reported, so no process of late
//     is ever left running without a record, and no record or temp file is
//     left behind;
//   - the error is surfaced: a Failed event and the last exit naming "write
//     record" and "no space left on device", the phase CrashLoopBackOff
//     between retries (Failed with apply, which does not retry);
//   - steady is not stopped or signalled;
//   - once the filler is removed, the next retry starts late and it becomes
//     Ready.
func TestFaultStateFolderFull(t *testing.T) {
	requireMounts(t)
	dir := t.TempDir()
	state := filepath.Join(dir, ".procfleet")
	servers := filepath.Join(state, "servers")
	if err := os.MkdirAll(servers, 0o700); err != nil {
		t.Fatal(err)
	}
	mountTmpfs(t, servers, "64k")
	f := newFleetIn(t, dir, state)
	ports := testserver.FreePorts(t, 3)
	steadySig := filepath.Join(dir, "steady.signals")
	f.add(&testSpec{name: "steady", port: ports[0], args: []string{"-signals", steadySig}})
	f.write()
	var left leftovers
	fr := f.runFaults(t, left.check(f, "late"))
	fr.waitUntil(t, "steady ready", fr.ready("steady"))
	steady := pidOf(fr.r.Status(), "steady")
	steadyStart := startTime(t, steady)

	removeFiller := fillUp(t, servers)
	f.add(&testSpec{name: "late", port: ports[1]})
	f.write()
	fr.waitUntil(t, "late's start failing twice (a retry) and backing off", func() bool {
		s, _ := fr.r.Status().Get("late")
		return len(fr.eventsWith("late", ReasonFailed)) >= 2 && s.Phase == PhaseCrashLoopBackOff
	})
	s, _ := fr.r.Status().Get("late")
	for _, want := range []string{"write record", "no space left on device"} {
		if !strings.Contains(s.Reason, want) || s.LastExit == nil || !strings.Contains(s.LastExit.Reason, want) {
			t.Errorf("late: phase reason %q, last exit %+v; want both to name %q", s.Reason, s.LastExit, want)
		}
	}
	if ev := fr.eventsWith("late", ReasonFailed, "write record", "no space left on device"); len(ev) < 2 {
		t.Errorf("late: %d Failed events naming the record write and ENOSPC, want every one of %d", len(ev), len(fr.eventsWith("late", ReasonFailed)))
	}
	// The intent record may fit (written into a spare inode, no block
	// to allocate) and the full record not: the new process is then
	// killed, on the evidence of its spawn.
	for _, e := range fr.signalEvents("late") {
		own := strings.Contains(e.Message, "our own") || strings.Contains(e.Message, "the cgroup procfleet made for this spawn")
		if !strings.Contains(e.Message, "SIGKILL") || !own {
			t.Errorf("late: signal without the evidence of its own child: %q", e.Message)
		}
	}
	if _, err := f.state.ReadRecord("late"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("late: record while its writes fail: %v", err)
	}
	if tmp, _ := filepath.Glob(filepath.Join(servers, ".late.json*")); len(tmp) > 0 {
		t.Errorf("temp files left behind by the failed record writes: %v", tmp)
	}
	untouched(t, fr, f, "steady", steady, steadyStart, steadySig)

	removeFiller()
	fr.waitUntil(t, "late ready once there is room", fr.ready("late"))
	late := pidOf(fr.r.Status(), "late")
	if rec, err := f.state.ReadRecord("late"); err != nil || rec.PID != late {
		t.Errorf("late's record after the retry: %+v, %v; want pid %d", rec, err, late)
	}
	if pids := liveWith(f.stamp("late")); len(pids) != 1 || pids[0] != late {
		t.Errorf("live processes of late: %v, want only pid %d", pids, late)
	}
	untouched(t, fr, f, "steady", steady, steadyStart, steadySig)
	left.report(t, "late")
	fr.stop(t)

	// apply (one shot) on a full folder: the new server is Failed with the
	// same message, and apply fails naming it; the others are adopted.
	removeFiller = fillUp(t, servers)
	defer removeFiller()
	f.add(&testSpec{name: "third", port: ports[2]})
	f.write()
	st, err := converge(t, f, true)
	var nc *NotConvergedError
	if !errors.As(err, &nc) || len(nc.Servers) != 1 || !strings.Contains(nc.Servers["third"], "no space left on device") {
		t.Fatalf("apply on a full state folder: %v; want NotConvergedError naming only third with ENOSPC", err)
	}
	if s, _ := st.Get("third"); s.Phase != PhaseFailed || !strings.Contains(s.Reason, "write record") {
		t.Errorf("third after apply: %s %q, want Failed naming the record write", s.Phase, s.Reason)
	}
	if pids := liveWith(f.stamp("third")); len(pids) != 0 {
		t.Errorf("apply left third's processes %v running without a record", pids)
	}
	if pidOf(st, "steady") != steady || pidOf(st, "late") != late {
		t.Errorf("apply did not adopt steady %d and late %d:\n%s", steady, late, dumpStatus(st))
	}
	if sig := signalsOf(t, steadySig); len(sig) > 0 {
		t.Errorf("steady received signals %v", sig)
	}
}

// TestFaultStateFolderReadOnly: the state folder is a tmpfs (its logs/ a
// bind mount of a disk folder: the servers' logs stay open for writing,
// and the kernel refuses to remount read-only a file system with a file
// open for writing); with "steady" and "keeper" running and keeper's record
// corrupted, it is remounted read-only, and the servers' events files are
// made read-only (bind mounts). Then steady is removed from the fleet and
// "late" added. Defined outcome:
//   - late's start fails like on a full disk, with "read-only file system":
//     no process left without a record, Failed events, retried;
//   - steady, proven ours, is stopped (one SIGTERM), but its record cannot
//     be removed: the error is surfaced (phase Failed, an event) and the
//     record stays; its removal is retried with the work queue's backoff
//     (50 ms doubling to 30 s) and at each resync, and succeeds once the
//     folder is writable again; nothing is signalled meanwhile;
//   - keeper's untrusted record can neither be moved aside nor rewritten:
//     keeper, whose pidfd this reconciler holds, stays Running and is not
//     quarantined; a RecordFailed event and its status message say the
//     record could not be written; it is rewritten (RecordRewritten) once
//     the folder is writable again;
//   - status.json and the events files cannot be written: that is logged
//     (once, until it works again), nothing crashes or blocks, the old
//     status.json stays whole; both are written again afterwards.
func TestFaultStateFolderReadOnly(t *testing.T) {
	requireMounts(t)
	dir := t.TempDir()
	state := filepath.Join(dir, ".procfleet")
	logsOnDisk := filepath.Join(dir, "logs")
	for _, d := range []string{state, logsOnDisk} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	const size = "1m"
	mountTmpfs(t, state, size)
	if err := os.Mkdir(filepath.Join(state, "logs"), 0o700); err != nil {
		t.Fatal(err)
	}
	bindMount(t, logsOnDisk, filepath.Join(state, "logs"))
	f := newFleetIn(t, dir, state)
	ports := testserver.FreePorts(t, 3)
	steadySig, keeperSig := filepath.Join(dir, "steady.signals"), filepath.Join(dir, "keeper.signals")
	f.add(&testSpec{name: "steady", port: ports[0], args: []string{"-signals", steadySig}})
	f.add(&testSpec{name: "keeper", port: ports[1], args: []string{"-signals", keeperSig}})
	f.write()
	var left leftovers
	fr := f.runFaults(t, left.check(f, "late"))
	fr.waitUntil(t, "steady and keeper ready", fr.ready("steady", "keeper"))
	steady, keeper := pidOf(fr.r.Status(), "steady"), pidOf(fr.r.Status(), "keeper")
	keeperStart := startTime(t, keeper)
	steadyPin := pinned(t, steady)
	if err := os.WriteFile(f.state.EventsPath("late"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	// Wait for status.json to show both (the writer runs after changes).
	waitFor(t, "status.json written", func() bool {
		st, err := ReadStatus(f.state.StatusPath())
		return err == nil && allReady("steady", "keeper")(st)
	})
	corruptRecord(t, f, "keeper")

	var undo []func()
	for _, n := range []string{"steady", "keeper", "late"} {
		undo = append(undo, readOnlyBind(t, f.state.EventsPath(n)))
	}
	remountTmpfs(t, state, size, true)
	if err := os.WriteFile(filepath.Join(state, "probe"), nil, 0o600); !errors.Is(err, syscall.EROFS) {
		t.Fatalf("state folder remounted read-only, yet creating a file gives %v", err)
	}

	f.remove("steady")
	f.add(&testSpec{name: "late", port: ports[2]})
	f.write()
	fr.waitUntil(t, "steady stopped and its record removal retried, late failing twice, keeper's record failure reported", func() bool {
		s, _ := fr.r.Status().Get("steady")
		return s.Phase == PhaseFailed && steadyPin.Exited() &&
			len(fr.eventsWith("steady", ReasonRecordFailed, "cannot remove the record", "read-only file system")) == 1 &&
			len(fr.eventsWith("late", ReasonFailed)) >= 2 &&
			len(fr.eventsWith("keeper", ReasonRecordFailed)) >= 1 &&
			fr.logged("Cannot write status", "read-only file system") &&
			fr.logged("Cannot append to the events file", "read-only file system")
	})
	st := fr.r.Status()

	// late: like a full disk.
	if ev := fr.eventsWith("late", ReasonFailed, "write record", "read-only file system"); len(ev) < 2 {
		t.Errorf("late: %d Failed events naming the record write and EROFS, want at least 2", len(ev))
	}
	if _, err := f.state.ReadRecord("late"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("late: record while the folder is read-only: %v", err)
	}

	// steady: stopped, its record kept, the error surfaced.
	if s, _ := st.Get("steady"); !strings.Contains(s.Reason+s.Message, "read-only file system") || !strings.Contains(s.Reason, "stopped") {
		t.Errorf("steady: %s %q %q; want Failed saying it stopped but its record could not be removed (read-only file system)", s.Phase, s.Reason, s.Message)
	}
	if rec, err := f.state.ReadRecord("steady"); err != nil || rec.PID != steady {
		t.Errorf("steady's record: %+v, %v; want it kept (pid %d) while it cannot be removed", rec, err, steady)
	}
	if sig := signalsOf(t, steadySig); !oneSIGTERM(sig) {
		t.Errorf("steady received %v, want one SIGTERM", sig)
	}
	if ev := fr.eventsWith("steady", ReasonFailed, "read-only file system"); len(ev) == 0 {
		t.Errorf("steady: no Failed event naming the record removal error")
	}

	// keeper: running, not quarantined, the record failure shown.
	if s, _ := st.Get("keeper"); s.Phase != PhaseRunning || !s.Ready || !strings.Contains(s.Message, "read-only file system") {
		t.Errorf("keeper: %s ready=%v message %q; want Running and Ready, its message naming the record write error", s.Phase, s.Ready, s.Message)
	}
	if n := fr.ev.count("keeper", ReasonQuarantined); n != 0 {
		t.Errorf("keeper quarantined %d times, though this reconciler holds its pidfd", n)
	}
	untouched(t, fr, f, "keeper", keeper, keeperStart, keeperSig)

	// status.json: the last good one, whole.
	if disk, err := ReadStatus(f.state.StatusPath()); err != nil {
		t.Errorf("status.json while read-only: %v", err)
	} else if _, ok := disk.Get("late"); ok {
		t.Errorf("status.json names late, written while read-only?")
	}

	// Writable again: everything catches up at the next resync.
	for _, u := range undo {
		u()
	}
	remountTmpfs(t, state, size, false)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := fr.r.Reload(ctx, false, 0); err != nil {
		t.Fatalf("Reload: %v", err)
	}
	fr.waitUntil(t, "steady forgotten, late ready, keeper's record rewritten", func() bool {
		_, steadyKnown := fr.r.Status().Get("steady")
		return !steadyKnown && fr.ready("late", "keeper")() && fr.ev.count("keeper", ReasonRecordRewritten) >= 1
	})
	if _, err := f.state.ReadRecord("steady"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("steady's record after the folder is writable again: %v, want removed", err)
	}
	if fr.ev.count("steady", actuate.EventRecordRemoved) != 1 {
		t.Errorf("steady: %d RecordRemoved events, want 1", fr.ev.count("steady", actuate.EventRecordRemoved))
	}
	if rec, err := f.state.ReadRecord("keeper"); err != nil || rec.PID != keeper {
		t.Errorf("keeper's record: %+v, %v; want rewritten with pid %d", rec, err, keeper)
	}
	if s, _ := fr.r.Status().Get("keeper"); s.Message != "" {
		t.Errorf("keeper's message %q after its record was rewritten, want none", s.Message)
	}
	late := pidOf(fr.r.Status(), "late")
	if rec, err := f.state.ReadRecord("late"); err != nil || rec.PID != late {
		t.Errorf("late's record: %+v, %v; want pid %d", rec, err, late)
	}
	untouched(t, fr, f, "keeper", keeper, keeperStart, keeperSig)
	if sig := signalsOf(t, steadySig); !oneSIGTERM(sig) {
		t.Errorf("steady received %v, want the one SIGTERM of its stop", sig)
	}
	left.report(t, "late")
	fr.stop(t) // writes status.json once more
	disk, err := ReadStatus(f.state.StatusPath())
	if err != nil || !allReady("late", "keeper")(disk) {
		t.Errorf("status.json after the folder is writable again: %v\n%s", err, dumpStatus(disk))
	}
	if b, err := os.ReadFile(f.state.EventsPath("late")); err != nil || !strings.Contains(string(b), `"reason":"Ready"`) {
		t.Errorf("late's events file has no Ready event once writable: %v %q", err, b)
	}
	if !fr.logged("Status written again") || !fr.logged("Events file written again") {
		t.Errorf("the recovery of status.json and the events files was not logged")
	}
}

// hideStat bind-mounts an empty file over /proc/PID/stat, so that reading
// the identity of pid fails while the process runs on; it returns a func
// that removes the mount (also run when the test ends, before the test's
// processes are killed).
func hideStat(t *testing.T, pid int) (undo func()) {
	t.Helper()
	empty := filepath.Join(t.TempDir(), "empty")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	undo = bindMount(t, empty, fmt.Sprintf("/proc/%d/stat", pid))
	if _, err := observe.ReadIdentity(pid); err == nil {
		t.Fatalf("/proc/%d/stat hidden, yet its identity reads", pid)
	}
	return undo
}

// TestFaultProcUnreadableAtAdoption: up restarts and finds a record for a
// running server whose /proc/PID/stat cannot be read. Defined outcome
// (DESIGN.md rule 6): Quarantined / UnverifiedOwner with "cannot read the
// identity of pid N", the record kept, nothing signalled and nothing
// started (the process lives on, same start time); a resync while it lasts
// changes nothing; once /proc is readable the next resync adopts it:
// Running and Ready, the same pid, started once.
func TestFaultProcUnreadableAtAdoption(t *testing.T) {
	requireMounts(t)
	f := newTestFleet(t)
	sig := filepath.Join(f.dir, "a.signals")
	f.add(&testSpec{name: "a", port: testserver.FreePort(t), args: []string{"-signals", sig}})
	f.write()
	fr := f.runFaults(t, nil)
	fr.waitUntil(t, "a ready", fr.ready("a"))
	pid := pidOf(fr.r.Status(), "a")
	start := startTime(t, pid)
	fr.stop(t)
	h := pinned(t, pid)

	undo := hideStat(t, pid)
	fr2 := f.runFaults(t, nil)
	want := fmt.Sprintf("cannot read the identity of pid %d", pid)
	quarantined := func() bool {
		s, _ := fr2.r.Status().Get("a")
		return s.Phase == PhaseQuarantined && s.Reason == string(actuate.UnverifiedOwner) && strings.Contains(s.Message, want)
	}
	fr2.waitUntil(t, "a quarantined", quarantined)
	fr2.resync(t, "a")
	if !quarantined() {
		t.Errorf("a no longer quarantined after a resync while its identity cannot be read:\n%s", dumpStatus(fr2.r.Status()))
	}
	if h.Exited() {
		t.Fatalf("pid %d exited while quarantined", pid)
	}
	if rec, err := f.state.ReadRecord("a"); err != nil || rec.PID != pid {
		t.Errorf("a's record: %+v, %v; want it kept", rec, err)
	}
	if n := fr2.ev.count("a", ReasonStarting); n != 0 {
		t.Errorf("a: %d Starting events while quarantined, want none", n)
	}

	undo()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := fr2.r.Reload(ctx, true, 10*time.Second); err != nil {
		t.Fatalf("Reload once /proc is readable: %v", err)
	}
	fr2.waitUntil(t, "a adopted", fr2.ready("a"))
	if fr2.ev.count("a", ReasonAdopted) != 1 {
		t.Errorf("a: %d Adopted events, want 1", fr2.ev.count("a", ReasonAdopted))
	}
	untouched(t, fr2, f, "a", pid, start, sig)
}

// TestFaultProcUnreadableWhileTracked: /proc/PID/stat of a server this
// reconciler started (and holds a pidfd of) becomes unreadable. Defined
// outcome:
//   - nothing changes while nothing has to be done: the pidfd, not /proc,
//     tells whether it runs, so a resync keeps it Running and Ready, not
//     signalled, not started again;
//   - a stop (down) needs no /proc: the pidfd held since the spawn proves
//     the process (actuate.StopOptions.Held), so it gets one SIGTERM
//     through the pidfd, the event naming that evidence, and exits.
func TestFaultProcUnreadableWhileTracked(t *testing.T) {
	requireMounts(t)
	f := newTestFleet(t)
	sig := filepath.Join(f.dir, "a.signals")
	f.add(&testSpec{name: "a", port: testserver.FreePort(t), args: []string{"-signals", sig}})
	f.write()
	fr := f.runFaults(t, nil)
	fr.waitUntil(t, "a ready", fr.ready("a"))
	pid := pidOf(fr.r.Status(), "a")
	_ = startTime(t, pid) // readable before it is hidden
	h := pinned(t, pid)

	undo := hideStat(t, pid)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := fr.r.Reload(ctx, true, 10*time.Second); err != nil {
		t.Errorf("Reload while a's /proc is hidden: %v", err)
	}
	if st := fr.r.Status(); !allReady("a")(st) || pidOf(st, "a") != pid {
		t.Errorf("a after a resync with its /proc hidden:\n%s", dumpStatus(st))
	}

	// The pidfd held since the spawn proves the process, whatever /proc
	// says: the stop signals it through the pidfd, with that evidence.
	if _, err := fr.r.DownServers(ctx, []string{"a"}); err != nil {
		t.Fatalf("down while a's /proc is hidden: %v\n%s", err, dumpStatus(fr.r.Status()))
	}
	waitExit(t, h)
	if got := signalsOf(t, sig); !oneSIGTERM(got) {
		t.Errorf("a received %v, want the one SIGTERM of down", got)
	}
	ev := fr.signalEvents("a")
	if len(ev) != 1 || !strings.Contains(ev[0].Message, "held: pinned by pidfd") {
		t.Errorf("a's signal events %+v, want one naming the held pidfd", ev)
	}
	undo()
	if n := len(f.starts("a")); n != 1 {
		t.Errorf("a started %d times, want 1", n)
	}
}
