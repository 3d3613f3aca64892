package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/procfleet/procfleet/internal/testserver"
	"github.com/procfleet/procfleet/reconciler"
)

// replicatedFleet writes api with replicas on a free port range (each
// replica on $(PORT); all append to api's stamp file, so that the fleet's
// cleanup finds every one).
func replicatedFleet(t *testing.T, replicas int) *e2eFleet {
	t.Helper()
	f := newE2EFleet(t, "api")
	f.ports["api"] = testserver.FreePortRange(t, 4)
	f.extra["api"] = fmt.Sprintf("  replicas: %d\n", replicas)
	f.write(nil, map[string][]string{"api": {"-port", "$(PORT)"}})
	return f
}

func instanceNames(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("api-%d", i)
	}
	return out
}

// TestReplicasCLI runs the real binary on a server with three replicas:
// status shows one row per instance, in index order, and its JSON marks
// each with replicaOf and index; describe api describes each instance;
// up killed with -9 and started again adopts all three (same pids); diff
// shows a scale as "scale 3 -> 2" and "scale 3 -> 4"; restart api
// replaces all three; down api-1 stops only api-1, down api the others.
func TestReplicasCLI(t *testing.T) {
	f := replicatedFleet(t, 3)
	base := f.ports["api"]
	three := instanceNames(3)
	up, _ := f.up()
	st := f.waitStatus("three replicas Ready", readyWith(three...))
	pids := map[string]int{}
	for _, n := range three {
		pids[n] = pidIn(st, n)
	}

	js := f.statusJSON()
	for i, n := range three {
		s, ok := js.Get(n)
		if !ok || s.ReplicaOf != "api" || s.Index == nil || *s.Index != i || s.Port != base+i || s.PID != pids[n] {
			t.Errorf("status -o json, %s: %+v; want replicaOf api, index %d, port %d, pid %d", n, s, i, base+i, pids[n])
		}
	}
	if _, ok := js.Get("api"); ok {
		t.Errorf("status -o json has an entry api besides its instances")
	}

	code, out, errOut := f.run("status", "-f", f.file, "api")
	if code != 0 {
		t.Fatalf("status api: exit %d\n%s%s", code, out, errOut)
	}
	var rows []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n")[1:] {
		rows = append(rows, strings.Fields(line)[0])
	}
	if strings.Join(rows, " ") != "api-0 api-1 api-2" {
		t.Errorf("status api: rows %v, want api-0 api-1 api-2:\n%s", rows, out)
	}

	code, out, errOut = f.run("describe", "-f", f.file, "api")
	if code != 0 {
		t.Fatalf("describe api: exit %d\n%s%s", code, out, errOut)
	}
	for i := range three {
		if want := fmt.Sprintf("%d (spec.port %d + index %d)", base+i, base, i); !strings.Contains(out, want) {
			t.Errorf("describe api does not show %q:\n%s", want, out)
		}
		if want := fmt.Sprintf(`(?m)^Replica:\s+%d of api$`, i); !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("describe api does not show %q:\n%s", want, out)
		}
	}

	// kill -9 of up; a new up adopts all three.
	if err := up.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_, _ = up.Process.Wait()
	up, upLog := f.up()
	waitLog(t, upLog, "api-0: adopted pid", "api-1: adopted pid", "api-2: adopted pid")
	f.waitStatus("three adopted", func(st reconciler.Status) bool {
		for _, n := range three {
			if s, _ := st.Get(n); !s.Ready || s.PID != pids[n] {
				return false
			}
		}
		return true
	})
	if got := len(f.starts("api")); got != 3 {
		t.Errorf("%d starts of api's replicas after up was killed and restarted, want 3 (all adopted)", got)
	}

	// diff, without up: scale 3 -> 2 and 3 -> 4, not replacements.
	if err := up.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_, _ = up.Process.Wait()
	for _, tt := range []struct {
		n    int
		want string
	}{
		{2, "~ api: scale 3 -> 2: stops api-2"},
		{4, "~ api: scale 3 -> 4: starts api-3"},
	} {
		f.extra["api"] = fmt.Sprintf("  replicas: %d\n", tt.n)
		f.write(nil, map[string][]string{"api": {"-port", "$(PORT)"}})
		code, out, errOut := f.run("diff", "-f", f.file)
		if code != exitPending || !strings.Contains(out, tt.want) || strings.Contains(out, "replace") || strings.Count(out, "\n") != 2 {
			t.Errorf("diff after replicas 3 -> %d: exit %d, want %d and one line %q:\n%s%s", tt.n, code, exitPending, tt.want, out, errOut)
		}
	}
	f.extra["api"] = "  replicas: 3\n"
	f.write(nil, map[string][]string{"api": {"-port", "$(PORT)"}})
	_, upLog = f.up()
	// status.json is the killed up's until the new one writes it: its log
	// says when it adopted them.
	waitLog(t, upLog, "api-0: adopted pid", "api-1: adopted pid", "api-2: adopted pid")
	f.waitStatus("three adopted again", func(st reconciler.Status) bool {
		for _, n := range three {
			if s, _ := st.Get(n); !s.Ready || s.PID != pids[n] {
				return false
			}
		}
		return true
	})

	// restart api, through up: every instance runs a new pid.
	if code, out := f.cmd("restart", "api"); code != 0 {
		t.Fatalf("restart api: exit %d\n%s", code, out)
	}
	st = f.waitStatus("three restarted", func(st reconciler.Status) bool {
		for _, n := range three {
			if s, _ := st.Get(n); !s.Ready || s.PID == 0 || s.PID == pids[n] {
				return false
			}
		}
		return true
	})
	for _, n := range three {
		pids[n] = pidIn(st, n)
	}

	// down api-1: only it stops; down api: the others.
	if code, out := f.cmd("down", "api-1"); code != 0 {
		t.Fatalf("down api-1: exit %d\n%s", code, out)
	}
	st = f.waitStatus("api-1 stopped", func(st reconciler.Status) bool { s, _ := st.Get("api-1"); return s.PID == 0 })
	if pidIn(st, "api-0") != pids["api-0"] || pidIn(st, "api-2") != pids["api-2"] {
		t.Errorf("down api-1 touched the others: %v -> api-0 %d, api-2 %d", pids, pidIn(st, "api-0"), pidIn(st, "api-2"))
	}
	if code, out := f.cmd("down", "api"); code != 0 {
		t.Fatalf("down api: exit %d\n%s", code, out)
	}
	for _, n := range three {
		if syscall.Kill(pids[n], 0) == nil {
			t.Errorf("%s (pid %d) alive after down api", n, pids[n])
		}
	}
}

// TestReplicasPortOverlap: a server whose port falls in another's replica
// range fails validate and apply, naming both.
func TestReplicasPortOverlap(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "procfleet.yaml")
	doc := `apiVersion: procfleet.dev/v1alpha1
kind: Server
metadata: {name: api}
spec:
  command: [/bin/true]
  port: 18000
  replicas: 3
---
apiVersion: procfleet.dev/v1alpha1
kind: Server
metadata: {name: web}
spec:
  command: [/bin/true]
  port: 18002
`
	if err := os.WriteFile(file, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"validate", "-f", file}, {"apply", "-f", file, "--state-dir", filepath.Join(dir, "state")}} {
		r := procfleet(t, args...)
		if r.code != exitFailure || !strings.Contains(r.stderr+r.stdout, "api") || !strings.Contains(r.stderr+r.stdout, "web") || !strings.Contains(r.stderr+r.stdout, "18002") {
			t.Errorf("procfleet %s with overlapping ports: exit %d, want %d naming api, web and port 18002:\n%s%s", args[0], r.code, exitFailure, r.stdout, r.stderr)
		}
	}
}
