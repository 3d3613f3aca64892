package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/procfleet/procfleet/internal/testserver"
	"github.com/procfleet/procfleet/observe"
	"github.com/procfleet/procfleet/reconciler"
)

// TestLeftoversCleanedAfterLeaderKill is issue 20 point 1 through the CLI,
// in both membership modes: a server run as `sh -c 'testserver & wait'`,
// whose child holds the port, has its shell killed with -9 three times
// under up. Each time the child it left is stopped before the restart
// (pinned here, it is seen to exit), so the port it held does not block
// the restart; a down then leaves no process, record or port.
func TestLeftoversCleanedAfterLeaderKill(t *testing.T) {
	for _, mode := range []string{"cgroup", "session"} {
		t.Run(mode, func(t *testing.T) {
			if mode == "session" {
				t.Setenv("PROCFLEET_CGROUP", "off")
			}
			f := newE2EFleet(t, "web")
			port := f.ports["web"]
			line := fmt.Sprintf("%s -port %d -stamp %s & wait", f.server, port, f.stamp("web"))
			doc := fmt.Sprintf("apiVersion: procfleet.dev/v1alpha1\nkind: Server\nmetadata: {name: web}\nspec:\n  command: [/bin/sh, -c, %q]\n  port: %d\n  terminationGracePeriodSeconds: 5\n", line, port)
			if err := os.WriteFile(f.file, []byte(doc), 0o644); err != nil {
				t.Fatal(err)
			}
			up, upLog := f.up()
			st := f.waitStatus("web ready", readyWith("web"))
			for i := range 3 {
				leader := pidIn(st, "web")
				starts := f.starts("web")
				child := pinFor(t, starts[len(starts)-1])
				sh := pinFor(t, leader)
				if err := sh.Signal(syscall.SIGKILL); err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				err := child.Wait(ctx)
				cancel()
				if err != nil {
					b, _ := os.ReadFile(upLog)
					t.Fatalf("kill %d: the child (pid %d) outlived its leader's cleanup: %v\n%s", i+1, child.PID(), err, b)
				}
				st = f.waitStatus("web restarted", func(s reconciler.Status) bool {
					return readyWith("web")(s) && pidIn(s, "web") != leader
				})
			}
			if n := len(f.starts("web")); n != 4 {
				t.Errorf("web started %d times, want 4 (one and three restarts)", n)
			}
			last := f.starts("web")
			child := pinFor(t, last[len(last)-1])
			if code, out := f.cmd("down", "-f", f.file); code != 0 {
				t.Fatalf("down: exit %d\n%s", code, out)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := child.Wait(ctx); err != nil {
				t.Errorf("pid %d alive after down: %v", child.PID(), err)
			}
			if !testserver.PortFree(port) {
				t.Errorf("port %d held after down", port)
			}
			b, _ := os.ReadFile(upLog)
			if !strings.Contains(string(b), "web") {
				t.Errorf("up's log says nothing of web:\n%s", b)
			}
			_ = up.Process.Signal(syscall.SIGTERM)
			_ = up.Wait()
		})
	}
}

// pinFor pins pid for a test's waits; the test's cleanup SIGKILLs it if it
// is still alive.
func pinFor(t *testing.T, pid int) *observe.Handle {
	t.Helper()
	h, err := observe.Pin(pid)
	if err != nil {
		t.Fatalf("pin pid %d: %v", pid, err)
	}
	t.Cleanup(func() {
		if !h.Exited() {
			_ = h.Signal(syscall.SIGKILL)
		}
		_ = h.Close()
	})
	return h
}
