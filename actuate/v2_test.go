package actuate

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/procfleet/procfleet/internal/safefile"
	"github.com/procfleet/procfleet/internal/testserver"
	"github.com/procfleet/procfleet/observe"
)

// carriers lists the live processes whose environment carries token.
func carriers(t testing.TB, token string) []int {
	t.Helper()
	es, err := observe.ScanProcesses(observe.ScanOptions{EnvKey: InstanceEnv})
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, e := range es {
		if e.EnvFound && e.Env == token {
			out = append(out, e.PID)
		}
	}
	return out
}

// assertNothingLeft fails unless nothing of the server of rec is left: no
// live process carries its token, its cgroup is gone, and its port is free.
func assertNothingLeft(t *testing.T, rec Record) {
	t.Helper()
	if pids := carriers(t, rec.Instance); len(pids) > 0 {
		for _, pid := range pids {
			id, _ := observe.ReadIdentity(pid)
			t.Errorf("pid %d (%s) still carries the instance token of %s", pid, observe.FormatCmdline(id.Cmdline), rec.Name)
		}
	}
	if rec.Cgroup != "" {
		dir, err := cgroupDir(rec.Cgroup)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
			pids, _ := observe.CgroupProcs(dir)
			t.Errorf("cgroup %s is still there (%v), holding %v", rec.Cgroup, err, pids)
		}
	}
	if rec.Port > 0 && !testserver.PortFree(rec.Port) {
		t.Errorf("port %d is still held by %s", rec.Port, observe.HolderOf(context.Background(), rec.Port))
	}
}

// killCarriersAtCleanup kills, at the end of the test, whatever still
// carries token (each through a pin), so that a failing test leaves
// nothing running.
func killCarriersAtCleanup(t testing.TB, token string) {
	t.Helper()
	t.Cleanup(func() {
		for _, pid := range carriers(t, token) {
			if h, err := observe.Pin(pid); err == nil {
				if v, ok, err := h.Env(InstanceEnv); err == nil && ok && v == token {
					_ = h.Signal(syscall.SIGKILL)
				}
				_ = h.Close()
			}
		}
	})
}

// fresh is an Actuator on the same state folder with no memory of a's
// children: another procfleet process (a later apply or down).
func fresh(t *testing.T, a *Actuator) (*Actuator, *events) {
	t.Helper()
	ev := &events{}
	return &Actuator{Dir: a.Dir, Log: a.Log, Events: ev}, ev
}

// A server that execs another program after it started (a shim, a wrapper
// ending in exec) is still stopped by a later procfleet that did not hold
// it: its pidfd inode proves it, or, on kernels without pidfs (simulated by
// a record without the inode), its instance token or cgroup.
func TestStopServerThatExecd(t *testing.T) {
	forModes(t, func(t *testing.T, mode MembershipMode) {
		for _, withInode := range []bool{true, false} {
			a, _ := newActuator(t)
			ctx := testCtx(t)
			port := testserver.FreePort(t)
			dir := t.TempDir()
			ready := filepath.Join(dir, "ready")
			goAhead := filepath.Join(dir, "go")
			// A wrapper script that ends in exec: it waits for the test's
			// go-ahead (so the record surely shows the script), then
			// becomes the test server.
			script := `while [ ! -e "$1" ]; do sleep 0.01; done; exec "$0" -port "$2" -ready-file "$3"`
			req := serverReq("api", port)
			req.Argv = []string{"sh", "-c", script, testserver.Command()[0], goAhead, itoa(port), ready}
			r, err := a.Spawn(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			killCarriersAtCleanup(t, r.Record.Instance)
			defer r.Handle.Close()
			if err := os.WriteFile(goAhead, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := a.WaitReady(ctx, req, r); err != nil {
				t.Fatal(err)
			}
			waitForFile(t, ready, r.Done())
			id, err := r.Handle.Identity()
			if err != nil || slices.Equal(id.Cmdline, r.Record.Cmdline) {
				t.Fatalf("command line after the exec = %q (%v), record says %q: want another", id.Cmdline, err, r.Record.Cmdline)
			}
			rec, err := a.Dir.ReadRecord("api")
			if err != nil {
				t.Fatal(err)
			}
			if !withInode {
				rec.PidfdInode = 0
			}
			b, ev := fresh(t, a)
			v := Verify(rec)
			if v.Handle != nil {
				_ = v.Handle.Close()
			}
			want := "pidfd inode"
			if !withInode {
				want = "instance token"
			}
			if v.Verdict != VerdictOwned || !strings.Contains(v.Evidence, want) {
				t.Fatalf("Verify after the exec (inode in record %v) = %v %q, evidence %q; want Owned by %s", withInode, v.Verdict, v.Message, v.Evidence, want)
			}
			if err := b.Stop(ctx, rec, StopOptions{}); err != nil {
				t.Fatalf("Stop after the exec: %v", err)
			}
			assertGone(t, r.Handle)
			assertNoRecord(t, a.Dir, "api")
			assertNothingLeft(t, r.Record)
			if len(ev.with(EventSignal)) == 0 {
				t.Error("no signal event")
			}
		}
	})
}

// A shim chain as pyenv, asdf and nvm install them (a script that execs
// /usr/bin/env, which execs the server) is started, its record followed as
// its command line changes (RefreshCmdline), and stopped with nothing left.
func TestShimChainStartedAndStopped(t *testing.T) {
	forModes(t, func(t *testing.T, mode MembershipMode) {
		a, ev := newActuator(t)
		ctx := testCtx(t)
		port := testserver.FreePort(t)
		dir := t.TempDir()
		shim := filepath.Join(dir, "python3")
		self := testserver.Command()[0]
		// The shim waits for the test's go-ahead (so that the spawn's
		// record surely shows the shim, not what it execs), then execs.
		goAhead := filepath.Join(dir, "go")
		script := "#!/bin/sh\n# a pyenv-style shim\nwhile [ ! -e \"" + goAhead + "\" ]; do sleep 0.01; done\nexec /usr/bin/env \"" + self + "\" \"$@\"\n"
		if err := os.WriteFile(shim, []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
		req := withReadyFile(t, StartRequest{Name: "api", Argv: []string{shim, "-port", itoa(port)}, Env: []string{testserver.Env()},
			Port: port, StartupTimeout: time.Minute, ReadyPeriod: 10 * time.Millisecond})
		r, err := a.Spawn(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		killCarriersAtCleanup(t, r.Record.Instance)
		defer r.Handle.Close()
		if !slices.Contains(r.Record.Cmdline, shim) {
			t.Fatalf("record at spawn %q, want the shim's command line", r.Record.Cmdline)
		}
		if err := os.WriteFile(goAhead, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := a.WaitReady(ctx, req, r); err != nil {
			t.Fatal(err)
		}
		rec, changed, err := a.RefreshCmdline(r.Record, r.Handle)
		if err != nil {
			t.Fatal(err)
		}
		if !changed || rec.Cmdline[0] != self || !slices.Equal(rec.SpawnCmdline, r.Record.SpawnCmdline) {
			t.Errorf("after the shims: changed %v, cmdline %q, spawnCmdline %q (was %q)", changed, rec.Cmdline, rec.SpawnCmdline, r.Record.SpawnCmdline)
		}
		if got := ev.with(EventCommandLineChanged); len(got) != 1 || !strings.Contains(got[0], self) {
			t.Errorf("CommandLineChanged events %v, want one naming %s", got, self)
		}
		if onDisk, err := a.Dir.ReadRecord("api"); err != nil || !slices.Equal(onDisk.Cmdline, rec.Cmdline) {
			t.Errorf("record on disk %q, %v; want the new command line", onDisk.Cmdline, err)
		}
		// A later procfleet proves it by the recorded command line now.
		b, _ := fresh(t, a)
		if err := b.Stop(ctx, rec, StopOptions{}); err != nil {
			t.Fatalf("Stop: %v", err)
		}
		assertGone(t, r.Handle)
		assertNothingLeft(t, rec)
	})
}

// A server that rewrites its own argument area (as nginx, postgres and
// redis do) and wipes its environment: held, it is followed and stopped;
// not held, without a pidfd inode, the cgroup proves it, and in the
// session mode it is quarantined (nothing proves it) but a held stop
// still works.
func TestRetitledServer(t *testing.T) {
	forModes(t, func(t *testing.T, mode MembershipMode) {
		a, ev := newActuator(t)
		ctx := testCtx(t)
		port := testserver.FreePort(t)
		ready := filepath.Join(t.TempDir(), "ready")
		req := serverReq("api", port, "-port", itoa(port), "-ready-file", ready, "-retitle", "api: master process", "-retitle-wipe-env")
		r, err := a.Start(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Handle.Close()
		killPinned(t, r.Record.PID)
		waitForFile(t, ready, r.Done())
		waitFor(t, "the retitle", func() bool {
			id, err := r.Handle.Identity()
			return err == nil && len(id.Cmdline) > 0 && id.Cmdline[0] == "api: master process"
		})
		rec, changed, err := a.RefreshCmdline(r.Record, r.Handle)
		if err != nil || !changed {
			t.Fatalf("RefreshCmdline = %v, %v", changed, err)
		}
		got := ev.with(EventCommandLineChanged)
		if len(got) != 1 || !strings.Contains(got[0], `now runs ["api: master process"]`) || strings.Contains(got[0], `"" ""`) {
			t.Errorf("CommandLineChanged %v, want the title without its padding", got)
		}
		if _, found, _ := r.Handle.Env(InstanceEnv); found {
			t.Fatal("the environment still shows the token after the wipe")
		}
		noInode := rec
		noInode.PidfdInode = 0
		noInode.Cmdline = []string{"something else"}
		v := Verify(noInode)
		if v.Handle != nil {
			_ = v.Handle.Close()
		}
		if mode == MembershipCgroup {
			if v.Verdict != VerdictOwned || !strings.Contains(v.Evidence, "member of cgroup") {
				t.Errorf("Verify = %v %q; want Owned by its cgroup", v.Verdict, v.Message)
			}
		} else if v.Verdict != VerdictQuarantine || v.Reason != IdentityMismatch {
			t.Errorf("Verify = %v %q; want IdentityMismatch (nothing readable proves it)", v.Verdict, v.Message)
		}
		// Held, it is stopped whatever it shows.
		if err := a.Stop(ctx, noInode, StopOptions{Held: r.Handle}); err != nil {
			t.Fatalf("held Stop: %v", err)
		}
		assertGone(t, r.Handle)
		assertNothingLeft(t, rec)
		for _, e := range ev.with(EventSignal) {
			if !strings.Contains(e, "held") && !strings.Contains(e, "cgroup") {
				t.Errorf("signal event %q does not name the held pin as its evidence", e)
			}
		}
	})
}

// A tampered pgid (a record pointing at a stranger's process group) makes
// the record untrusted (rule 7): it is moved aside, stays an
// UntrustedRecord quarantine on disk, and the stranger's group is never
// signalled.
func TestTamperedPGIDUntrusted(t *testing.T) {
	a, _ := newActuator(t)
	ctx := testCtx(t)
	r, err := a.Start(ctx, serverReq("api", 0, "-exit-after", "1h"))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Handle.Close()
	killPinned(t, r.Record.PID)
	gcFile := filepath.Join(t.TempDir(), "gc")
	stranger, signals := startStranger(t, "-grandchild", gcFile)
	pinnedFromFile(t, gcFile, nil) // the stranger's group member outlives the stranger's kill
	bad := r.Record
	bad.PGID = stranger.Process.Pid
	if err := a.Dir.WriteRecord(bad); err != nil {
		t.Fatal(err)
	}
	_, err = a.Dir.ReadRecord("api")
	var ue *UntrustedRecordError
	if !errors.As(err, &ue) || !strings.Contains(ue.Reason, "pgid") || ue.MovedTo == "" {
		t.Fatalf("ReadRecord(tampered pgid) = %v, want *UntrustedRecordError moved aside", err)
	}
	qs, err := a.Dir.UntrustedQuarantines()
	if err != nil || len(qs) != 1 || qs[0].Name != "api" || qs[0].PID != r.Record.PID || qs[0].Instance != r.Record.Instance {
		t.Fatalf("UntrustedQuarantines = %+v, %v; want api naming pid %d and its token", qs, err, r.Record.PID)
	}
	// While the server it named runs, the quarantine stands.
	b, ev := fresh(t, a)
	why, lift := b.CheckUntrusted(ctx, qs[0], r.Record.SpawnCmdline, 0)
	if lift || !strings.Contains(why, "may still run") {
		t.Errorf("CheckUntrusted = %q, %v; want kept while pid %d runs", why, lift, r.Record.PID)
	}
	if err := b.ResolveUntrusted(qs[0], "test"); err != nil {
		t.Fatal(err)
	}
	if qs, _ := a.Dir.UntrustedQuarantines(); len(qs) != 0 {
		t.Errorf("after ResolveUntrusted: %+v", qs)
	}
	if got := ev.with(EventQuarantineLifted); len(got) != 1 {
		t.Errorf("QuarantineLifted events %v", got)
	}
	assertAlive(t, stranger)
	if got := readSignals(t, signals); len(got) != 0 {
		t.Errorf("the stranger's group was signalled: %v", got)
	}
}

// A crash between the intent record and the full one (the spawner stops
// in the test-only hook between the two writes and is killed -9 there):
// the next procfleet finds the server by its token (or cgroup), adopts it,
// and stops it with nothing left.
func TestCrashBetweenIntentAndRecord(t *testing.T) {
	forModes(t, func(t *testing.T, mode MembershipMode) {
		a, ev := newActuator(t)
		ctx := testCtx(t)
		port := testserver.FreePort(t)
		pause := filepath.Join(t.TempDir(), "paused")
		// The crash: the spawner is killed -9 in the window.
		pid, h := killSpawnerPaused(t, spawnerRequest{Dir: a.Dir.Path, Name: "api", Port: port, PauseFile: pause,
			Argv: testserver.Command("-port", itoa(port)), Env: []string{testserver.Env()}})
		rec, err := a.Dir.ReadRecord("api")
		if err != nil {
			t.Fatal(err)
		}
		if !rec.Intent() {
			t.Fatalf("record after the crash = %+v, want the intent record", rec)
		}
		killCarriersAtCleanup(t, rec.Instance)
		if v := Verify(rec); v.Verdict != VerdictQuarantine || v.Handle != nil {
			t.Errorf("Verify(intent) = %v, want a quarantine that pins nothing", v.Verdict)
		}
		res, err := a.ResolveIntent(ctx, rec, StopOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !res.Adopted || res.Record.PID != pid || res.Verification.Handle == nil {
			t.Fatalf("ResolveIntent = %+v, want pid %d adopted", res, pid)
		}
		defer res.Verification.Handle.Close()
		onDisk, err := a.Dir.ReadRecord("api")
		if err != nil || onDisk.PID != pid || onDisk.Instance != rec.Instance || onDisk.Cgroup != rec.Cgroup {
			t.Errorf("record after adoption = %+v, %v", onDisk, err)
		}
		if got := ev.with(EventAdopted); len(got) != 1 {
			t.Errorf("Adopted events %v", got)
		}
		// Rule 2 holds for it now, from a procfleet that never held it.
		if v := Verify(onDisk); v.Verdict != VerdictOwned {
			t.Errorf("Verify(adopted record) = %v %q", v.Verdict, v.Message)
		} else {
			_ = v.Handle.Close()
		}
		if err := a.Stop(ctx, onDisk, StopOptions{}); err != nil {
			t.Fatal(err)
		}
		assertGone(t, h)
		assertNothingLeft(t, onDisk)

		// An intent record with nothing carrying its token is removed.
		lone := Record{Version: RecordVersion, Name: "lone", Instance: newToken()}
		if err := a.Dir.WriteRecord(lone); err != nil {
			t.Fatal(err)
		}
		if err := a.Stop(ctx, lone, StopOptions{}); err != nil {
			t.Fatal(err)
		}
		assertNoRecord(t, a.Dir, "lone")
	})
}

// A copied state folder (cp -a of a project): its records name the
// original folder, so they are foreign there: moved aside, reported, and
// the original's server is never touched.
func TestCopiedStateFolderForeign(t *testing.T) {
	a, _ := newActuator(t)
	ctx := testCtx(t)
	signals := filepath.Join(t.TempDir(), "signals")
	r, err := a.Start(ctx, withReadyFile(t, serverReq("api", 0, "-signals", signals)))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Handle.Close()
	killPinned(t, r.Record.PID)
	copyDir := filepath.Join(t.TempDir(), ".procfleet")
	if out, err := exec.Command("cp", "-a", a.Dir.Path, copyDir).CombinedOutput(); err != nil {
		t.Fatalf("cp -a: %v: %s", err, out)
	}
	c, err := OpenStateDir(copyDir)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// A reader without the lock reports it and changes nothing.
	_, err = c.InspectRecord("api")
	var fe *ForeignRecordError
	if !errors.As(err, &fe) || fe.MovedTo != "" || !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("InspectRecord(copied record) = %v, want *ForeignRecordError, not moved, counting as no record", err)
	}
	set := c.ReadAll()
	if len(set.Records) != 0 || len(set.Errs) != 0 || len(set.Foreign) != 1 || !strings.HasPrefix(set.Foreign[0].MovedTo, c.RecordPath("api")+".foreign-") {
		t.Fatalf("ReadAll of the copy = %+v, want one foreign record moved aside", set)
	}
	if recs, errs := c.Records(); len(recs) != 0 || len(errs) != 0 {
		t.Errorf("Records of the copy = %v, %v; want none", recs, errs)
	}
	if qs, _ := c.UntrustedQuarantines(); len(qs) != 0 {
		t.Errorf("a foreign record quarantines nothing: %+v", qs)
	}
	// The original is untouched.
	if _, err := a.Dir.ReadRecord("api"); err != nil {
		t.Errorf("original record: %v", err)
	}
	if r.Handle.Exited() || len(readSignals(t, signals)) != 0 {
		t.Errorf("the original's server was touched (exited %v, signals %v)", r.Handle.Exited(), readSignals(t, signals))
	}
	if err := a.Stop(ctx, r.Record, StopOptions{}); err != nil {
		t.Fatal(err)
	}
}

// A FIFO or a symlink at the log path does not hang or redirect a start:
// it is moved aside and a fresh log made; a FIFO at the lock path is
// refused without a hang.
func TestStateFolderFilesNotRegular(t *testing.T) {
	for _, kind := range []string{"fifo", "symlink"} {
		t.Run(kind, func(t *testing.T) {
			a, ev := newActuator(t)
			ctx := testCtx(t)
			logPath := a.Dir.LogPath("api")
			outside := filepath.Join(t.TempDir(), "outside")
			if err := os.WriteFile(outside, []byte("keep\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			if kind == "fifo" {
				if err := syscall.Mkfifo(logPath, 0o600); err != nil {
					t.Fatal(err)
				}
			} else if err := os.Symlink(outside, logPath); err != nil {
				t.Fatal(err)
			}
			r, err := a.Start(ctx, serverReq("api", 0, "-print", "fresh log", "-exit-after", "1h"))
			if err != nil {
				t.Fatalf("Start with %s at the log path: %v", kind, err)
			}
			defer r.Handle.Close()
			killPinned(t, r.Record.PID)
			fi, err := os.Lstat(logPath)
			if err != nil || !fi.Mode().IsRegular() {
				t.Errorf("log path after the start: %v, %v; want a regular file", fi, err)
			}
			if got := ev.with(EventLogReplaced); len(got) != 1 || !strings.Contains(got[0], ".corrupt-") {
				t.Errorf("LogReplaced events %v", got)
			}
			if b, _ := os.ReadFile(outside); string(b) != "keep\n" {
				t.Errorf("the symlink's target was written: %q", b)
			}
			if err := a.Stop(ctx, r.Record, StopOptions{}); err != nil {
				t.Fatal(err)
			}
			// The events file, which the reconciler writes through the same
			// helper.
			events := a.Dir.EventsPath("api")
			if kind == "fifo" {
				if err := syscall.Mkfifo(events, 0o600); err != nil {
					t.Fatal(err)
				}
			} else if err := os.Symlink(outside, events); err != nil {
				t.Fatal(err)
			}
			f, moved, err := safefile.OpenAppend(events, 0o600)
			if err != nil || !strings.HasPrefix(moved, events+".corrupt-") {
				t.Fatalf("OpenAppend(events path holding a %s) = %q, %v", kind, moved, err)
			}
			_ = f.Close()
		})
	}
	d := newStateDir(t)
	if err := syscall.Mkfifo(d.LockPath(), 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		release, err := d.Lock()
		if err == nil {
			_ = release()
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "FIFO") {
			t.Errorf("Lock with a FIFO at the lock path = %v, want a refusal naming it", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Lock hung on a FIFO")
	}
}

// StateDir.Check notices the folder deleted, or replaced by another one at
// the same path.
func TestStateDirReplacedDetected(t *testing.T) {
	d := newStateDir(t)
	if err := d.Check(); err != nil {
		t.Fatalf("Check of a fresh folder: %v", err)
	}
	if err := os.RemoveAll(d.Path); err != nil {
		t.Fatal(err)
	}
	var ce *StateDirChangedError
	if err := d.Check(); !errors.As(err, &ce) || !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Check after rm -rf = %v, want *StateDirChangedError wrapping fs.ErrNotExist", err)
	}
	if d2, err := OpenStateDir(d.Path); err != nil {
		t.Fatal(err)
	} else {
		defer d2.Close()
	}
	if err := d.Check(); !errors.As(err, &ce) || ce.Now == ce.Was || !strings.Contains(err.Error(), "replaced") {
		t.Errorf("Check after the folder was made again = %v, want *StateDirChangedError naming both", err)
	}
	if err := (&StateDir{Path: d.Path}).Check(); err == nil {
		t.Error("Check of a StateDir that was never opened succeeded")
	}
}

// The membership mode is named, and PROCFLEET_CGROUP=off forces the
// session mode; a record tells its own mode.
func TestMembershipNamed(t *testing.T) {
	d := newStateDir(t)
	t.Setenv(CgroupEnv, "off")
	m := d.Membership()
	if m.Mode != MembershipSession || !strings.Contains(m.String(), CgroupEnv+"=off") {
		t.Errorf("Membership with %s=off = %v", CgroupEnv, m)
	}
	t.Setenv(CgroupEnv, "")
	m = d.Membership()
	if m.Mode == MembershipCgroup && !strings.Contains(m.String(), cgroupPrefix+d.ID()) {
		t.Errorf("Membership = %v, want the folder cgroup named", m)
	}
	if MembershipOf(Record{Cgroup: "/procfleet-1-2/api"}) != MembershipCgroup || MembershipOf(Record{}) != MembershipSession {
		t.Error("MembershipOf does not follow the record")
	}
}

// An intent record whose instance lost its leader (killed before anything
// adopted it) but left a process carrying its token: ResolveIntent stops
// that leftover and removes the intent record.
func TestResolveIntentLeftoversWithoutLeader(t *testing.T) {
	forModes(t, func(t *testing.T, mode MembershipMode) {
		a, _ := newActuator(t)
		ctx := testCtx(t)
		gcFile := filepath.Join(t.TempDir(), "child")
		r, err := a.Start(ctx, serverReq("api", 0, "-grandchild", gcFile, "-exit-after", "1h"))
		if err != nil {
			t.Fatal(err)
		}
		defer r.Handle.Close()
		killCarriersAtCleanup(t, r.Record.Instance)
		gcPID, gc := pinnedFromFile(t, gcFile, r.Done())
		// The record as a crash before the full write would have left it.
		intent := Record{Version: RecordVersion, Name: "api", Instance: r.Record.Instance, Cgroup: r.Record.Cgroup, StateDir: r.Record.StateDir}
		if err := a.Dir.WriteRecord(intent); err != nil {
			t.Fatal(err)
		}
		if err := r.Handle.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		<-r.Done()
		b, bev := fresh(t, a)
		res, err := b.ResolveIntent(ctx, intent, StopOptions{Grace: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if res.Adopted || !slices.Contains(res.Stopped, gcPID) {
			t.Errorf("ResolveIntent = %+v, want pid %d stopped, nothing adopted", res, gcPID)
		}
		assertGone(t, gc)
		assertNoRecord(t, a.Dir, "api")
		assertNothingLeft(t, intent)
		if len(bev.with(EventSignal)) == 0 || len(bev.with(EventRecordRemoved)) != 1 {
			t.Errorf("events %v", bev.all)
		}
	})
}

// The exit message carries the out-of-memory hint only with the kernel's
// evidence.
func TestExitMessage(t *testing.T) {
	kill := ExitStatus{Code: -1, Signal: "SIGKILL"}
	rec := Record{Name: "api", PID: 1 << 22, StartTime: 1}
	if got := ExitMessage(rec, kill); got != "killed by signal 9 (SIGKILL)" {
		t.Errorf("ExitMessage without evidence = %q", got)
	}
	kill.OOM = "memory.events of cgroup /procfleet-1-2/api counts oom_kill 1"
	if got := ExitMessage(rec, kill); got != "killed by signal 9 (SIGKILL) by the out-of-memory killer ("+kill.OOM+")" {
		t.Errorf("ExitMessage with evidence = %q", got)
	}
	if got := ExitMessage(rec, ExitStatus{Code: 3}); got != "exited with code 3" {
		t.Errorf("ExitMessage of an exit = %q", got)
	}
	if ev, ok := OOMEvidence(rec); ok {
		t.Errorf("OOMEvidence for a pid the kernel never killed = %q", ev)
	}
}
