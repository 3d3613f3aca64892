package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/procfleet/procfleet/internal/testserver"
	"github.com/procfleet/procfleet/observe"
	"github.com/procfleet/procfleet/reconciler"
)

// phaseOf is a server's phase and reason in st.
func phaseOf(st reconciler.Status, name string) string {
	s, _ := st.Get(name)
	return s.Phase.String() + "/" + s.Reason
}

// TestVerbsThroughUp: stop, start and restart through a running up. A
// stopped server survives a crash of a sibling and a new up; start brings
// it back; restart replaces only the named server; ps is status; unknown
// names are errors with the nearest name.
func TestVerbsThroughUp(t *testing.T) {
	f := newE2EFleet(t, "db", "api", "web")
	f.write(map[string][]string{"api": {"db"}}, nil)
	up1, _ := f.up()
	st := f.waitStatus("all ready", readyWith("db", "api", "web"))
	db, web := pidIn(st, "db"), pidIn(st, "web")

	code, out, errOut := f.run("stop", "api", "-f", f.file)
	if code != 0 || !strings.Contains(out, "api: Stopped: StoppedByUser") {
		t.Fatalf("stop api through up: exit %d\n%s%s", code, out, errOut)
	}
	if got := phaseOf(f.statusJSON(), "api"); got != "Stopped/StoppedByUser" {
		t.Errorf("status of api after stop = %s", got)
	}
	if !testserver.PortFree(f.ports["api"]) {
		t.Errorf("api's port still held after stop")
	}

	// A crash of a sibling restarts the sibling only.
	if err := syscall.Kill(web, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	f.waitStatus("web back", func(st reconciler.Status) bool { return readyWith("web")(st) && pidIn(st, "web") != web })
	// A new up keeps api stopped.
	if err := up1.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	_ = up1.Wait()
	_, log2 := f.up()
	waitLog(t, log2, "db: adopted pid "+strconv.Itoa(db))
	f.waitStatus("web adopted", readyWith("db", "web"))
	if n := len(f.starts("api")); n != 1 {
		t.Errorf("api started %d times while stopped, want 1", n)
	}
	code, out, _ = f.run("ps", "api", "-f", f.file)
	if code != 0 || !strings.Contains(out, "StoppedByUser") {
		t.Errorf("ps api under the new up: exit %d\n%s", code, out)
	}

	code, out, errOut = f.run("start", "api", "-f", f.file)
	if code != 0 || !strings.Contains(out, "api: Ready (pid ") {
		t.Fatalf("start api through up: exit %d\n%s%s", code, out, errOut)
	}
	api := pidIn(f.statusJSON(), "api")

	code, out, errOut = f.run("restart", "db", "-f", f.file)
	if code != 0 || !strings.Contains(out, "db: Ready (pid ") {
		t.Fatalf("restart db through up: exit %d\n%s%s", code, out, errOut)
	}
	st = f.statusJSON()
	if pidIn(st, "db") == db || pidIn(st, "api") != api {
		t.Errorf("after restart db: db pid %d (was %d), api pid %d (was %d); want db replaced, api kept", pidIn(st, "db"), db, pidIn(st, "api"), api)
	}

	code, _, errOut = f.run("restart", "dbb", "-f", f.file)
	if code != 1 || !strings.Contains(errOut, "no server named dbb (did you mean db?)") {
		t.Errorf("restart dbb: exit %d\n%s", code, errOut)
	}
	code, _, errOut = f.run("stop", "-f", f.file)
	if code != 1 || !strings.Contains(errOut, "name at least one server") {
		t.Errorf("stop without a name: exit %d\n%s", code, errOut)
	}
}

// TestVerbsWithoutUp: the same verbs acted out by the command itself; the
// stop is kept by an up started later; restart of a server that ignores
// SIGTERM escalates to SIGKILL and brings it back; start waits for Ready.
func TestVerbsWithoutUp(t *testing.T) {
	f := newE2EFleet(t, "db", "stubborn")
	f.grace["stubborn"] = 1
	f.write(nil, map[string][]string{"stubborn": {"-ignore-term", "-signals", filepath.Join(t.TempDir(), "signals")}})
	if code, out := f.cmd("apply", "--wait", "-f", f.file); code != 0 {
		t.Fatalf("apply: exit %d\n%s", code, out)
	}
	st := f.statusJSON()
	stubborn := pidIn(st, "stubborn")

	code, out, errOut := f.run("restart", "stubborn", "-f", f.file)
	if code != 0 || !strings.Contains(out, "stubborn: Ready (pid ") {
		t.Fatalf("restart stubborn: exit %d\n%s%s", code, out, errOut)
	}
	if !strings.Contains(errOut, "SIGKILL") && !strings.Contains(describeEvents(t, f, "stubborn"), "SIGKILL") {
		t.Errorf("restart of a server that ignores SIGTERM did not escalate:\n%s", errOut)
	}
	if observe.CheckLiveness(stubborn) == observe.LivenessAlive {
		t.Errorf("old stubborn pid %d still alive", stubborn)
	}

	code, out, errOut = f.run("stop", "db", "-f", f.file)
	if code != 0 || !strings.Contains(out, "db: Stopped: StoppedByUser") {
		t.Fatalf("stop db: exit %d\n%s%s", code, out, errOut)
	}
	if got := phaseOf(f.statusJSON(), "db"); got != "Stopped/StoppedByUser" {
		t.Errorf("status of db after stop without up = %s", got)
	}
	_, log := f.up()
	waitLog(t, log, "stubborn: adopted pid")
	f.waitStatus("stubborn adopted", readyWith("stubborn"))
	if n := len(f.starts("db")); n != 1 {
		t.Errorf("up started db (%d starts), stopped by 'procfleet stop' before it ran", n)
	}
	code, out, errOut = f.run("start", "db", "-f", f.file)
	if code != 0 || !strings.Contains(out, "db: Ready (pid ") {
		t.Fatalf("start db through the up started later: exit %d\n%s%s", code, out, errOut)
	}

	// down NAME keeps it stopped as stop does; start --no-wait returns at once.
	if code, out := f.cmd("down", "db", "-f", f.file); code != 0 {
		t.Fatalf("down db: exit %d\n%s", code, out)
	}
	if got := phaseOf(f.statusJSON(), "db"); got != "Stopped/StoppedByUser" {
		t.Errorf("status of db after down db = %s", got)
	}
	code, out, errOut = f.run("start", "db", "--no-wait", "-f", f.file)
	if code != 0 || !strings.HasPrefix(out, "db: ") {
		t.Fatalf("start --no-wait: exit %d\n%s%s", code, out, errOut)
	}
	f.waitStatus("db started", func(st reconciler.Status) bool { return readyWith("db")(st) && len(f.starts("db")) == 3 })
}

// describeEvents is describe's output for a server (its events).
func describeEvents(t *testing.T, f *e2eFleet, name string) string {
	t.Helper()
	_, out, _ := f.run("describe", name, "-f", f.file)
	return out
}

// TestRestartQuarantinedRefuses: a server kept from its port by a process
// procfleet does not own refuses restart, with and without up, and says
// why; the stranger gets no signal.
func TestRestartQuarantinedRefuses(t *testing.T) {
	f := newE2EFleet(t, "api")
	f.write(nil, nil)
	sigs := filepath.Join(t.TempDir(), "stranger.signals")
	stranger := startStrangerOn(t, f.server, f.ports["api"], sigs)

	code, out, errOut := f.run("restart", "api", "-f", f.file)
	if code != 1 || !strings.Contains(errOut, "PortConflict") || !strings.Contains(errOut, strconv.Itoa(stranger)) {
		t.Errorf("restart without up: exit %d, want 1 naming PortConflict and pid %d\n%s%s", code, stranger, out, errOut)
	}
	_, log := f.up()
	waitLog(t, log, "PortConflict")
	code, out, errOut = f.run("restart", "api", "-f", f.file)
	if code != 1 || !strings.Contains(errOut, "restart api refused") || !strings.Contains(errOut, "PortConflict") {
		t.Errorf("restart through up: exit %d, want 1 refusing, naming PortConflict\n%s%s", code, out, errOut)
	}
	if b, _ := os.ReadFile(sigs); len(b) != 0 {
		t.Errorf("the stranger got signals: %q", b)
	}
}

// startStrangerOn starts a test server procfleet does not own on port,
// recording its signals in sigs, waits until it accepts, and returns its
// pid; it is killed when the test ends.
func startStrangerOn(t *testing.T, server string, port int, sigs string) int {
	t.Helper()
	c := exec.Command(server, "-port", strconv.Itoa(port), "-signals", sigs)
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Process.Kill(); _, _ = c.Process.Wait() })
	waitAccepting(t, port)
	return c.Process.Pid
}
