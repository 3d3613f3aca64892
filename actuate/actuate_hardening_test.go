//go:build linux

package actuate_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"

	"github.com/procfleet/procfleet/actuate"
	"github.com/procfleet/procfleet/internal/testserver"
	"github.com/procfleet/procfleet/observe"
)

// Hardening tests (issue 8), through the exported API only.

var escapingNames = []string{"../x", "..", "/abs", "/etc/passwd", "a/b", "x/../../y", strings.Repeat("a", 64), "API", "ápi", ""}

func openStateDir(t *testing.T) *actuate.StateDir {
	t.Helper()
	d, err := actuate.OpenStateDir(filepath.Join(t.TempDir(), "state"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d
}

// listTree returns every path under root, for "nothing was written" checks.
func listTree(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	_ = filepath.Walk(root, func(p string, _ os.FileInfo, err error) error {
		if err == nil {
			out = append(out, p)
		}
		return nil
	})
	return out
}

func TestHardeningRecordNamesCannotEscape(t *testing.T) {
	d := openStateDir(t)
	parent := filepath.Dir(d.Path)
	before := listTree(t, parent)
	for _, name := range escapingNames {
		rec := actuate.Record{Version: 1, Name: name, PID: 12345, PGID: 12345, StartTime: 1, BootID: "b", Cmdline: []string{"x"}}
		if err := d.WriteRecord(rec); err == nil {
			t.Errorf("WriteRecord(name %q) succeeded", name)
		}
		if _, err := d.ReadRecord(name); err == nil {
			t.Errorf("ReadRecord(%q) succeeded", name)
		}
		if err := d.RemoveRecord(name); err == nil {
			t.Errorf("RemoveRecord(%q) succeeded", name)
		}
	}
	if after := listTree(t, parent); strings.Join(after, "\n") != strings.Join(before, "\n") {
		t.Errorf("files appeared around the state folder:\nbefore %v\nafter  %v", before, after)
	}
}

// A record file stored under a good name whose name field says "../x" is
// not trusted: moved aside, reported, never used.
func TestHardeningRecordNameFieldEscapeRefused(t *testing.T) {
	d := openStateDir(t)
	path := d.RecordPath("api")
	body := `{"version":1,"name":"../x","pid":1,"pgid":1,"startTime":1,"bootId":"b","uid":0,"cmdline":["x"],"port":0,"specHash":"","startedAt":"2026-11-30T10:00:00Z"}`
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := d.ReadRecord("api")
	var ue *actuate.UntrustedRecordError
	if !errors.As(err, &ue) {
		t.Fatalf("ReadRecord(record naming ../x) = %v, want *UntrustedRecordError", err)
	}
	if ue.MovedTo == "" || filepath.Dir(ue.MovedTo) != filepath.Dir(path) {
		t.Errorf("untrusted record moved to %q, want beside %s", ue.MovedTo, path)
	}
	if _, err := os.Stat(filepath.Join(d.Path, "x.json")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a file named after the record's name field exists: %v", err)
	}
	recs, errs := d.Records()
	if len(recs) != 0 || len(errs) != 0 {
		t.Errorf("Records() after the move = %v, %v; want none", recs, errs)
	}
}

// A record that is a symlink (to a file of someone else) is never followed,
// and moving it aside moves the link, not its target.
func TestHardeningRecordSymlinkNotFollowed(t *testing.T) {
	d := openStateDir(t)
	target := filepath.Join(t.TempDir(), "victim")
	if err := os.WriteFile(target, []byte("precious\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, d.RecordPath("api")); err != nil {
		t.Fatal(err)
	}
	var ue *actuate.UntrustedRecordError
	if _, err := d.ReadRecord("api"); !errors.As(err, &ue) {
		t.Fatalf("ReadRecord(symlink) = %v, want *UntrustedRecordError", err)
	}
	if b, err := os.ReadFile(target); err != nil || string(b) != "precious\n" {
		t.Errorf("symlink target changed: %q, %v", b, err)
	}
}

func TestHardeningSpawnRefusesEscapingName(t *testing.T) {
	d := openStateDir(t)
	stamp := filepath.Join(t.TempDir(), "stamp")
	a := &actuate.Actuator{Dir: d}
	for _, name := range escapingNames {
		argv := testserver.Command("-stamp", stamp)
		r, err := a.Spawn(context.Background(), actuate.StartRequest{Name: name, Argv: argv, Env: []string{testserver.Env()}})
		if err == nil {
			_ = r.Handle.Signal(syscall.SIGKILL)
			t.Errorf("Spawn(name %q) succeeded", name)
		}
	}
	if _, err := os.Stat(stamp); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a server was started under a refused name (stamp: %v)", err)
	}
}

func TestHardeningStateDirRefused(t *testing.T) {
	tests := []struct {
		name  string
		setup func(t *testing.T, dir string)
		want  string
	}{
		{"group-writable", func(t *testing.T, dir string) { chmod(t, dir, 0o770) }, "writable by group or others"},
		{"other-writable", func(t *testing.T, dir string) { chmod(t, dir, 0o707) }, "writable by group or others"},
		{"world-writable sticky", func(t *testing.T, dir string) { chmod(t, dir, 0o1777) }, "writable by group or others"},
		{"servers/ group-writable", func(t *testing.T, dir string) {
			mkdir(t, filepath.Join(dir, "servers"), 0o700)
			chmod(t, filepath.Join(dir, "servers"), 0o770)
		}, "writable by group or others"},
		{"logs/ other-writable", func(t *testing.T, dir string) {
			mkdir(t, filepath.Join(dir, "logs"), 0o700)
			chmod(t, filepath.Join(dir, "logs"), 0o702)
		}, "writable by group or others"},
		{"owned by another uid", func(t *testing.T, dir string) {
			if os.Geteuid() != 0 {
				t.Skip("needs root to chown (not root here)")
			}
			if err := os.Chown(dir, 65534, 65534); err != nil {
				t.Fatal(err)
			}
		}, "owned by uid 65534"},
		{"servers/ owned by another uid", func(t *testing.T, dir string) {
			if os.Geteuid() != 0 {
				t.Skip("needs root to chown (not root here)")
			}
			mkdir(t, filepath.Join(dir, "servers"), 0o700)
			if err := os.Chown(filepath.Join(dir, "servers"), 65534, 65534); err != nil {
				t.Fatal(err)
			}
		}, "owned by uid 65534"},
		{"a file, not a folder", func(t *testing.T, dir string) {
			if err := os.Remove(dir); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(dir, nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "state")
			mkdir(t, dir, 0o700)
			tc.setup(t, dir)
			d, err := actuate.OpenStateDir(dir)
			if err == nil {
				t.Fatalf("OpenStateDir accepted it: %+v", d)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("OpenStateDir error %q does not say %q", err, tc.want)
			}
		})
	}
}

func chmod(t *testing.T, p string, mode os.FileMode) {
	t.Helper()
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
}

func mkdir(t *testing.T, p string, mode os.FileMode) {
	t.Helper()
	if err := os.Mkdir(p, mode); err != nil {
		t.Fatal(err)
	}
}

// foreignServer starts the test server as uid 65534 (nobody), recording the
// signals it gets, and returns its pid and its signals file. Root only.
func foreignServer(t *testing.T) (*exec.Cmd, string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to start a process of another uid (not root here)")
	}
	// A folder uid 65534 can enter, with the test server copied in and a
	// signals file it can write.
	dir, err := os.MkdirTemp("", "procfleet-hardening-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	chmod(t, dir, 0o755)
	bin := filepath.Join(dir, "testserver")
	src, err := os.Open(testserver.Build(t))
	if err != nil {
		t.Fatal(err)
	}
	dst, err := os.OpenFile(bin, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	_ = src.Close()
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
	signals := filepath.Join(dir, "signals")
	ready := filepath.Join(dir, "ready")
	for _, f := range []string{signals, ready} {
		if err := os.WriteFile(f, nil, 0o666); err != nil {
			t.Fatal(err)
		}
		chmod(t, f, 0o666)
	}
	cmd := exec.Command(bin, "-signals", signals, "-ready-file", ready)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start a process as uid 65534: %v", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	deadline := time.Now().Add(20 * time.Second)
	for {
		if b, _ := os.ReadFile(ready); len(b) > 0 {
			break
		}
		select {
		case <-exited:
			t.Fatalf("uid 65534 server exited: %v", cmd.ProcessState)
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("uid 65534 server not ready within 20 s")
		}
	}
	return cmd, signals
}

// exactRecord is a record that matches the live process in every field a
// record can prove: what a hostile or stale record pointing at a foreign
// process would hold.
func exactRecord(t *testing.T, name string, pid int) actuate.Record {
	t.Helper()
	id, err := observe.ReadIdentity(pid)
	if err != nil {
		t.Fatal(err)
	}
	boot, err := observe.BootID()
	if err != nil {
		t.Fatal(err)
	}
	return actuate.Record{Version: 1, Name: name, PID: pid, PGID: id.PGID, StartTime: id.StartTime, BootID: boot,
		UID: id.UID, Cmdline: id.Cmdline, StartedAt: time.Now().UTC()}
}

func assertUntouched(t *testing.T, cmd *exec.Cmd, signals string) {
	t.Helper()
	if b, _ := os.ReadFile(signals); len(b) > 0 {
		t.Errorf("the uid 65534 process was signalled: %s", b)
	}
	if observe.CheckLiveness(cmd.Process.Pid) != observe.LivenessAlive {
		t.Errorf("the uid 65534 process pid %d is gone", cmd.Process.Pid)
	}
}

// A record owned by another uid is not trusted (rule 7): it is moved aside
// and the process it names, a live process of that uid, is never signalled.
func TestHardeningRecordOwnedByAnotherUIDNotTrusted(t *testing.T) {
	cmd, signals := foreignServer(t)
	d := openStateDir(t)
	rec := exactRecord(t, "api", cmd.Process.Pid)
	if err := d.WriteRecord(rec); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(d.RecordPath("api"), 65534, 65534); err != nil {
		t.Fatal(err)
	}
	_, err := d.ReadRecord("api")
	var ue *actuate.UntrustedRecordError
	if !errors.As(err, &ue) || !strings.Contains(ue.Reason, "uid 65534") {
		t.Fatalf("ReadRecord(record owned by uid 65534) = %v, want *UntrustedRecordError naming the uid", err)
	}
	if recs, _ := d.Records(); len(recs) != 0 {
		t.Errorf("Records() still lists it: %+v", recs)
	}
	assertUntouched(t, cmd, signals)
}

// A trusted record file (ours, 0600) naming a live process of another uid
// (65534) that procfleet did not start: the uid alone decides nothing (a
// server may drop privileges), so what protects that process is its
// identity. With the right pid, boot id and start time but another command
// line and no token, pidfd inode or cgroup to prove it, it is quarantined
// (IdentityMismatch); with another start time, the record is stale
// (Reused). Either way it is never signalled. (A privilege-dropped server
// procfleet did start is stopped: TestStopPrivilegeDrop.)
func TestHardeningForeignUIDProcessNeverSignalled(t *testing.T) {
	cmd, signals := foreignServer(t)
	d := openStateDir(t)
	exact := exactRecord(t, "api", cmd.Process.Pid)
	otherCmd := exact
	otherCmd.Cmdline = []string{"./my-server", "--port", "8080"}
	otherStart := exact
	otherStart.StartTime++
	for _, tc := range []struct {
		name string
		rec  actuate.Record
		want actuate.Verdict
	}{
		{"another command line", otherCmd, actuate.VerdictQuarantine},
		{"another start time", otherStart, actuate.VerdictReused},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := d.WriteRecord(tc.rec); err != nil {
				t.Fatal(err)
			}
			read, err := d.ReadRecord("api")
			if err != nil {
				t.Fatalf("ReadRecord: %v", err)
			}
			v := actuate.Verify(read)
			if v.Handle != nil {
				_ = v.Handle.Close()
			}
			if v.Verdict != tc.want {
				t.Errorf("Verify(record of a uid 65534 process) = %v (%s), want %v", v.Verdict, v.Message, tc.want)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			a := &actuate.Actuator{Dir: d}
			err = a.Stop(ctx, read, actuate.StopOptions{Grace: 2 * time.Second, KillTimeout: 2 * time.Second})
			var q *actuate.QuarantineError
			if tc.want == actuate.VerdictQuarantine && !errors.As(err, &q) {
				t.Errorf("Stop = %v, want *QuarantineError", err)
			}
			if tc.want == actuate.VerdictReused && err != nil {
				t.Errorf("Stop(stale record) = %v, want the record removed", err)
			}
			assertUntouched(t, cmd, signals)
		})
	}
}

// syncBuffer is a bytes.Buffer safe for the logger's concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) add(line string) {
	s.mu.Lock()
	s.b.WriteString(line + "\n")
	s.mu.Unlock()
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

type sinkEvents struct{ buf *syncBuffer }

func (e sinkEvents) Event(server, reason, message string) {
	e.buf.add(server + " " + reason + " " + message)
}

// Environment values are secrets as often as not: they never appear in
// procfleet's logs (at any verbosity), events, records or errors, whether
// the server starts, fails or is stopped.
func TestHardeningEnvValuesNeverLogged(t *testing.T) {
	const secret = "hunter2-soak-secret"
	d := openStateDir(t)
	var logs, events syncBuffer
	log := funcr.New(func(prefix, args string) { logs.add(prefix + " " + args) }, funcr.Options{Verbosity: 10})
	a := &actuate.Actuator{Dir: d, Log: logr.Logger(log), Events: sinkEvents{&events}}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	env := []string{testserver.Env(), "SECRET=" + secret, "API_TOKEN=" + secret}

	// A server that starts, then is stopped.
	port := testserver.FreePort(t)
	r, err := a.Start(ctx, actuate.StartRequest{Name: "api", Argv: testserver.Command("-port", strconv.Itoa(port)),
		Env: env, Port: port, StartupTimeout: 30 * time.Second})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { _ = r.Handle.Signal(syscall.SIGKILL) })
	rec, _ := os.ReadFile(d.RecordPath("api"))
	if err := a.Stop(ctx, r.Record, actuate.StopOptions{Grace: 5 * time.Second, KillTimeout: 5 * time.Second, Port: port}); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	_ = r.Handle.Close()

	// A server that fails to start (exits at once with code 3).
	badPort := testserver.FreePort(t)
	_, startErr := a.Start(ctx, actuate.StartRequest{Name: "bad",
		Argv: testserver.Command("-port", strconv.Itoa(badPort), "-listen-delay", "1m", "-exit-after", "1ms", "-exit-code", "3"),
		Env:  env, Port: badPort, StartupTimeout: 30 * time.Second})
	if startErr == nil {
		t.Fatal("Start of a server that exits at once succeeded")
	}

	// A server whose command does not exist.
	_, execErr := a.Start(ctx, actuate.StartRequest{Name: "missing", Argv: []string{filepath.Join(t.TempDir(), "no-such-program")},
		Env: env, StartupTimeout: 5 * time.Second})
	if execErr == nil {
		t.Fatal("Start of a missing program succeeded")
	}

	where := map[string]string{
		"logs":              logs.String(),
		"events":            events.String(),
		"record":            string(rec),
		"start error":       fmt.Sprint(startErr),
		"exec error":        fmt.Sprint(execErr),
		"events file (api)": readFile(d.EventsPath("api")),
		"events file (bad)": readFile(d.EventsPath("bad")),
	}
	if !strings.Contains(where["logs"]+where["events"], "api") {
		t.Fatalf("nothing was logged or reported; the test would prove nothing:\nlogs: %s\nevents: %s", where["logs"], where["events"])
	}
	for what, text := range where {
		if strings.Contains(text, secret) {
			t.Errorf("an environment value appears in the %s:\n%s", what, text)
		}
	}
}

func readFile(p string) string {
	b, _ := os.ReadFile(p)
	return string(b)
}

// Commands never pass through a shell: shell syntax in argv reaches the
// server as literal bytes.
func TestHardeningNoShell(t *testing.T) {
	d := openStateDir(t)
	a := &actuate.Actuator{Dir: d}
	marker := filepath.Join(t.TempDir(), "pwned")
	payload := fmt.Sprintf("$(touch %s); touch %s `touch %s` | touch %s", marker, marker, marker, marker)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	port := testserver.FreePort(t)
	r, err := a.Start(ctx, actuate.StartRequest{Name: "api", Argv: testserver.Command("-port", strconv.Itoa(port), "-print", payload),
		Env: []string{testserver.Env()}, Port: port, StartupTimeout: 20 * time.Second})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	defer func() {
		_ = a.Stop(ctx, r.Record, actuate.StopOptions{Grace: 5 * time.Second, KillTimeout: 5 * time.Second, Port: port})
		_ = r.Handle.Close()
	}()
	id, err := observe.ReadIdentity(r.Record.PID)
	if err != nil {
		t.Fatal(err)
	}
	if got := id.Cmdline[len(id.Cmdline)-1]; got != payload {
		t.Errorf("argv reached the process as %q, want %q", got, payload)
	}
	if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a shell ran the payload: %s exists", marker)
	}
	if !strings.Contains(readFile(d.LogPath("api")), payload) {
		t.Errorf("the server's log does not hold the literal payload: %q", readFile(d.LogPath("api")))
	}
}
