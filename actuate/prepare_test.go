package actuate

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/procfleet/procfleet/internal/testserver"
)

// tempFiles lists the temp files in d's servers folder.
func tempFiles(t *testing.T, d *StateDir) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(d.Path, serversDir))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if strings.Contains(e.Name(), tempInfix) {
			out = append(out, e.Name())
		}
	}
	return out
}

// preparedToken waits until the prepared intent of name is on disk and
// returns its token ("" when none is prepared).
func preparedToken(a *Actuator, name string) string {
	a.mu.Lock()
	p := a.prepared[name]
	a.mu.Unlock()
	if p == nil {
		return ""
	}
	<-p.staged.done
	return p.rec.Instance
}

// crashAndClear SIGKILLs a spawned server, waits for its reaping and
// removes its record, as the reconciler's handling of an exit does.
func crashAndClear(t *testing.T, a *Actuator, r *Running) {
	t.Helper()
	if err := killPinned(t, r.Record.PID).Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if !waitDone(testCtx(t), r.Done(), 10*time.Second) {
		t.Fatal("the killed server was not reaped")
	}
	if err := a.Dir.RemoveRecord(r.Record.Name); err != nil {
		t.Fatal(err)
	}
}

// startAPI starts server "api" (spec hash h1) on a free port, killed at
// the end of the test, and returns its request and what started.
func startAPI(t *testing.T, a *Actuator) (StartRequest, *Running) {
	t.Helper()
	port := testserver.FreePort(t)
	req := serverReq("api", port, "-port", itoa(port))
	req.SpecHash = "h1"
	r, err := a.Start(testCtx(t), req)
	if err != nil {
		t.Fatal(err)
	}
	stopIfStarted(t, r)
	return req, r
}

// restartWithToken starts req again, killed at the end of the test, and
// checks that the new instance carries token, the prepared one.
func restartWithToken(t *testing.T, ctx context.Context, a *Actuator, req StartRequest, token string) *Running {
	t.Helper()
	r, err := a.Start(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	stopIfStarted(t, r)
	if r.Record.Instance != token {
		t.Errorf("restart's instance %q, want the prepared %q", r.Record.Instance, token)
	}
	return r
}

// TestSpawnUsesPreparedIntent: a restart's intent record is the one
// prepared while the server ran (its token and its file, renamed), in
// both membership modes; the full record has a start time; nothing of the
// preparation is left on disk.
func TestSpawnUsesPreparedIntent(t *testing.T) {
	forModes(t, func(t *testing.T, mode MembershipMode) {
		a, _ := newActuator(t)
		t.Cleanup(func() { removeTestCgroups(t, a.Dir) })
		ctx := testCtx(t)
		req, r := startAPI(t, a)
		a.PrepareNext(req)
		token := preparedToken(a, "api")
		if !validToken(token) || token == r.Record.Instance {
			t.Fatalf("prepared token %q (running instance %q): want a fresh valid one", token, r.Record.Instance)
		}
		if got := tempFiles(t, a.Dir); len(got) != 1 || !strings.Contains(got[0], preparedInfix) {
			t.Fatalf("temp files while prepared: %q, want one %s file", got, preparedInfix)
		}
		// Prepared files are never read as records.
		if recs, _ := a.Dir.Records(); len(recs) != 1 || recs[0].Name != "api" {
			t.Errorf("records while prepared: %+v, want api's only", recs)
		}

		crashAndClear(t, a, r)
		r2 := restartWithToken(t, ctx, a, req, token)
		h := killPinned(t, r2.Record.PID)
		if v, ok, err := h.Env(InstanceEnv); err != nil || !ok || v != token {
			t.Errorf("%s of the restarted server = %q, %v, %v; want %s", InstanceEnv, v, ok, err, token)
		}
		if r2.Record.StartedAt.IsZero() {
			t.Error("the full record of a prepared spawn has no start time")
		}
		onDisk, err := a.Dir.ReadRecord("api")
		if err != nil || onDisk.Instance != token || onDisk.PID != r2.Record.PID || onDisk.StartedAt.IsZero() {
			t.Errorf("record on disk %+v, %v; want pid %d, instance %s, a start time", onDisk, err, r2.Record.PID, token)
		}
		if got := tempFiles(t, a.Dir); len(got) != 0 {
			t.Errorf("temp files after the restart: %q", got)
		}
	})
}

// TestPreparedIntentNotUsed: a prepared intent that no longer matches the
// request (another spec hash) is removed and a fresh token drawn; one
// removed under it (swept) is written afresh with its token; DropPrepared
// removes it; PrepareNext twice keeps only the second.
func TestPreparedIntentNotUsed(t *testing.T) {
	sessionMode(t)
	a, _ := newActuator(t)
	ctx := testCtx(t)
	port := testserver.FreePort(t)
	req := serverReq("api", port, "-port", itoa(port))
	req.SpecHash = "h1"

	a.PrepareNext(req)
	first := preparedToken(a, "api")
	a.PrepareNext(req)
	second := preparedToken(a, "api")
	if first == second || len(tempFiles(t, a.Dir)) != 1 {
		t.Fatalf("prepared twice: tokens %q, %q, temp files %q; want two tokens, one file", first, second, tempFiles(t, a.Dir))
	}

	changed := req
	changed.SpecHash = "h2"
	r, err := a.Start(ctx, changed)
	if err != nil {
		t.Fatal(err)
	}
	stopIfStarted(t, r)
	if r.Record.Instance == second || r.Record.SpecHash != "h2" {
		t.Errorf("spawn after a spec change: instance %q hash %q; want a fresh token and h2", r.Record.Instance, r.Record.SpecHash)
	}
	if got := tempFiles(t, a.Dir); len(got) != 0 {
		t.Errorf("temp files after a spawn that did not use the prepared one: %q", got)
	}

	a.PrepareNext(changed)
	token := preparedToken(a, "api")
	for _, f := range tempFiles(t, a.Dir) {
		if err := os.Remove(filepath.Join(a.Dir.Path, serversDir, f)); err != nil {
			t.Fatal(err)
		}
	}
	crashAndClear(t, a, r)
	r2, err := a.Start(ctx, changed)
	if err != nil {
		t.Fatalf("spawn whose prepared file was swept: %v", err)
	}
	stopIfStarted(t, r2)
	if r2.Record.Instance != token {
		t.Errorf("spawn whose prepared file was swept: instance %q, want the prepared token %q", r2.Record.Instance, token)
	}

	a.PrepareNext(changed)
	_ = preparedToken(a, "api")
	a.DropPrepared("api")
	if got := tempFiles(t, a.Dir); len(got) != 0 {
		t.Errorf("temp files after DropPrepared: %q", got)
	}
	if preparedToken(a, "api") != "" {
		t.Error("still prepared after DropPrepared")
	}

	// DropAllPrepared, whether or not the preparer has written them yet.
	for _, name := range []string{"api", "db", "web"} {
		a.PrepareNext(StartRequest{Name: name, Port: port, SpecHash: "h2"})
	}
	_ = preparedToken(a, "api")
	a.DropAllPrepared()
	if got := tempFiles(t, a.Dir); len(got) != 0 {
		t.Errorf("temp files after DropAllPrepared: %q", got)
	}
}

// TestPrepareRestart: an exit's PrepareRestart writes a fresh intent at
// once, which the restart then uses; one prepared before that still
// matches is kept (its token), one that does not is replaced and removed.
func TestPrepareRestart(t *testing.T) {
	sessionMode(t)
	a, _ := newActuator(t)
	ctx := testCtx(t)
	req, r := startAPI(t, a)

	crashAndClear(t, a, r)
	a.PrepareRestart(req)
	token := preparedToken(a, "api")
	if !validToken(token) || token == r.Record.Instance {
		t.Fatalf("prepared token %q (exited instance %q): want a fresh valid one", token, r.Record.Instance)
	}
	a.PrepareRestart(req)
	if again := preparedToken(a, "api"); again != token {
		t.Errorf("PrepareRestart over a matching prepared intent: token %q, want %q kept", again, token)
	}
	restartWithToken(t, ctx, a, req, token)
	if got := tempFiles(t, a.Dir); len(got) != 0 {
		t.Errorf("temp files after the restart: %q", got)
	}

	a.PrepareNext(req)
	next := preparedToken(a, "api")
	changed := req
	changed.SpecHash = "h2"
	a.PrepareRestart(changed)
	fresh := preparedToken(a, "api")
	if fresh == next || !validToken(fresh) {
		t.Errorf("PrepareRestart over an intent of another spec: token %q (before %q), want a fresh one", fresh, next)
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(tempFiles(t, a.Dir)) != 1 { // the replaced one is removed off the caller's way
		if time.Now().After(deadline) {
			t.Fatalf("temp files after the replacement: %q, want one", tempFiles(t, a.Dir))
		}
		time.Sleep(5 * time.Millisecond)
	}
	a.DropAllPrepared()
	if got := tempFiles(t, a.Dir); len(got) != 0 {
		t.Errorf("temp files after DropAllPrepared: %q", got)
	}
}

// TestLockSweepsPrepared: a new holder of the lock removes what an earlier
// holder prepared, whatever its age, and leaves a young plain temp file
// (a writer may still be at it) alone.
func TestLockSweepsPrepared(t *testing.T) {
	a, _ := newActuator(t)
	a.PrepareNext(StartRequest{Name: "api", Port: 1, SpecHash: "h"})
	_ = preparedToken(a, "api")
	plain, err := a.Dir.writeTemp("db.json", tempInfix, []byte("{}"))
	if err != nil {
		t.Fatal(err)
	}
	release, err := a.Dir.Lock()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = release() })
	got := tempFiles(t, a.Dir)
	if len(got) != 1 || got[0] != filepath.Base(plain) {
		t.Errorf("temp files after Lock: %q, want only %s", got, filepath.Base(plain))
	}
}

// TestCrashAfterPreparedIntent: procfleet killed -9 between a prepared
// intent's rename and the full record leaves an intent record without a
// start time; the next procfleet adopts the server by its token, and the
// full record it writes has the adoption's start time, never the zero one.
func TestCrashAfterPreparedIntent(t *testing.T) {
	sessionMode(t)
	a, _ := newActuator(t)
	ctx := testCtx(t)
	port := testserver.FreePort(t)
	pause := filepath.Join(t.TempDir(), "paused")
	pid, h := killSpawnerPaused(t, spawnerRequest{Dir: a.Dir.Path, Name: "api", Port: port, PauseFile: pause, Prepared: true,
		Argv: testserver.Command("-port", itoa(port)), Env: []string{testserver.Env()}})
	rec, err := a.Dir.ReadRecord("api")
	if err != nil {
		t.Fatal(err)
	}
	if !rec.Intent() || !rec.StartedAt.IsZero() {
		t.Fatalf("record after the crash = %+v, want a prepared intent record (no start time)", rec)
	}
	killCarriersAtCleanup(t, rec.Instance)
	before := time.Now().UTC().Truncate(time.Second)
	res, err := a.ResolveIntent(ctx, rec, StopOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Verification.Handle != nil {
		defer res.Verification.Handle.Close()
	}
	if !res.Adopted || res.Record.PID != pid || res.Record.StartedAt.Before(before) {
		t.Errorf("ResolveIntent = adopted %v, record %+v; want pid %d with a start time from %v", res.Adopted, res.Record, pid, before)
	}
	if onDisk, err := a.Dir.ReadRecord("api"); err != nil || onDisk.StartedAt != res.Record.StartedAt {
		t.Errorf("record on disk %+v, %v", onDisk, err)
	}
	if err := a.Stop(ctx, res.Record, StopOptions{Grace: 10 * time.Second}); err != nil {
		t.Fatal(err)
	}
	assertGone(t, h)
}
