package reconciler

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/procfleet/procfleet/actuate"
	"github.com/procfleet/procfleet/spec"
)

// startedFleet writes a fleet of three servers reading env files and
// returns a loader of its instances by name.
func startedFleet(t *testing.T, dir, env, otherEnv, extra string) (string, func() map[string]*spec.Instance) {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	write := func(name, data string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(".env", env)
	write("other.env", otherEnv)
	doc := func(name, body string) string {
		return "apiVersion: procfleet.dev/v1alpha1\nkind: Server\nmetadata: {name: " + name + "}\nspec:\n  command: [./srv]\n" + body
	}
	write("procfleet.yaml", doc("uses", "  envFile: [.env]\n  args: [--key, $(KEY)]\n  env: [{name: LOG, value: debug}]\n  port: 8080\n"+extra)+
		"---\n"+doc("overrides", "  envFile: [.env]\n  env: [{name: KEY, value: mine}]\n")+
		"---\n"+doc("elsewhere", "  envFile: [other.env]\n"))
	return dir, func() map[string]*spec.Instance {
		t.Helper()
		f, err := spec.Load(filepath.Join(dir, "procfleet.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]*spec.Instance{}
		for i := range f.Instances() {
			in := &f.Instances()[i]
			m[in.Name] = in
		}
		return m
	}
}

// TestStartedWithChanges: what a process runs with, kept without a value
// in clear, compared with the files: an edited env file names the changed
// variable of exactly the servers that take it from there; an args and a
// probe change are named with their values, the probe as "no restart".
func TestStartedWithChanges(t *testing.T) {
	const secret = "hunter2-very-secret"
	dir, load := startedFleet(t, "", "KEY=1\nSECRET="+secret+"\n", "KEY=1\n", "")
	before := load()
	started := map[string]*StartedWith{}
	for name, in := range before {
		sw := newStartedWith(in, actuate.Record{Name: name, PID: 100, SpecHash: in.Hash}, "00112233445566778899aabbccddeeff")
		b, err := json.Marshal(sw)
		if err != nil {
			t.Fatal(err)
		}
		for _, value := range []string{secret, "debug", "mine"} {
			if strings.Contains(string(b), value) {
				t.Errorf("%s: the value %q is in clear in %s", name, value, b)
			}
		}
		var back StartedWith
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		started[name] = &back
		if c := back.Changes(in); len(c) != 0 {
			t.Errorf("%s: changes against itself: %+v", name, c)
		}
	}

	if err := os.WriteFile(filepath.Join(dir, ".env"), []byte("KEY=2\nSECRET="+secret+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	after := load()
	want := map[string][]spec.Change{
		"uses": {
			{Field: "spec.args", Old: `["--key", "1"]`, New: `["--key", "2"]`, Restart: true},
			{Field: "spec.env", Var: "KEY", How: "changed", Restart: true},
		},
		"overrides": nil,
		"elsewhere": nil,
	}
	for name, w := range want {
		got := started[name].Changes(after[name])
		if diff := cmp.Diff(w, got); diff != "" {
			t.Errorf("%s after KEY=2 (-want +got):\n%s", name, diff)
		}
		if (len(got) > 0) != (before[name].Hash != after[name].Hash) {
			t.Errorf("%s: changes %v but hash moved %v", name, got, before[name].Hash != after[name].Hash)
		}
	}

	// A probe edit: listed, no restart.
	dir2, load2 := startedFleet(t, "", "KEY=1\n", "KEY=1\n", "")
	in := load2()["uses"]
	sw := newStartedWith(in, actuate.Record{Name: "uses", PID: 7, SpecHash: in.Hash}, "aa")
	_, load3 := startedFleet(t, dir2, "KEY=1\n", "KEY=1\n", "  readinessProbe: {httpGet: {path: /health}, periodSeconds: 5}\n")
	got := sw.Changes(load3()["uses"])
	if len(got) != 1 || got[0].Field != "spec.readinessProbe" || got[0].Restart || !strings.Contains(got[0].New, "/health") {
		t.Errorf("probe edit: %+v, want one spec.readinessProbe change without restart", got)
	}
}

// TestReadStartedWith: a file about another process (pid or spec hash) is
// not read; one about this process is.
func TestReadStartedWith(t *testing.T) {
	_, load := startedFleet(t, "", "KEY=1\n", "KEY=1\n", "")
	in := load()["uses"]
	state := t.TempDir()
	if err := mkdirState(filepath.Join(state, startedDir)); err != nil {
		t.Fatal(err)
	}
	rec := actuate.Record{Name: "uses", PID: 42, SpecHash: in.Hash}
	b, _ := json.Marshal(newStartedWith(in, rec, "ab"))
	if err := os.WriteFile(startedPath(state, "uses"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	if sw, err := ReadStartedWith(state, rec); err != nil || sw == nil {
		t.Fatalf("ReadStartedWith(same process) = %v, %v", sw, err)
	}
	for _, other := range []actuate.Record{{Name: "uses", PID: 43, SpecHash: in.Hash}, {Name: "uses", PID: 42, SpecHash: "sha256:other"}} {
		if sw, err := ReadStartedWith(state, other); err != nil || sw != nil {
			t.Errorf("ReadStartedWith(pid %d, %s) = %v, %v; want nothing", other.PID, other.SpecHash, sw, err)
		}
	}
	if sw, err := ReadStartedWith(state, actuate.Record{Name: "none", PID: 1}); err != nil || sw != nil {
		t.Errorf("no file: %v, %v", sw, err)
	}
	// A symlink is never followed.
	if err := os.Symlink(startedPath(state, "uses"), startedPath(state, "link")); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadStartedWith(state, actuate.Record{Name: "link", PID: 42, SpecHash: in.Hash}); err == nil {
		t.Errorf("a symlinked file was read")
	}
}
