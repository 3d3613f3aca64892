package actuate

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/procfleet/procfleet/internal/testserver"
	"github.com/procfleet/procfleet/observe"
)

// A server started by another procfleet process (a separate process that
// has exited, so the server is not this test's child) is verified from its
// record and stopped with SIGTERM only.
func TestStopServerStartedByAnotherProcess(t *testing.T) {
	a, ev := newActuator(t)
	ctx := testCtx(t)
	port := testserver.FreePort(t)
	signals := filepath.Join(t.TempDir(), "signals")
	pid := spawnElsewhere(t, spawnerRequest{Dir: a.Dir.Path, Name: "api", Port: port,
		Argv: testserver.Command("-port", itoa(port), "-signals", signals), Env: []string{testserver.Env()}})
	h := killPinned(t, pid)

	rec, err := a.Dir.ReadRecord("api")
	if err != nil {
		t.Fatal(err)
	}
	if rec.PID != pid {
		t.Fatalf("record pid %d, spawner said %d", rec.PID, pid)
	}
	if id, err := observe.ReadIdentity(pid); err != nil || id.PPID == os.Getpid() {
		t.Fatalf("server should not be this test's child: %+v, %v", id, err)
	}
	if err := a.Stop(ctx, rec, StopOptions{Port: port}); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	assertGone(t, h)
	assertNoRecord(t, a.Dir, "api")
	if got := readSignals(t, signals); len(got) != 1 || got[0] != itoa(pid)+" SIGTERM" {
		t.Errorf("signals received %v, want only SIGTERM", got)
	}
	sent := ev.with(EventSignal)
	if len(sent) != 1 || !strings.Contains(sent[0], "SIGTERM") {
		t.Errorf("signal events %v, want one SIGTERM", sent)
	}
	for _, w := range []string{"pid " + itoa(pid), "start time " + strconv.FormatUint(rec.StartTime, 10), "boot id " + rec.BootID, "pinned by pidfd"} {
		if len(sent) > 0 && !strings.Contains(sent[0], w) {
			t.Errorf("signal event %q does not name the evidence %q", sent[0], w)
		}
	}
	if observe.PortAccepting(ctx, port) {
		t.Errorf("port %d still accepts after Stop", port)
	}
}

func TestStopTwice(t *testing.T) {
	a, ev := newActuator(t)
	ctx := testCtx(t)
	signals := filepath.Join(t.TempDir(), "signals")
	r, err := a.Start(ctx, withReadyFile(t, serverReq("api", 0, "-signals", signals)))
	if err != nil {
		t.Fatal(err)
	}
	h := killPinned(t, r.Record.PID)
	defer r.Handle.Close()
	for i := range 2 {
		if err := a.Stop(ctx, r.Record, StopOptions{}); err != nil {
			t.Fatalf("Stop #%d: %v", i+1, err)
		}
	}
	assertGone(t, h)
	if got := readSignals(t, signals); len(got) != 1 {
		t.Errorf("signals %v, want one SIGTERM", got)
	}
	if n := len(ev.with(EventSignal)); n != 1 {
		t.Errorf("%d signal events, want 1: %v", n, ev.all)
	}
}

// A server that already exited is never signalled: its pid may be reused.
func TestStopAlreadyExited(t *testing.T) {
	a, ev := newActuator(t)
	ctx := testCtx(t)
	var sc signalCounter
	sc.install(a)
	signals := filepath.Join(t.TempDir(), "signals")
	r, err := a.Start(ctx, serverReq("api", 0, "-signals", signals, "-exit-after", "50ms"))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Handle.Close()
	select {
	case <-r.Done():
	case <-ctx.Done():
		t.Fatal("server did not exit")
	}
	if st, _ := r.Exit(); st.Code != 0 || st.String() != "exited with code 0" {
		t.Errorf("exit status %v", st)
	}
	if err := a.Stop(ctx, r.Record, StopOptions{}); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	assertNoRecord(t, a.Dir, "api")
	if got := sc.list(); len(got) != 0 {
		t.Errorf("signals sent to an exited server: %v", got)
	}
	if got := readSignals(t, signals); len(got) != 0 {
		t.Errorf("server recorded %v", got)
	}
	if len(ev.with(EventRecordRemoved)) != 1 {
		t.Errorf("events %v, want RecordRemoved", ev.all)
	}
}

// A stale record whose pid now belongs to a stranger with another start time
// is removed; the stranger is not signalled.
func TestStopStaleRecordPidReused(t *testing.T) {
	a, _ := newActuator(t)
	ctx := testCtx(t)
	stranger, signals := startStranger(t)
	rec := recordFor(t, "api", stranger.Process.Pid)
	rec.StartTime-- // the server that had this pid started earlier
	if err := a.Dir.WriteRecord(rec); err != nil {
		t.Fatal(err)
	}
	if err := a.Stop(ctx, rec, StopOptions{}); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	assertNoRecord(t, a.Dir, "api")
	assertAlive(t, stranger)
	if got := readSignals(t, signals); len(got) != 0 {
		t.Errorf("stranger received %v", got)
	}
}

func TestStopStaleRecordNoSuchProcess(t *testing.T) {
	a, _ := newActuator(t)
	ctx := testCtx(t)
	argv := testserver.Command("-exit-after", "1ms")
	gone := exec.Command(argv[0], argv[1:]...)
	gone.Env = append(os.Environ(), testserver.Env())
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	rec := Record{Version: 1, Name: "api", PID: gone.Process.Pid, PGID: gone.Process.Pid, StartTime: 1, BootID: "b", Cmdline: argv}
	if err := a.Dir.WriteRecord(rec); err != nil {
		t.Fatal(err)
	}
	var sc signalCounter
	sc.install(a)
	if err := a.Stop(ctx, rec, StopOptions{}); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	assertNoRecord(t, a.Dir, "api")
	if got := sc.list(); len(got) != 0 {
		t.Errorf("signals sent: %v", got)
	}
}

// Rule 5: a record without a start time whose process is alive with the
// recorded command line is never signalled; the record stays byte for byte
// and the same error comes back on retry.
func TestStopRecordWithoutStartTime(t *testing.T) {
	variants := []struct {
		name string
		edit func(m map[string]any)
	}{
		{"start time missing", func(m map[string]any) { delete(m, "startTime") }},
		{"start time null", func(m map[string]any) { m["startTime"] = nil }},
		{"start time zero", func(m map[string]any) { m["startTime"] = 0 }},
	}
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			a, _ := newActuator(t)
			ctx := testCtx(t)
			stranger, signals := startStranger(t)
			data := recordBytes(t, recordFor(t, "api", stranger.Process.Pid), v.edit)
			if err := os.WriteFile(a.Dir.RecordPath("api"), data, 0o600); err != nil {
				t.Fatal(err)
			}
			var sc signalCounter
			sc.install(a)
			var first string
			for i := range 2 {
				rec, err := a.Dir.ReadRecord("api")
				if err != nil {
					t.Fatal(err)
				}
				err = a.Stop(ctx, rec, StopOptions{})
				var q *QuarantineError
				if !errors.As(err, &q) || q.Reason != UnverifiedOwner {
					t.Fatalf("Stop #%d = %v, want *QuarantineError UnverifiedOwner", i+1, err)
				}
				if !strings.Contains(q.Hint, "kill -TERM -- -"+itoa(stranger.Process.Pid)) {
					t.Errorf("hint %q lacks the manual stop", q.Hint)
				}
				if i == 0 {
					first = err.Error()
				} else if err.Error() != first {
					t.Errorf("retry error %q differs from %q", err, first)
				}
				if got, _ := os.ReadFile(a.Dir.RecordPath("api")); !bytes.Equal(got, data) {
					t.Errorf("record changed:\n%s\nwant\n%s", got, data)
				}
			}
			assertAlive(t, stranger)
			if got := sc.list(); len(got) != 0 {
				t.Errorf("signals sent: %v", got)
			}
			if got := readSignals(t, signals); len(got) != 0 {
				t.Errorf("stranger received %v", got)
			}
		})
	}
}

// recordBytes renders a record as JSON, edited as a map.
func recordBytes(t *testing.T, rec Record, edit func(map[string]any)) []byte {
	t.Helper()
	b, _ := json.Marshal(rec)
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	edit(m)
	out, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// Rule 5, the other half: without a start time, a record whose process has
// exited, or whose pid runs another command line, is removed.
func TestStopRecordWithoutStartTimeRemoved(t *testing.T) {
	t.Run("exited", func(t *testing.T) {
		a, _ := newActuator(t)
		argv := testserver.Command("-exit-after", "1ms")
		gone := exec.Command(argv[0], argv[1:]...)
		gone.Env = append(os.Environ(), testserver.Env())
		if err := gone.Run(); err != nil {
			t.Fatal(err)
		}
		rec := Record{Version: 1, Name: "api", PID: gone.Process.Pid, PGID: gone.Process.Pid, Cmdline: argv}
		if err := a.Dir.WriteRecord(rec); err != nil {
			t.Fatal(err)
		}
		if err := a.Stop(testCtx(t), rec, StopOptions{}); err != nil {
			t.Fatal(err)
		}
		assertNoRecord(t, a.Dir, "api")
	})
	t.Run("other command line", func(t *testing.T) {
		a, _ := newActuator(t)
		stranger, signals := startStranger(t)
		rec := recordFor(t, "api", stranger.Process.Pid)
		rec.StartTime = 0
		rec.Cmdline = []string{"./bin/api", "--port", "8080"}
		if err := a.Dir.WriteRecord(rec); err != nil {
			t.Fatal(err)
		}
		if err := a.Stop(testCtx(t), rec, StopOptions{}); err != nil {
			t.Fatal(err)
		}
		assertNoRecord(t, a.Dir, "api")
		assertAlive(t, stranger)
		if got := readSignals(t, signals); len(got) != 0 {
			t.Errorf("stranger received %v", got)
		}
	})
}

// Rule 4: start time matches, command line differs.
func TestStopIdentityMismatch(t *testing.T) {
	a, _ := newActuator(t)
	ctx := testCtx(t)
	stranger, signals := startStranger(t)
	rec := recordFor(t, "api", stranger.Process.Pid)
	rec.Cmdline = append(rec.Cmdline, "--altered")
	if err := a.Dir.WriteRecord(rec); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(a.Dir.RecordPath("api"))
	var sc signalCounter
	sc.install(a)
	err := a.Stop(ctx, rec, StopOptions{})
	var q *QuarantineError
	if !errors.As(err, &q) || q.Reason != IdentityMismatch {
		t.Fatalf("Stop = %v, want *QuarantineError IdentityMismatch", err)
	}
	if got, _ := os.ReadFile(a.Dir.RecordPath("api")); !bytes.Equal(got, data) {
		t.Errorf("record changed")
	}
	assertAlive(t, stranger)
	if got := sc.list(); len(got) != 0 {
		t.Errorf("signals sent: %v", got)
	}
	if got := readSignals(t, signals); len(got) != 0 {
		t.Errorf("stranger received %v", got)
	}
}

// Rule 7 through Records: a garbage record, one of another uid and one of
// mode 0666 are moved aside and never used.
func TestUntrustedRecordsNotUsed(t *testing.T) {
	a, _ := newActuator(t)
	stranger, signals := startStranger(t)
	good := recordFor(t, "api", stranger.Process.Pid)
	write := func(name string, mode os.FileMode, data []byte) {
		p := a.Dir.RecordPath(name)
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		chmod(t, p, mode)
	}
	good.Name = "wide"
	wide, _ := json.Marshal(good)
	write("wide", 0o666, wide)
	write("garbage", 0o600, []byte("\x00\x01{{"))
	good.Name = "other"
	other, _ := json.Marshal(good)
	write("other", 0o600, other)
	if os.Geteuid() == 0 {
		if err := os.Chown(a.Dir.RecordPath("other"), 65534, 65534); err != nil {
			t.Fatal(err)
		}
	} else {
		_ = os.Remove(a.Dir.RecordPath("other"))
	}
	recs, errs := a.Dir.Records()
	if len(recs) != 0 {
		t.Errorf("untrusted records were returned: %+v", recs)
	}
	moved := map[string]bool{}
	for _, err := range errs {
		var ue *UntrustedRecordError
		if !errors.As(err, &ue) || ue.MovedTo == "" {
			t.Errorf("error %v, want *UntrustedRecordError moved aside", err)
			continue
		}
		moved[ue.Name] = true
	}
	for _, n := range []string{"wide", "garbage"} {
		if !moved[n] {
			t.Errorf("%s was not moved aside (errors %v)", n, errs)
		}
	}
	if os.Geteuid() == 0 && !moved["other"] {
		t.Errorf("record of another uid was not moved aside")
	}
	assertAlive(t, stranger)
	if got := readSignals(t, signals); len(got) != 0 {
		t.Errorf("stranger received %v", got)
	}
}

// A pinned process that exits between the identity check and the first
// signal gets no signal, and the stop does not wait out the grace period.
func TestStopPinnedProcessExitsBeforeSignal(t *testing.T) {
	a, _ := newActuator(t)
	ctx := testCtx(t)
	stranger, signals := startStranger(t)
	rec := recordFor(t, "api", stranger.Process.Pid)
	v := Verify(rec)
	if v.Verdict != VerdictOwned {
		t.Fatalf("Verify = %v (%s), want Owned", v.Verdict, v.Message)
	}
	defer v.Handle.Close()
	// It exits after the check (SIGKILL from the test, which is its parent
	// and waits for it, so the pid is free for reuse).
	_ = stranger.Process.Kill()
	if err := v.Handle.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	var sc signalCounter
	sc.install(a)
	leader := &member{h: v.Handle, id: v.Identity, evidence: v.Evidence}
	// An hour of grace: returning at all shows no wait was sat out.
	if err := a.terminate(ctx, rec, []*member{leader}, time.Hour, time.Hour, true); err != nil {
		t.Fatal(err)
	}
	if got := sc.list(); len(got) != 0 {
		t.Errorf("signals sent after the pinned process exited: %v", got)
	}
	if got := readSignals(t, signals); len(got) != 0 {
		t.Errorf("recorded %v", got)
	}
}

// The wait after SIGTERM wakes on the exit (pidfd), not at the end of the
// grace period: with an hour of grace and a two-minute test context, Stop
// returning nil shows it woke on the exit.
func TestStopWakesOnExit(t *testing.T) {
	a, _ := newActuator(t)
	ctx := testCtx(t)
	r, err := a.Start(ctx, serverReq("api", 0))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Handle.Close()
	killPinned(t, r.Record.PID)
	if err := a.Stop(ctx, r.Record, StopOptions{Grace: time.Hour, KillTimeout: time.Hour}); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	assertGone(t, r.Handle)
}

func TestStopEscalatesToSIGKILL(t *testing.T) {
	a, ev := newActuator(t)
	ctx := testCtx(t)
	signals := filepath.Join(t.TempDir(), "signals")
	r, err := a.Start(ctx, withReadyFile(t, serverReq("api", 0, "-ignore-term", "-signals", signals)))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Handle.Close()
	killPinned(t, r.Record.PID)
	if err := a.Stop(ctx, r.Record, StopOptions{Grace: 200 * time.Millisecond, KillTimeout: 10 * time.Second}); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	assertGone(t, r.Handle)
	assertNoRecord(t, a.Dir, "api")
	if got := readSignals(t, signals); len(got) != 1 || !strings.HasSuffix(got[0], "SIGTERM") {
		t.Errorf("server recorded %v, want the ignored SIGTERM", got)
	}
	sent := ev.with(EventSignal)
	if len(sent) != 2 || !strings.Contains(sent[0], "SIGTERM") || !strings.Contains(sent[1], "SIGKILL") {
		t.Errorf("signal events %v, want SIGTERM then SIGKILL", sent)
	}
	if st, ok := r.Exit(); !ok || st.Signal != "SIGKILL" {
		t.Errorf("exit %v %v, want killed by SIGKILL", st, ok)
	}
}

// The kernel cannot be made to keep a process alive after SIGKILL on demand
// (a stopped process still dies; D state needs a hung device): this test
// simulates it by swallowing SIGKILL in the signal seam.
func TestStopUnkillable(t *testing.T) {
	forModes(t, func(t *testing.T, mode MembershipMode) {
		a, _ := newActuator(t)
		ctx := testCtx(t)
		r, err := a.Start(ctx, withReadyFile(t, serverReq("api", 0, "-ignore-term")))
		if err != nil {
			t.Fatal(err)
		}
		defer r.Handle.Close()
		killPinned(t, r.Record.PID)
		sc := signalCounter{drop: syscall.SIGKILL}
		sc.install(a)
		err = a.Stop(ctx, r.Record, StopOptions{Grace: 100 * time.Millisecond, KillTimeout: 100 * time.Millisecond})
		var q *QuarantineError
		if !errors.As(err, &q) || q.Reason != Unkillable {
			t.Fatalf("Stop = %v, want *QuarantineError Unkillable", err)
		}
		if !strings.Contains(q.Message, "failed to terminate even after SIGKILL") || q.State != observe.StateSleeping {
			t.Errorf("quarantine %q state %v, want the message and state sleeping", q.Message, q.State)
		}
		if q.PID != r.Record.PID || !strings.Contains(err.Error(), "sleeping") {
			t.Errorf("error %q should name pid %d and its state", err, r.Record.PID)
		}
		if _, err := a.Dir.ReadRecord("api"); err != nil {
			t.Errorf("record of an unkillable server should be kept: %v", err)
		}
		got := sc.list()
		wantKill := "SIGKILL process group " + itoa(r.Record.PID)
		if mode == MembershipCgroup {
			wantKill = "SIGKILL every process of cgroup " + r.Record.Cgroup
		}
		if len(got) != 2 || !strings.HasPrefix(got[0], "SIGTERM") || got[1] != wantKill {
			t.Errorf("signals %v, want SIGTERM and the swallowed %q", got, wantKill)
		}
		// With the real signal path it goes.
		a.signal = nil
		if err := a.Stop(ctx, r.Record, StopOptions{Grace: 100 * time.Millisecond}); err != nil {
			t.Fatal(err)
		}
		assertGone(t, r.Handle)
	})
}

// A grandchild in the server's group dies with it.
func TestStopGrandchildInGroup(t *testing.T) {
	forModes(t, func(t *testing.T, mode MembershipMode) { testStopGrandchild(t, mode, false) })
}

// A grandchild that left the group (setsid) is found by its parent chain at
// the time of the stop, pinned and signalled on its own: it dies too.
func TestStopGrandchildLeftGroup(t *testing.T) {
	forModes(t, func(t *testing.T, mode MembershipMode) { testStopGrandchild(t, mode, true) })
}

func testStopGrandchild(t *testing.T, mode MembershipMode, setsid bool) {
	a, ev := newActuator(t)
	ctx := testCtx(t)
	dir := t.TempDir()
	signals := filepath.Join(dir, "signals")
	gcFile := filepath.Join(dir, "grandchild")
	args := []string{"-signals", signals, "-grandchild", gcFile, "-ready-file", filepath.Join(dir, "ready")}
	if setsid {
		args = append(args, "-grandchild-setsid")
	}
	req := serverReq("api", 0, args...)
	req.Ready = func(context.Context) observe.ProbeResult {
		_, err := os.Stat(filepath.Join(dir, "ready"))
		return observe.ProbeResult{OK: err == nil}
	}
	r, err := a.Start(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Handle.Close()
	killPinned(t, r.Record.PID)
	gcPID, gc := pinnedFromFile(t, gcFile, r.Done())
	gid, err := gc.Identity()
	if err != nil {
		t.Fatal(err)
	}
	if inGroup := gid.PGID == r.Record.PGID; inGroup == setsid {
		t.Fatalf("grandchild pgid %d, server group %d, setsid %v", gid.PGID, r.Record.PGID, setsid)
	}
	if err := a.Stop(ctx, r.Record, StopOptions{}); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	assertGone(t, r.Handle)
	assertGone(t, gc)
	// The grandchild has no handshake of its own: it may die of SIGTERM's
	// default action before its handler is up, so only the server's record
	// of it is asserted; that the grandchild was reached is asserted above
	// (gone) and below (events).
	got := readSignals(t, signals)
	if !slices.Contains(got, itoa(r.Record.PID)+" SIGTERM") {
		t.Errorf("signals %v, want SIGTERM for the server", got)
	}
	for _, line := range got {
		if !strings.HasSuffix(line, " SIGTERM") {
			t.Errorf("signal %q, want SIGTERM only", line)
		}
	}
	sent := ev.with(EventSignal)
	switch {
	case mode == MembershipCgroup:
		// Every member of the cgroup, one by one through its pin.
		all := strings.Join(sent, "\n")
		if len(sent) != 2 || !strings.Contains(all, "to pid "+itoa(gcPID)) || !strings.Contains(all, "in cgroup "+r.Record.Cgroup) {
			t.Errorf("signal events %v, want the server and the grandchild as members of %s", sent, r.Record.Cgroup)
		}
	case setsid:
		if len(sent) != 2 || !strings.Contains(strings.Join(sent, "\n"), "pid "+itoa(gcPID)) {
			t.Errorf("signal events %v, want the group and the escaped grandchild", sent)
		}
	case len(sent) != 1 || !strings.Contains(sent[0], "process group"):
		t.Errorf("signal events %v, want one to the group", sent)
	}
}

// A listener left on the port after the stop (here a plain TCP listener of
// this test, not HTTP) makes Stop fail naming it.
func TestStopPortStillHeld(t *testing.T) {
	a, _ := newActuator(t)
	ctx := testCtx(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			_ = c.Close()
		}
	}()
	port := l.Addr().(*net.TCPAddr).Port
	r, err := a.Start(ctx, serverReq("api", 0))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Handle.Close()
	killPinned(t, r.Record.PID)
	ready := func(ctx context.Context) observe.ProbeResult {
		return observe.ProbeHTTP(ctx, "", port, "/health", time.Second)
	}
	err = a.Stop(ctx, r.Record, StopOptions{Port: port, Ready: ready})
	if err == nil {
		t.Fatal("Stop succeeded with the port still held")
	}
	for _, w := range []string{"port " + itoa(port) + " still accepts", "pid " + itoa(os.Getpid()), "does not answer the readiness probe"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not say %q", err, w)
		}
	}
	assertGone(t, r.Handle)
}

func TestStopRefusesSelf(t *testing.T) {
	a, _ := newActuator(t)
	var sc signalCounter
	sc.install(a)
	for _, rec := range []Record{
		recordFor(t, "self", os.Getpid()),
		{Name: "init", PID: 1, PGID: 1, StartTime: 1, BootID: "b"},
	} {
		err := a.Stop(testCtx(t), rec, StopOptions{})
		var q *QuarantineError
		if !errors.As(err, &q) {
			t.Errorf("Stop(%s) = %v, want a refusal", rec.Name, err)
		}
	}
	if got := sc.list(); len(got) != 0 {
		t.Errorf("signals sent: %v", got)
	}
}

// A failed start whose process exited leaving a grandchild in its group: the
// grandchild is no longer below the server (re-parented when the server
// died), so it is found as a member of the group, pinned and stopped before
// the error is returned.
func TestFailedStartStopsOrphanedGroupMember(t *testing.T) {
	forModes(t, func(t *testing.T, mode MembershipMode) {
		a, ev := newActuator(t)
		ctx := testCtx(t)
		dir := t.TempDir()
		gcFile := filepath.Join(dir, "grandchild")
		port := testserver.FreePort(t)
		// Never listens on the port; exits with code 3 a little later.
		req := serverReq("api", port, "-grandchild", gcFile, "-exit-after", "1500ms", "-exit-code", "3")
		r, err := a.Spawn(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		killPinned(t, r.Record.PID)
		gcPID, gc := pinnedFromFile(t, gcFile, r.Done())
		err = a.WaitReady(ctx, req, r)
		var se *StartError
		if !errors.As(err, &se) || se.ExitCode != 3 || se.Reason != ReasonFailed {
			t.Fatalf("WaitReady = %v, want *StartError Failed, exit code 3", err)
		}
		if !gc.Exited() {
			t.Errorf("orphaned group member %d still alive after the failed start", gcPID)
		}
		want := "found after its leader"
		if mode == MembershipCgroup {
			want = "in cgroup " + r.Record.Cgroup
		}
		found := false
		for _, e := range ev.with(EventSignal) {
			if strings.Contains(e, "pid "+itoa(gcPID)) && strings.Contains(e, want) {
				found = true
			}
		}
		if !found {
			t.Errorf("no signal event for the orphaned group member %d naming %q: %v", gcPID, want, ev.all)
		}
	})
}

// refuseSelf refuses procfleet's own pid, its own process group and init,
// called again and again (its ids are read once), and lets others pass.
func TestRefuseSelf(t *testing.T) {
	self, mine := os.Getpid(), syscall.Getpgrp()
	for range 3 {
		for _, rec := range []Record{
			{Name: "self", PID: self, PGID: self},
			{Name: "group", PID: self + 1, PGID: mine},
			{Name: "init", PID: 1, PGID: 1},
			{Name: "init group", PID: self + 1, PGID: 1},
		} {
			if q := refuseSelf(rec); q == nil || q.Reason != UnverifiedOwner {
				t.Errorf("refuseSelf(%s pid %d pgid %d) = %v, want UnverifiedOwner", rec.Name, rec.PID, rec.PGID, q)
			}
		}
		if q := refuseSelf(Record{Name: "other", PID: self + 1, PGID: self + 1}); q != nil && mine != self+1 {
			t.Errorf("refuseSelf of another group = %v", q)
		}
	}
}
