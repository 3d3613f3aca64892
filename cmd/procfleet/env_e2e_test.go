package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/procfleet/procfleet/reconciler"
)

// writeEnvFleet writes three servers of f's test binary that read env
// files: uses takes KEY from .env, overrides reads .env but sets KEY
// itself, elsewhere reads other.env.
func writeEnvFleet(t *testing.T, f *e2eFleet) {
	t.Helper()
	var b strings.Builder
	for i, s := range []struct{ name, body string }{
		{"uses", "  envFile: [.env]\n"},
		{"overrides", "  envFile: [.env]\n  env: [{name: KEY, value: val-mine}]\n"},
		{"elsewhere", "  envFile: [other.env]\n"},
	} {
		if i > 0 {
			b.WriteString("---\n")
		}
		fmt.Fprintf(&b, "apiVersion: procfleet.dev/v1alpha1\nkind: Server\nmetadata: {name: %s}\nspec:\n  command: [%q, -port, \"%d\", -stamp, %q]\n  port: %d\n%s",
			s.name, f.server, f.ports[s.name], f.stamp(s.name), f.ports[s.name], s.body)
	}
	if err := os.WriteFile(f.file, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

func writeEnv(t *testing.T, f *e2eFleet, name, data string) {
	t.Helper()
	tmp := filepath.Join(f.dir, "."+name+".tmp")
	if err := os.WriteFile(tmp, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(f.dir, name)); err != nil {
		t.Fatal(err)
	}
}

// TestEnvFileEdit: editing one key of .env shows in diff as that
// variable, by name, for exactly the server that takes it from there
// (values never printed); through up, the edit replaces that server only.
func TestEnvFileEdit(t *testing.T) {
	const secret = "s3cr3t-value"
	f := newE2EFleet(t, "uses", "overrides", "elsewhere")
	writeEnvFleet(t, f)
	writeEnv(t, f, ".env", "KEY=val-one\nTOKEN="+secret+"\n")
	writeEnv(t, f, "other.env", "KEY=val-one\n")
	if code, out := f.cmd("apply", "--wait", "-f", f.file); code != 0 {
		t.Fatalf("apply: exit %d\n%s", code, out)
	}
	if code, out, errOut := f.run("diff", "-f", f.file); code != 0 {
		t.Fatalf("diff after apply: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut := f.run("describe", "overrides", "-f", f.file)
	for _, want := range []string{
		"Environment (names and where each is set; values are never shown):",
		"  TOKEN             " + filepath.Join(f.dir, ".env") + ":2 (spec.envFile[0])",
		"  KEY               spec.env[0] (" + f.file + ":",
		"  PORT              procfleet (spec.port)",
		"  PROCFLEET_SERVER  procfleet (metadata.name)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("describe overrides: no %q in:\n%s%s", want, out, errOut)
		}
	}
	for _, v := range []string{"val-mine", "val-one", secret} {
		if strings.Contains(out, v) {
			t.Errorf("describe printed the value %q:\n%s", v, out)
		}
	}
	if code != 0 {
		t.Errorf("describe: exit %d", code)
	}

	writeEnv(t, f, ".env", "KEY=val-two\nTOKEN="+secret+"\n")
	code, out, errOut = f.run("diff", "-f", f.file)
	if code != 2 || !strings.Contains(out, "~ uses: replace: spec changed: env KEY (pid ") || !strings.Contains(out, "    env KEY: changed (value not shown)") {
		t.Errorf("diff after editing KEY: exit %d\n%s%s", code, out, errOut)
	}
	if strings.Contains(out, "overrides") || strings.Contains(out, "elsewhere") {
		t.Errorf("diff names servers that do not take KEY from .env:\n%s", out)
	}
	for _, v := range []string{"val-one", "val-two", secret} {
		if strings.Contains(out, v) {
			t.Errorf("diff printed the value %q:\n%s", v, out)
		}
	}
	code, out, _ = f.run("diff", "-f", f.file, "-o", "json")
	var rep diffReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil || code != 2 {
		t.Fatalf("diff -o json: exit %d, %v\n%s", code, err, out)
	}
	if len(rep.Changes) != 1 || rep.Changes[0].Name != "uses" || len(rep.Changes[0].Fields) != 1 || rep.Changes[0].Fields[0].Var != "KEY" || !rep.Changes[0].Fields[0].Restart || rep.InSync != 2 {
		t.Errorf("diff -o json = %s", out)
	}

	// Through up: only uses is replaced.
	writeEnv(t, f, ".env", "KEY=val-one\nTOKEN="+secret+"\n")
	_, log := f.up()
	waitLog(t, log, "uses: adopted pid", "overrides: adopted pid", "elsewhere: adopted pid")
	before := f.waitStatus("adopted", readyWith("uses", "overrides", "elsewhere"))
	writeEnv(t, f, ".env", "KEY=val-three\nTOKEN="+secret+"\n")
	after := f.waitStatus("uses replaced", func(st reconciler.Status) bool {
		return readyWith("uses")(st) && pidIn(st, "uses") != pidIn(before, "uses")
	})
	for _, n := range []string{"overrides", "elsewhere"} {
		if pidIn(after, n) != pidIn(before, n) || len(f.starts(n)) != 1 {
			t.Errorf("%s was replaced by an edit of a key it does not take (pid %d -> %d, %d starts)", n, pidIn(before, n), pidIn(after, n), len(f.starts(n)))
		}
	}
	if code, out, errOut := f.run("diff", "-f", f.file); code != 0 {
		t.Errorf("diff under up after the edit was applied: exit %d\n%s%s", code, out, errOut)
	}
}
