package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/procfleet/procfleet/internal/testserver"
	"github.com/procfleet/procfleet/observe"
	"github.com/procfleet/procfleet/reconciler"
)

// writeShimFleet saves a fleet of two servers whose processes stop showing
// what procfleet spawned: "shim" is started through a pyenv-style shim (a
// script named like the program that execs /usr/bin/env, which execs the
// real program), "retitled" rewrites its argument area and wipes its
// environment (-retitle, as nginx does). extra is added to both servers'
// arguments (an args edit).
func writeShimFleet(t *testing.T, f *e2eFleet, shim string, extra ...string) {
	t.Helper()
	var docs []string
	for _, name := range []string{"shim", "retitled"} {
		args := []string{"-port", strconv.Itoa(f.ports[name]), "-stamp", f.stamp(name)}
		command := shim
		if name == "retitled" {
			command = f.server
			args = append(args, "-retitle", "retitled: master process "+f.dir, "-retitle-wipe-env")
		}
		args = append(args, extra...)
		q := make([]string, len(args))
		for i, a := range args {
			q[i] = strconv.Quote(a)
		}
		docs = append(docs, fmt.Sprintf("apiVersion: procfleet.dev/v1alpha1\nkind: Server\nmetadata: {name: %s}\nspec:\n  command: [%q]\n  args: [%s]\n  port: %d\n  terminationGracePeriodSeconds: 5\n",
			name, command, strings.Join(q, ", "), f.ports[name]))
	}
	if err := os.WriteFile(f.file+".tmp", []byte(strings.Join(docs, "---\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(f.file+".tmp", f.file); err != nil {
		t.Fatal(err)
	}
}

// pinShown pins a server's process (killed in the test's cleanup) and
// waits (bounded) until its command line starts with want: the premise
// that it no longer shows what procfleet spawned.
func pinShown(t *testing.T, pid int, want string) *observe.Handle {
	t.Helper()
	h := pinFor(t, pid)
	deadline := time.Now().Add(10 * time.Second)
	for {
		id, err := h.Identity()
		if err != nil {
			t.Fatalf("pid %d: %v", pid, err)
		}
		cl := strings.Join(id.Cmdline, " ")
		if strings.HasPrefix(cl, want) {
			return h
		}
		if time.Now().After(deadline) {
			t.Fatalf("pid %d shows %q, want it to start with %q", pid, cl, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// fleetProcesses lists the live processes whose command line or
// environment names dir (the test's private folder), except the pids in
// skip: what is left of the fleet.
func fleetProcesses(dir string, skip ...int) []string {
	ents, _ := os.ReadDir("/proc")
	var left []string
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() || slices.Contains(skip, pid) {
			continue
		}
		cl, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		env, _ := os.ReadFile("/proc/" + e.Name() + "/environ")
		if bytes.Contains(cl, []byte(dir)) || bytes.Contains(env, []byte(dir)) {
			left = append(left, fmt.Sprintf("pid %d %q", pid, bytes.TrimRight(cl, "\x00")))
		}
	}
	return left
}

// TestShimAndRetitledAdoptedEditedDowned is issue 13's Done-when item for
// launchers through the CLI: a pyenv-style shim chain (script -> env ->
// server) and a server that rewrites its argv and wipes its environment,
// started by up, are adopted (same pids, not started again) by a new up
// after the first is killed -9, then replaced by an args edit, and
// stopped by down with nothing of the fleet left running, no record and
// every port free. Linux: it reads /proc.
func TestShimAndRetitledAdoptedEditedDowned(t *testing.T) {
	f := newE2EFleet(t, "shim", "retitled")
	shim := filepath.Join(f.dir, "shims", "testserver")
	if err := os.MkdirAll(filepath.Dir(shim), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(shim, []byte("#!/bin/sh\n# a pyenv-style shim\nexec /usr/bin/env "+f.server+" \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeShimFleet(t, f, shim)
	up1, _ := f.up()
	st := f.waitStatus("both ready", readyWith("shim", "retitled"))
	sh := pinShown(t, pidIn(st, "shim"), f.server+" -port")
	re := pinShown(t, pidIn(st, "retitled"), "retitled: master process")

	// kill -9 of up, and a new up: both adopted.
	if err := up1.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = up1.Wait()
	up2, upLog := f.up()
	waitLog(t, upLog, fmt.Sprintf("shim: adopted pid %d", sh.PID()), fmt.Sprintf("retitled: adopted pid %d", re.PID()))
	f.waitStatus("both ready under the new up", func(s reconciler.Status) bool {
		return readyWith("shim", "retitled")(s) && pidIn(s, "shim") == sh.PID() && pidIn(s, "retitled") == re.PID()
	})
	if sh.Exited() || re.Exited() {
		t.Fatalf("a server did not survive the restart of up: shim exited %v, retitled exited %v", sh.Exited(), re.Exited())
	}
	for _, name := range []string{"shim", "retitled"} {
		if n := len(f.starts(name)); n != 1 {
			t.Errorf("%s started %d times across the restart of up, want 1 (adopted)", name, n)
		}
	}

	// An args edit replaces both.
	writeShimFleet(t, f, shim, "-print", "edited")
	waitGone(t, sh)
	waitGone(t, re)
	st = f.waitStatus("both replaced", func(s reconciler.Status) bool {
		return readyWith("shim", "retitled")(s) && pidIn(s, "shim") != sh.PID() && pidIn(s, "retitled") != re.PID()
	})
	sh2 := pinShown(t, pidIn(st, "shim"), f.server+" -port")
	re2 := pinShown(t, pidIn(st, "retitled"), "retitled: master process")
	for _, name := range []string{"shim", "retitled"} {
		if n := len(f.starts(name)); n != 2 {
			t.Errorf("%s started %d times after the edit, want 2", name, n)
		}
	}

	// down through up: nothing left.
	if code, out := f.cmd("down", "-f", f.file); code != 0 {
		t.Fatalf("down: exit %d\n%s", code, out)
	}
	waitGone(t, sh2)
	waitGone(t, re2)
	if err := up2.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := up2.Wait(); err != nil {
		t.Errorf("up after SIGTERM: %v", err)
	}
	if left := fleetProcesses(f.dir); len(left) > 0 {
		t.Errorf("left running after down: %v", left)
	}
	if entries := recordsLeft(f.state); len(entries) != 0 {
		t.Errorf("records left after down: %v", entries)
	}
	for name, port := range f.ports {
		if !testserver.PortFree(port) {
			t.Errorf("%s's port %d still held after down", name, port)
		}
	}
}
