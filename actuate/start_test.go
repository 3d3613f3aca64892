package actuate

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/procfleet/procfleet/internal/testserver"
	"github.com/procfleet/procfleet/observe"
)

func TestStartRecordsKernelIdentity(t *testing.T) {
	a, ev := newActuator(t)
	ctx := testCtx(t)
	port := testserver.FreePort(t)
	signals := filepath.Join(t.TempDir(), "signals")

	// A descriptor this process holds without O_CLOEXEC must not reach the
	// server.
	leak := filepath.Join(t.TempDir(), "leak-canary")
	fd, err := syscall.Open(leak, syscall.O_CREAT|syscall.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Close(fd) })

	req := serverReq("api", port, "-port", itoa(port), "-signals", signals, "-print", "hello from api")
	req.Env = append(req.Env, "API_COLOR=blue")
	req.Dir = t.TempDir()
	r, err := a.Start(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	killPinned(t, r.Record.PID)
	defer r.Handle.Close()

	id, err := observe.ReadIdentity(r.Record.PID)
	if err != nil {
		t.Fatal(err)
	}
	boot, _ := observe.BootID()
	rec := r.Record
	if rec.StartTime != id.StartTime || rec.BootID != boot || rec.UID != id.UID || !slices.Equal(rec.Cmdline, id.Cmdline) {
		t.Errorf("record %+v does not match the kernel's identity %+v (boot %s)", rec, id, boot)
	}
	if rec.PGID != rec.PID || id.SID != rec.PID {
		t.Errorf("pgid %d sid %d, want both = pid %d (own session)", rec.PGID, id.SID, rec.PID)
	}
	if ino, ok := r.Handle.PidfdInode(); ok && rec.PidfdInode != ino {
		t.Errorf("pidfdInode %d, want %d", rec.PidfdInode, ino)
	}
	fid, _ := a.Dir.folderID()
	if !validToken(rec.Instance) || rec.StateDir == nil || *rec.StateDir != fid || !slices.Equal(rec.SpawnCmdline, rec.Cmdline) {
		t.Errorf("v2 fields: instance %q, stateDir %v (folder %v), spawnCmdline %q", rec.Instance, rec.StateDir, fid, rec.SpawnCmdline)
	}
	// The token is in the server's environment, with its name.
	h := killPinned(t, rec.PID)
	if v, ok, err := h.Env(InstanceEnv); err != nil || !ok || v != rec.Instance {
		t.Errorf("%s in the server's environment = %q, %v, %v; want %s", InstanceEnv, v, ok, err, rec.Instance)
	}
	if v, ok, err := h.Env(ServerEnv); err != nil || !ok || v != "api" {
		t.Errorf("%s in the server's environment = %q, %v, %v; want api", ServerEnv, v, ok, err)
	}
	if rec.Port != port || rec.Name != "api" || rec.Version != RecordVersion || rec.StartedAt.IsZero() {
		t.Errorf("record fields: %+v", rec)
	}
	onDisk, err := a.Dir.ReadRecord("api")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(rec, onDisk); diff != "" {
		t.Errorf("record on disk differs (-returned +disk):\n%s", diff)
	}

	fds := fdTargets(t, rec.PID)
	if fds[0] != "/dev/null" || fds[1] != a.Dir.LogPath("api") || fds[2] != a.Dir.LogPath("api") {
		t.Errorf("stdio = %q %q %q, want /dev/null and the log twice", fds[0], fds[1], fds[2])
	}
	for n, target := range fds {
		if target == leak {
			t.Errorf("server inherited descriptor %d -> %s", n, target)
		}
	}
	cwd, _ := os.Readlink("/proc/" + itoa(rec.PID) + "/cwd")
	if cwd != req.Dir {
		t.Errorf("cwd %s, want %s", cwd, req.Dir)
	}
	env, _ := os.ReadFile("/proc/" + itoa(rec.PID) + "/environ")
	if !strings.Contains(string(env), "\x00API_COLOR=blue\x00") && !strings.HasPrefix(string(env), "API_COLOR=blue\x00") {
		t.Errorf("declared env not passed")
	}
	if len(ev.with(EventStarted)) != 1 {
		t.Errorf("events %v, want one Started", ev.all)
	}

	if err := a.Stop(ctx, rec, StopOptions{Port: port}); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	assertGone(t, r.Handle)
	assertNoRecord(t, a.Dir, "api")
	if observe.PortAccepting(ctx, port) {
		t.Errorf("port %d still accepts after Stop", port)
	}
	if got := readSignals(t, signals); len(got) != 1 || !strings.HasSuffix(got[0], " SIGTERM") {
		t.Errorf("signals received %v, want one SIGTERM", got)
	}
	log, _ := os.ReadFile(a.Dir.LogPath("api"))
	if strings.Count(string(log), "hello from api") != 2 {
		t.Errorf("log %q, want the line on stdout and stderr", log)
	}
	fi, _ := os.Stat(a.Dir.LogPath("api"))
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("log mode %v, want 0600", fi.Mode().Perm())
	}
}

func TestStartPortConflict(t *testing.T) {
	a, _ := newActuator(t)
	ctx := testCtx(t)
	port := testserver.FreePort(t)
	stranger, strangerSignals := startStranger(t, "-port", itoa(port))

	r, err := a.Start(ctx, serverReq("api", port, "-port", itoa(port)))
	stopIfStarted(t, r)
	var se *StartError
	if !errors.As(err, &se) || se.Reason != ReasonPortConflict {
		t.Fatalf("Start error = %v, want *StartError PortConflict", err)
	}
	if !slices.Contains(se.HolderPIDs, stranger.Process.Pid) {
		t.Errorf("HolderPIDs %v, want the stranger %d", se.HolderPIDs, stranger.Process.Pid)
	}
	for _, w := range []string{"pid " + itoa(stranger.Process.Pid), "-port"} {
		if !strings.Contains(se.Message, w) {
			t.Errorf("message %q does not name %q", se.Message, w)
		}
	}
	assertNoRecord(t, a.Dir, "api")
	if _, err := os.Stat(a.Dir.LogPath("api")); err == nil {
		t.Errorf("a log was opened although nothing was started")
	}
	assertAlive(t, stranger)
	if got := readSignals(t, strangerSignals); len(got) != 0 {
		t.Errorf("stranger received %v", got)
	}
}

// warmFDs makes the runtime and packages open what they keep open for good
// (netpoller, pidfd probing, the kernel log's reader) before descriptors
// are counted.
func warmFDs(t *testing.T, a *Actuator) {
	t.Helper()
	ctx := testCtx(t)
	r, err := a.Start(ctx, serverReq("warm", 0, "-exit-after", "1h"))
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Stop(ctx, r.Record, StopOptions{}); err != nil {
		t.Fatal(err)
	}
	_ = r.Handle.Close()
	observe.PortAccepting(ctx, testserver.FreePort(t))
	observe.KernelOOMKill(0, 0)
}

func TestStartExitBeforeReady(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		wantMsg  []string
		wantCode int
		wantSig  string
	}{
		{"exit code 3", []string{"-exit-after", "20ms", "-exit-code", "3"}, []string{"exited with code 3 before it was ready"}, 3, ""},
		// A SIGKILL the kernel's OOM killer did not send gets no OOM hint.
		{"killed by SIGKILL", []string{"-kill-self-after", "20ms"}, []string{"killed by signal 9 (SIGKILL) before it was ready"}, -1, "SIGKILL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, _ := newActuator(t)
			warmFDs(t, a)
			ctx := testCtx(t)
			port := testserver.FreePort(t)
			before := countFDs(t)
			// The server never listens: it ends before the port is ready.
			args := append([]string{"-port", itoa(port), "-listen-delay", "1h", "-print", "about to fail"}, tt.args...)
			r, err := a.Start(ctx, serverReq("api", port, args...))
			stopIfStarted(t, r)
			var se *StartError
			if !errors.As(err, &se) || se.Reason != ReasonFailed {
				t.Fatalf("Start error = %v, want *StartError Failed", err)
			}
			for _, w := range tt.wantMsg {
				if !strings.Contains(se.Message, w) {
					t.Errorf("message %q does not contain %q", se.Message, w)
				}
			}
			if strings.Contains(se.Message, "out-of-memory") || se.OOM != "" {
				t.Errorf("message %q (OOM %q) claims an out-of-memory kill the kernel did not report", se.Message, se.OOM)
			}
			if se.ExitCode != tt.wantCode || se.Signal != tt.wantSig {
				t.Errorf("ExitCode %d Signal %q, want %d %q", se.ExitCode, se.Signal, tt.wantCode, tt.wantSig)
			}
			if !slices.Contains(se.LogTail, "about to fail") {
				t.Errorf("LogTail %q lacks the server's output", se.LogTail)
			}
			assertNoRecord(t, a.Dir, "api")
			if after := countFDs(t); after != before {
				t.Errorf("open descriptors: %d before, %d after", before, after)
			}
		})
	}
}

func TestStartTimeoutStopsServer(t *testing.T) {
	a, ev := newActuator(t)
	warmFDs(t, a)
	ctx := testCtx(t)
	port := testserver.FreePort(t)
	signals := filepath.Join(t.TempDir(), "signals")
	before := countFDs(t)
	// The server never listens (no -port): it is never ready, and it handles
	// SIGTERM.
	readyFile := filepath.Join(t.TempDir(), "ready")
	req := serverReq("api", port, "-signals", signals, "-ready-file", readyFile)
	req.StartupTimeout = 300 * time.Millisecond
	r, err := a.Spawn(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	h := killPinned(t, r.Record.PID)
	// Its handlers are up once it wrote the file; the port stays closed.
	waitForFile(t, readyFile, r.Done())
	err = a.WaitReady(ctx, req, r)
	var se *StartError
	if !errors.As(err, &se) || !strings.Contains(se.Message, "not ready after 300ms") {
		t.Fatalf("WaitReady error = %v, want *StartError not ready after 300ms", err)
	}
	if se.Err != nil {
		t.Errorf("stop after the timeout failed: %v", se.Err)
	}
	assertGone(t, h)
	assertNoRecord(t, a.Dir, "api")
	if got := readSignals(t, signals); len(got) != 1 || !strings.HasSuffix(got[0], "SIGTERM") {
		t.Errorf("signals %v, want the stop's SIGTERM", got)
	}
	if len(ev.with(EventSignal)) == 0 {
		t.Errorf("no signal event: %v", ev.all)
	}
	_ = h.Close()
	if after := countFDs(t); after != before {
		t.Errorf("open descriptors: %d before, %d after", before, after)
	}
}

func TestStartWithoutPortIsReadyWhenRunning(t *testing.T) {
	a, _ := newActuator(t)
	ctx := testCtx(t)
	r, err := a.Start(ctx, serverReq("worker", 0, "-exit-after", "1h"))
	if err != nil {
		t.Fatal(err)
	}
	killPinned(t, r.Record.PID)
	defer r.Handle.Close()
	if r.Handle.Exited() {
		t.Error("worker reported ready but has exited")
	}
}

func TestStartExecFailure(t *testing.T) {
	a, _ := newActuator(t)
	_, err := a.Start(testCtx(t), StartRequest{Name: "api", Argv: []string{filepath.Join(t.TempDir(), "no-such-binary")}})
	var se *StartError
	if !errors.As(err, &se) || se.Reason != ReasonFailed || !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Start error = %v, want *StartError wrapping ErrNotExist", err)
	}
	assertNoRecord(t, a.Dir, "api")
}

func itoa(n int) string { return strconv.Itoa(n) }

// A record that cannot be written: the process is killed and reaped before
// the error is returned, and nothing is left open.
func TestSpawnRecordWriteFailure(t *testing.T) {
	forModes(t, func(t *testing.T, mode MembershipMode) {
		// The intent record cannot be written: nothing is started.
		a, ev := newActuator(t)
		warmFDs(t, a)
		ctx := testCtx(t)
		// A folder where the record goes makes the rename fail.
		if err := os.Mkdir(a.Dir.RecordPath("api"), 0o700); err != nil {
			t.Fatal(err)
		}
		before := countFDs(t)
		r, err := a.Spawn(ctx, serverReq("api", 0, "-print", "record-write-failure"))
		stopIfStarted(t, r)
		var se *StartError
		if !errors.As(err, &se) || !strings.Contains(se.Message, "write intent record") {
			t.Fatalf("Spawn error = %v, want *StartError write intent record", err)
		}
		if after := countFDs(t); after != before {
			t.Errorf("open descriptors: %d before, %d after", before, after)
		}
		if sent := ev.forServer("api", EventSignal); len(sent) != 0 {
			t.Errorf("signals sent though nothing was started: %v", sent)
		}
		assertNoneRuns(t, "record-write-failure")

		// The full record cannot be written (the hook, between spawn and
		// record, puts a folder in its place): the child is killed.
		if err := os.Remove(a.Dir.RecordPath("api")); err != nil {
			t.Fatal(err)
		}
		testHookAfterSpawn = func(string, int) {
			_ = os.Remove(a.Dir.RecordPath("api"))
			_ = os.Mkdir(a.Dir.RecordPath("api"), 0o700)
		}
		t.Cleanup(func() { testHookAfterSpawn = nil })
		r, err = a.Spawn(ctx, serverReq("api", 0, "-print", "record-write-failure"))
		stopIfStarted(t, r)
		if !errors.As(err, &se) || se.Message != "write record" {
			t.Fatalf("Spawn error = %v, want *StartError write record", err)
		}
		if sent := ev.forServer("api", EventSignal); len(sent) == 0 {
			t.Fatalf("no SIGKILL event: %v", ev.all)
		}
		if after := countFDs(t); after != before {
			t.Errorf("open descriptors: %d before, %d after", before, after)
		}
		assertNoneRuns(t, "record-write-failure")
	})
}

// assertNoneRuns fails if a child of this test still runs with marker in
// its command line.
func assertNoneRuns(t *testing.T, marker string) {
	t.Helper()
	kids, err := observe.Descendants(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	for _, pid := range kids {
		if id, err := observe.ReadIdentity(pid); err == nil && slices.Contains(id.Cmdline, marker) && !id.State.Exited() {
			t.Errorf("pid %d still runs: %+v", pid, id)
		}
	}
}
