package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/procfleet/procfleet/internal/testserver"
	"github.com/procfleet/procfleet/observe"
	"github.com/procfleet/procfleet/reconciler"
)

// changedFleet is a fleet of two servers whose processes stop looking like
// what procfleet started: "exec" is `sh -c "exec testserver ..."` (its
// command line becomes the test server's), "retitled" overwrites its
// argument area and zeroes its environment, as nginx and redis do.
type changedFleet struct {
	*e2eFleet
	pins map[int]*observe.Handle
}

func newChangedFleet(t *testing.T) *changedFleet {
	f := &changedFleet{e2eFleet: newE2EFleet(t, "exec", "retitled"), pins: map[int]*observe.Handle{}}
	t.Cleanup(func() {
		for _, h := range f.pins {
			_ = h.Signal(syscall.SIGKILL)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_ = h.Wait(ctx)
			cancel()
			_ = h.Close()
		}
	})
	return f
}

// writeChanged saves the fleet with the servers named; extra is added to
// every server's arguments (an args edit).
func (f *changedFleet) writeChanged(extra string, names ...string) {
	f.t.Helper()
	var docs []string
	for _, name := range names {
		port := f.ports[name]
		var cmd string
		switch name {
		case "exec":
			line := fmt.Sprintf("exec %s -port %d -stamp %s %s", f.server, port, f.stamp(name), extra)
			cmd = fmt.Sprintf("command: [/bin/sh, -c, %q]", line)
		case "retitled":
			args := []string{"-port", strconv.Itoa(port), "-stamp", f.stamp(name), "-retitle", "retitled: master process", "-retitle-wipe-env"}
			if extra != "" {
				args = append(args, strings.Fields(extra)...)
			}
			q := make([]string, len(args))
			for i, a := range args {
				q[i] = strconv.Quote(a)
			}
			cmd = fmt.Sprintf("command: [%q]\n  args: [%s]", f.server, strings.Join(q, ", "))
		}
		docs = append(docs, fmt.Sprintf("apiVersion: procfleet.dev/v1alpha1\nkind: Server\nmetadata: {name: %s}\nspec:\n  %s\n  port: %d\n  terminationGracePeriodSeconds: 5\n",
			name, cmd, port))
	}
	if err := os.WriteFile(f.file+".tmp", []byte(strings.Join(docs, "---\n")), 0o644); err != nil {
		f.t.Fatal(err)
	}
	if err := os.Rename(f.file+".tmp", f.file); err != nil {
		f.t.Fatal(err)
	}
}

// pinChanged pins the server's process (for the test's cleanup and its
// waits) and checks the premise: its command line no longer shows what
// procfleet started.
func (f *changedFleet) pinChanged(name string, pid int) *observe.Handle {
	f.t.Helper()
	h, err := observe.Pin(pid)
	if err != nil {
		f.t.Fatalf("pin %s pid %d: %v", name, pid, err)
	}
	f.pins[pid] = h
	deadline := time.Now().Add(10 * time.Second)
	for {
		id, err := h.Identity()
		if err != nil {
			f.t.Fatalf("%s pid %d: %v", name, pid, err)
		}
		switch cl := strings.Join(id.Cmdline, " "); {
		case name == "exec" && strings.HasPrefix(cl, f.server),
			name == "retitled" && strings.HasPrefix(cl, "retitled: master process"):
			return h
		case time.Now().After(deadline):
			f.t.Fatalf("%s pid %d runs %q: its command line did not change", name, pid, cl)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// gone waits (bounded) until the pinned process has exited.
func (f *changedFleet) gone(what string, h *observe.Handle) {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := h.Wait(ctx); err != nil {
		f.t.Fatalf("%s: pid %d still running: %v", what, h.PID(), err)
	}
}

// TestChangedProcessesAreStopped is issue 13 item 1 through the CLI: a
// server that exec'd into another program and one that rewrote its command
// line and wiped its environment are stopped by an args edit (replaced),
// by down NAME and by a prune under up (which holds their pidfds since it
// started them), and by down without up (their records' instance token and
// pidfd inode), leaving no process, record or port behind.
func TestChangedProcessesAreStopped(t *testing.T) {
	f := newChangedFleet(t)
	f.writeChanged("", "exec", "retitled")
	up, upLog := f.up()
	st := f.waitStatus("both ready", readyWith("exec", "retitled"))
	ex := f.pinChanged("exec", pidIn(st, "exec"))
	re := f.pinChanged("retitled", pidIn(st, "retitled"))

	// An args edit replaces both.
	f.writeChanged("-print edited", "exec", "retitled")
	f.gone("exec after an args edit", ex)
	f.gone("retitled after an args edit", re)
	st = f.waitStatus("both replaced", func(s reconciler.Status) bool {
		return readyWith("exec", "retitled")(s) && pidIn(s, "exec") != ex.PID() && pidIn(s, "retitled") != re.PID()
	})
	ex = f.pinChanged("exec", pidIn(st, "exec"))
	re = f.pinChanged("retitled", pidIn(st, "retitled"))

	// A prune: retitled removed from the file.
	f.writeChanged("-print edited", "exec")
	f.gone("retitled after its prune", re)
	waitLog(t, upLog, "retitled: stopped")

	// down NAME through up (after the file change: a change of its file
	// lifts a down).
	if code, out := f.cmd("down", "exec", "-f", f.file); code != 0 || !strings.Contains(out, "exec: Stopped") {
		t.Fatalf("down exec through up: exit %d\n%s", code, out)
	}
	f.gone("exec after down exec", ex)
	if err := up.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := up.Wait(); err != nil {
		t.Errorf("up after SIGTERM: %v", err)
	}

	// Without up: apply starts both, down stops them.
	f.writeChanged("", "exec", "retitled")
	if code, out := f.cmd("apply", "--wait", "-f", f.file); code != 0 {
		t.Fatalf("apply --wait: exit %d\n%s", code, out)
	}
	st = f.waitStatus("both ready after apply", readyWith("exec", "retitled"))
	ex = f.pinChanged("exec", pidIn(st, "exec"))
	re = f.pinChanged("retitled", pidIn(st, "retitled"))
	// exec's record names what it runs now: the test server, whether the
	// spawn's record already saw it (sh exec'd first) or the refresh at
	// Ready rewrote it (then spawnCmdline is the shell's, with a
	// CommandLineChanged event). retitled is not checked: like nginx, it
	// retitles after it listens, so Ready may come first.
	var rec struct {
		Cmdline      []string `json:"cmdline"`
		SpawnCmdline []string `json:"spawnCmdline"`
	}
	b, err := os.ReadFile(filepath.Join(f.state, "servers", "exec.json"))
	if err == nil {
		err = json.Unmarshal(b, &rec)
	}
	if err != nil || len(rec.Cmdline) == 0 || !strings.HasPrefix(rec.Cmdline[0], f.server) {
		t.Errorf("exec's record: cmdline %q (%v); want the test server's", rec.Cmdline, err)
	}
	if len(rec.SpawnCmdline) > 0 && rec.SpawnCmdline[0] == "/bin/sh" {
		if ev, _ := os.ReadFile(filepath.Join(f.state, "logs", "exec.events.jsonl")); !strings.Contains(string(ev), "CommandLineChanged") {
			t.Errorf("exec: spawned as the shell, but no CommandLineChanged event:\n%s", ev)
		}
	}
	if code, out := f.cmd("down", "-f", f.file); code != 0 {
		t.Fatalf("down without up: exit %d\n%s", code, out)
	}
	f.gone("exec after down", ex)
	f.gone("retitled after down", re)
	if entries := recordsLeft(f.state); len(entries) != 0 {
		t.Errorf("records left after down: %v", entries)
	}
	for name, port := range f.ports {
		if !testserver.PortFree(port) {
			t.Errorf("%s's port %d still held after down", name, port)
		}
	}
}
