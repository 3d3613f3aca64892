//go:build integration && linux

package integration

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/procfleet/procfleet/internal/testserver"
)

// Bounds. Each is a limit on a wait for an event, never a pause: a
// correct procfleet is well inside them, on a loaded 2-core machine too.
const (
	// cliBound bounds one procfleet CLI call (down may wait out a 20 s grace).
	cliBound = 2 * time.Minute
	// upBound bounds `up` starting to answer on its socket.
	upBound = 30 * time.Second
	// readyBound bounds a server becoming Ready (postgres's crash
	// recovery included).
	readyBound = 90 * time.Second
	// stuckBound: a server Quarantined this long without a break is taken
	// as stuck, so a failing run fails in seconds, not at readyBound.
	// procfleet re-checks a PortConflict about every second; every other
	// quarantine waits for a person.
	stuckBound = 10 * time.Second
	// goneBound bounds the end of every process of a stopped instance.
	goneBound = 30 * time.Second
)

// markerVar is the variable the suite puts in procfleet's environment.
// Every server inherits it, so it finds their processes even on a
// procfleet without instance tokens, as long as the server keeps its
// environment (retitling servers overwrite it).
const markerVar = "PROCFLEET_INTEGRATION_MARK"

// fleet is one test's copy of examples/real-servers, its ports, and the
// procfleet processes the test runs on it.
type fleet struct {
	t     *testing.T
	root  string         // the test's folder: everything of the fleet lives under it
	dir   string         // the fleet folder (root/fleet): fleet files, configs, run/, bin/
	state string         // dir/.procfleet, procfleet's default
	ports map[string]int // the example's port -> this test's port
	cred  *syscall.Credential
	mark  string

	up     *upProc // the running `up`, nil when none
	nUp    int
	tokens map[string]bool
	// deadUps are the ups the test killed: their sessions held only their
	// exec probes (orphanedProbes).
	deadUps []int
}

// upProc is one `procfleet up` the test started.
type upProc struct {
	cmd  *exec.Cmd
	log  string
	done chan struct{} // closed when it has exited and been reaped
	err  error         // its Wait error, once done
}

// fleetOptions say what to copy and how to run procfleet.
type fleetOptions struct {
	files []string // example files to copy (fleet files, configs, scripts)
	// asUser runs procfleet (and so the servers) as this user instead of
	// the test's.
	asUser string
	// postgres copies a ready cluster into run/postgres (initdb is slow);
	// without it postgres.sh makes one on the first start.
	postgres bool
}

// newFleet copies the example files named in o into a fresh folder with
// free ports in place of the example's, and registers the cleanup that
// kills every process of the fleet, whatever the test's outcome.
func newFleet(t *testing.T, o fleetOptions) *fleet {
	t.Helper()
	root := t.TempDir()
	// Reachable by the servers' own users (postgres, nobody): t.TempDir
	// makes root and its parent 0700.
	for _, d := range []string{filepath.Dir(root), root} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	f := &fleet{t: t, root: root, dir: filepath.Join(root, "fleet"), ports: map[string]int{}, tokens: map[string]bool{}}
	f.state = filepath.Join(f.dir, ".procfleet")
	f.mark = randomHex(t)
	t.Cleanup(f.cleanup)

	defaults := []string{"22080", "22379", "22432", "22211", "22090"}
	free := testserver.FreePorts(t, len(defaults))
	for i, p := range defaults {
		f.ports[p] = free[i]
	}
	for _, d := range []string{f.dir, filepath.Join(f.dir, "run"), filepath.Join(f.dir, "bin")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range o.files {
		b, err := os.ReadFile(filepath.Join(tools.example, name))
		if err != nil {
			t.Fatal(err)
		}
		mode := fs.FileMode(0o644)
		if strings.HasSuffix(name, ".sh") {
			mode = 0o755
		}
		if err := os.WriteFile(filepath.Join(f.dir, name), []byte(f.withPorts(string(b))), mode); err != nil {
			t.Fatal(err)
		}
	}
	if err := copyFile(tools.app, filepath.Join(f.dir, "bin", "app"), 0o755); err != nil {
		t.Fatal(err)
	}
	if o.postgres {
		copyCluster(t, filepath.Join(f.dir, "run", "postgres"))
	}
	if o.asUser != "" {
		u, err := user.Lookup(o.asUser)
		if err != nil {
			t.Fatal(err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		f.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		// procfleet makes its state folder in the fleet folder.
		if err := filepath.WalkDir(f.dir, func(path string, _ fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			return os.Lchown(path, uid, gid)
		}); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

// withPorts replaces the example's ports in s with this test's.
func (f *fleet) withPorts(s string) string {
	for from, to := range f.ports {
		s = strings.ReplaceAll(s, from, strconv.Itoa(to))
	}
	return s
}

// port returns this test's port for the example's port p.
func (f *fleet) port(p string) int {
	n, ok := f.ports[p]
	if !ok {
		f.t.Fatalf("no port for example port %s", p)
	}
	return n
}

func randomHex(t *testing.T) string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b[:])
}

func copyFile(from, to string, mode fs.FileMode) error {
	b, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	return os.WriteFile(to, b, mode)
}

// env is the environment procfleet runs with: the test's, plus the marker.
func (f *fleet) env() []string {
	return append(os.Environ(), markerVar+"="+f.mark)
}

// command returns a procfleet command run in the fleet folder as the
// fleet's user, in a session of its own (its exec probes then share that
// session, which the scan leaves out while it runs).
func (f *fleet) command(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, tools.procfleet, args...)
	cmd.Dir = f.dir
	cmd.Env = f.env()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Credential: f.cred}
	return cmd
}

// result is one finished CLI call.
type result struct {
	args           []string
	stdout, stderr string
	code           int // exit status; -1 when it did not run or was killed
	err            error
}

func (r result) String() string {
	return fmt.Sprintf("procfleet %s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(r.args, " "), r.code, indent(r.stdout), indent(r.stderr))
}

// cli runs procfleet with args, bounded by cliBound.
func (f *fleet) cli(args ...string) result {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), f.bound(cliBound))
	defer cancel()
	cmd := f.command(ctx, args...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	r := result{args: args, stdout: out.String(), stderr: errOut.String(), code: cmd.ProcessState.ExitCode(), err: err}
	var exitErr *exec.ExitError
	if err != nil && !errors.As(err, &exitErr) {
		f.t.Fatalf("run procfleet %s: %v", strings.Join(args, " "), err)
	}
	return r
}

// startUp starts `procfleet up` on the fleet folder in the background and
// waits until it answers on its socket.
func (f *fleet) startUp() {
	f.t.Helper()
	if f.up != nil {
		f.t.Fatal("startUp: an up is already running")
	}
	f.nUp++
	logPath := filepath.Join(f.root, fmt.Sprintf("up-%d.log", f.nUp))
	logFile, err := os.Create(logPath)
	if err != nil {
		f.t.Fatal(err)
	}
	defer logFile.Close()
	cmd := f.command(context.Background(), "up", "-f", ".", "--log-format", "console")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	u := &upProc{cmd: cmd, log: logPath, done: make(chan struct{})}
	if err := cmd.Start(); err != nil {
		f.t.Fatalf("start procfleet up: %v", err)
	}
	go func() {
		u.err = cmd.Wait()
		close(u.done)
	}()
	f.up = u
	sock := filepath.Join(f.state, "procfleet.sock")
	f.waitFor("procfleet up answers on "+sock, upBound, func() (bool, string) {
		select {
		case <-u.done:
			f.t.Fatalf("procfleet up exited before it answered (%v); its log:\n%s", u.err, indent(readTail(logPath, 40)))
		default:
		}
		c, err := net.DialTimeout("unix", sock, time.Second)
		if err != nil {
			return false, err.Error()
		}
		c.Close()
		return true, ""
	})
}

// killUp SIGKILLs the running up and reaps it.
func (f *fleet) killUp() {
	f.t.Helper()
	u := f.up
	if u == nil {
		f.t.Fatal("killUp: no up is running")
	}
	if err := u.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		f.t.Fatalf("kill procfleet up: %v", err)
	}
	select {
	case <-u.done:
	case <-time.After(goneBound):
		f.t.Fatalf("procfleet up (pid %d) still running %s after SIGKILL", u.cmd.Process.Pid, goneBound)
	}
	f.up = nil
	f.orphanedProbes(u.cmd.Process.Pid)
}

// probeBound bounds how long an exec probe of a killed up may outlive it:
// the examples' probes time out after 1 s (timeoutSeconds), and a client
// such as pg_isready gives up on its own well within this.
const probeBound = 15 * time.Second

// orphanedProbes waits until nothing is left in the session of the killed
// up upPID. up runs in a session of its own and starts every server in a
// new one, so what is left there are its exec probes, orphaned by its
// death: procfleet's, not the server's, and left out of the fleet's scan
// from now on (scanSpec), but they must end on their own. One that does
// not fails the test and is killed here.
func (f *fleet) orphanedProbes(upPID int) {
	f.t.Helper()
	f.deadUps = append(f.deadUps, upPID)
	inSession := func() []proc {
		var out []proc
		for _, pid := range allPids() {
			if p, ok := readProc(pid); ok && p.sid == upPID && !p.zombie() {
				out = append(out, p)
			}
		}
		return out
	}
	left := inSession()
	if len(left) == 0 {
		return
	}
	f.t.Logf("processes left in the session of the killed up (pid %d), its exec probes:\n%s", upPID, table(left, f.scanSpec()))
	if _, ok := f.poll(probeBound, func() (bool, string) { return len(inSession()) == 0, "" }); ok {
		return
	}
	left = inSession()
	f.t.Errorf("processes of the killed up (pid %d) still running %s after it:\n%s", upPID, probeBound, table(left, f.scanSpec()))
	for _, p := range left {
		killPinned(p, time.Second)
	}
}

// scanSpec is this fleet's scan: its folder, ports, marker, the tokens
// in its records, the servers' executables.
func (f *fleet) scanSpec() scanSpec {
	f.readTokens()
	s := scanSpec{
		root:    f.root,
		ports:   map[int]bool{},
		env:     map[string]string{markerVar: f.mark},
		tokens:  f.tokens,
		exes:    tools.serverExes,
		ignore:  tools.procfleet,
		actors:  map[int]bool{},
		selfPID: os.Getpid(),
	}
	for _, p := range f.ports {
		s.ports[p] = true
	}
	if f.up != nil {
		s.actors[f.up.cmd.Process.Pid] = true
	}
	for _, pid := range f.deadUps {
		s.actors[pid] = true
	}
	return s
}

// readTokens remembers the instance tokens of the records in the state
// folder (record version 2 and later), so processes carrying them are
// found after the records are gone.
func (f *fleet) readTokens() {
	ents, _ := os.ReadDir(filepath.Join(f.state, "servers"))
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(f.state, "servers", e.Name()))
		if err != nil {
			continue
		}
		var r struct {
			Instance string `json:"instance"`
		}
		if json.Unmarshal(b, &r) == nil && r.Instance != "" {
			f.tokens[r.Instance] = true
		}
	}
}

// procs scans /proc for this fleet's processes (zombies included).
func (f *fleet) procs() []proc { return scan(f.scanSpec()) }

// live drops zombies.
func live(procs []proc) []proc {
	out := procs[:0:0]
	for _, p := range procs {
		if !p.zombie() {
			out = append(out, p)
		}
	}
	return out
}

// snapshot logs the fleet's processes under label: the evidence the
// findings are made of.
func (f *fleet) snapshot(label string) []proc {
	f.t.Helper()
	s := f.scanSpec()
	procs := scan(s)
	f.t.Logf("processes %s:\n%s", label, table(procs, s))
	return procs
}

// cleanup kills every process of the fleet: up first (so nothing
// restarts), then whatever the scan finds, each pinned and checked first.
func (f *fleet) cleanup() {
	if f.up != nil {
		_ = f.up.cmd.Process.Kill()
		select {
		case <-f.up.done:
		case <-time.After(goneBound):
			f.t.Errorf("cleanup: procfleet up (pid %d) still running after SIGKILL", f.up.cmd.Process.Pid)
		}
		f.up = nil
	}
	deadline := time.Now().Add(goneBound)
	for {
		left := live(f.procs())
		if len(left) == 0 {
			f.removeCgroups()
			return
		}
		if time.Now().After(deadline) {
			f.t.Errorf("cleanup: processes of the fleet still alive %s after SIGKILL:\n%s", goneBound, table(left, f.scanSpec()))
			return
		}
		for _, p := range left {
			killPinned(p, time.Second)
		}
	}
}

// removeCgroups removes the cgroups procfleet made for the fleet's state
// folder (procfleet-<device>-<inode> below the test's own cgroup), deepest
// first, once its processes are gone. up, SIGKILLed by the cleanup, would
// have removed them; left behind, they would be another folder's once the
// inode is reused. rmdir refuses a cgroup that still holds a process.
func (f *fleet) removeCgroups() {
	var st syscall.Stat_t
	if err := syscall.Stat(f.state, &st); err != nil {
		return
	}
	mount, self, ok := ownCgroup2()
	if !ok {
		return
	}
	dir := filepath.Join(mount, self, fmt.Sprintf("procfleet-%d-%d", st.Dev, st.Ino))
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range ents {
		if e.IsDir() {
			if err := os.Remove(filepath.Join(dir, e.Name())); err != nil {
				f.t.Logf("cleanup: %v", err)
			}
		}
	}
	if err := os.Remove(dir); err != nil {
		f.t.Logf("cleanup: %v", err)
	}
}

// ownCgroup2 returns where the cgroup v2 hierarchy is mounted and the
// test's cgroup in it.
func ownCgroup2() (mount, self string, ok bool) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", "", false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if p, found := strings.CutPrefix(line, "0::"); found {
			self, ok = p, true
		}
	}
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil || !ok {
		return "", "", false
	}
	for _, line := range strings.Split(string(mi), "\n") {
		pre, post, found := strings.Cut(line, " - ")
		if fields := strings.Fields(pre); found && len(fields) >= 5 && strings.HasPrefix(post, "cgroup2 ") {
			return fields[4], self, true
		}
	}
	return "", "", false
}

// cleanupReserve is the time kept before the test binary's -timeout for
// the cleanups to kill what the tests started: past the timeout go test
// panics and runs no cleanup. It covers cleanup's two goneBound waits.
const cleanupReserve = 90 * time.Second

// bound returns d, cut so that a wait ends cleanupReserve before the test
// binary's deadline (a cut wait fails the test, and its cleanups run).
func (f *fleet) bound(d time.Duration) time.Duration {
	if dl, ok := f.t.Deadline(); ok {
		return max(min(d, time.Until(dl)-cleanupReserve), 0)
	}
	return d
}

// waitFor polls cond, from every 20 ms up to every 250 ms, until it holds
// or bound passes; then the test fails with what cond last said.
func (f *fleet) waitFor(what string, bound time.Duration, cond func() (bool, string)) {
	f.t.Helper()
	if msg, ok := f.poll(bound, cond); !ok {
		f.t.Fatalf("%s: not within %s: %s", what, bound, msg)
	}
}

// poll is waitFor's loop: it returns cond's last message and whether cond
// held before bound (cut by f.bound).
func (f *fleet) poll(bound time.Duration, cond func() (bool, string)) (string, bool) {
	deadline := time.Now().Add(f.bound(bound))
	interval := 20 * time.Millisecond
	for {
		ok, msg := cond()
		if ok {
			return msg, true
		}
		if time.Now().After(deadline) {
			return msg, false
		}
		timer := time.NewTimer(min(interval, time.Until(deadline)+time.Millisecond))
		<-timer.C
		interval = min(interval*2, 250*time.Millisecond)
	}
}

// readTail returns the last n lines of a file, or why it cannot.
func readTail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(len(lines)-n, 0):], "\n")
}

func indent(s string) string {
	if s == "" {
		return "    (empty)"
	}
	return "    " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n    ")
}

// logs logs the tail of up's logs and of the server's log, for a failure.
func (f *fleet) logs(server string) {
	f.t.Helper()
	for i := 1; i <= f.nUp; i++ {
		p := filepath.Join(f.root, fmt.Sprintf("up-%d.log", i))
		f.t.Logf("%s (last 40 lines):\n%s", relTo(p, f.root), indent(readTail(p, 40)))
	}
	p := filepath.Join(f.state, "logs", server+".log")
	f.t.Logf("%s (last 20 lines):\n%s", relTo(p, f.root), indent(readTail(p, 20)))
}

// edit replaces old by new in a fleet folder file (the example's ports in
// both are this test's), as a person saving the file would.
func (f *fleet) edit(file, old, new string) {
	f.t.Helper()
	path := filepath.Join(f.dir, file)
	b, err := os.ReadFile(path)
	if err != nil {
		f.t.Fatal(err)
	}
	old, new = f.withPorts(old), f.withPorts(new)
	if !bytes.Contains(b, []byte(old)) {
		f.t.Fatalf("edit %s: %q not in it:\n%s", file, old, b)
	}
	b = bytes.Replace(b, []byte(old), []byte(new), 1)
	// Written beside and renamed over, as editors that save atomically do.
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		f.t.Fatal(err)
	}
	if f.cred != nil {
		if err := os.Chown(tmp, int(f.cred.Uid), int(f.cred.Gid)); err != nil {
			f.t.Fatal(err)
		}
	}
	if err := os.Rename(tmp, path); err != nil {
		f.t.Fatal(err)
	}
}

// portListening reports whether anything listens on TCP port (any address).
func portListening(port int) bool {
	return len(listeners(map[int]bool{port: true})) > 0
}

// httpGet returns the status and body of GET url, bounded.
func httpGet(url string) (int, string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	return resp.StatusCode, string(body), err
}

// exchange sends req to 127.0.0.1:port and returns the answer up to and
// including the first until, bounded.
func exchange(port int, req, until string) (string, error) {
	c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), 5*time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte(req)); err != nil {
		return "", err
	}
	var got []byte
	var b [4096]byte
	for len(got) < 1<<16 {
		n, err := c.Read(b[:])
		got = append(got, b[:n]...)
		if i := bytes.Index(got, []byte(until)); i >= 0 {
			return string(got[:i+len(until)]), nil
		}
		if err != nil {
			return string(got), err
		}
	}
	return string(got), fmt.Errorf("no %q in the first 64 KiB of the answer", until)
}

// client runs a package's client program (psql, redis-cli), bounded, and
// returns its trimmed output.
func client(name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out)), nil
}
