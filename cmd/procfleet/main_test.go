package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/procfleet/procfleet/spec"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata and examples/schema")

// result is what one procfleet invocation produced.
type result struct {
	code           int
	stdout, stderr string
}

// procfleet runs the command tree in-process with args, as main would, with
// a bounded context.
func procfleet(t *testing.T, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	code := run(ctx, args, &stdout, &stderr)
	return result{code: code, stdout: stdout.String(), stderr: stderr.String()}
}

// golden compares got with testdata/name, or rewrites it under -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	goldenFile(t, filepath.Join("testdata", name), got)
}

func goldenFile(t *testing.T, path, got string) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden file (run go test -update to create it): %v", err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("%s differs (-want +got; go test -update rewrites it):\n%s", path, diff)
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		wantCode int
		golden   string
	}{
		{"good text", []string{"validate", "-f", "testdata/good.yaml"}, 0, "validate-good.txt"},
		{"good json", []string{"validate", "-f", "testdata/good.yaml", "-o", "json"}, 0, "validate-good.json"},
		{"good github", []string{"validate", "-f", "testdata/good.yaml", "-o", "github"}, 0, "validate-good.github"},
		{"bad text", []string{"validate", "-f", "testdata/bad.yaml"}, 1, "validate-bad.txt"},
		{"bad json", []string{"validate", "-f", "testdata/bad.yaml", "-o", "json"}, 1, "validate-bad.json"},
		{"bad github", []string{"validate", "--file", "testdata/bad.yaml", "-o", "github"}, 1, "validate-bad.github"},
		{"good and bad", []string{"validate", "-f", "testdata/good.yaml", "-f", "testdata/bad.yaml"}, 1, "validate-both.txt"},
		{"missing file", []string{"validate", "-f", "testdata/no-such-file.yaml"}, 1, "validate-missing.txt"},
		// Warnings (an unresolved $(NAME), a ${NAME} nothing expands, an
		// env file value taken literally, a program not in $PATH) are
		// printed in every format and fail only with --strict.
		{"warnings text", []string{"validate", "-f", "testdata/warn.yaml"}, 0, "validate-warn.txt"},
		{"warnings json", []string{"validate", "-f", "testdata/warn.yaml", "-o", "json"}, 0, "validate-warn.json"},
		{"warnings github", []string{"validate", "-f", "testdata/warn.yaml", "-o", "github"}, 0, "validate-warn.github"},
		{"warnings strict", []string{"validate", "-f", "testdata/warn.yaml", "--strict"}, 1, "validate-warn-strict.txt"},
		{"warnings strict github", []string{"validate", "-f", "testdata/warn.yaml", "--strict", "-o", "github"}, 1, "validate-warn-strict.github"},
		{"strict without warnings", []string{"validate", "-f", "testdata/good.yaml", "--strict"}, 0, "validate-good.txt"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := procfleet(t, tt.args...)
			if r.code != tt.wantCode {
				t.Errorf("exit code = %d, want %d; stderr:\n%s", r.code, tt.wantCode, r.stderr)
			}
			if r.stderr != "" {
				t.Errorf("stderr = %q, want nothing (the report goes to stdout)", r.stderr)
			}
			golden(t, tt.golden, r.stdout)
		})
	}
}

func TestValidateJSONShape(t *testing.T) {
	r := procfleet(t, "validate", "-f", "testdata/bad.yaml", "-o", "json")
	var got []validationError
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
		t.Fatalf("validate -o json is not a JSON array of errors: %v\n%s", err, r.stdout)
	}
	if len(got) < 3 {
		t.Fatalf("got %d errors, want every error of bad.yaml (at least 3): %+v", len(got), got)
	}
	for _, e := range got {
		if e.File != "testdata/bad.yaml" || e.Message == "" {
			t.Errorf("error %+v: want file testdata/bad.yaml and a message", e)
		}
	}
}

func TestValidateDefaultFile(t *testing.T) {
	dir := t.TempDir()
	good, err := os.ReadFile("testdata/good.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "procfleet.yaml"), good, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.CopyFS(filepath.Join(dir, "bin"), os.DirFS("testdata/bin")); err != nil {
		t.Fatal(err) // the programs good.yaml names, so it validates without warnings
	}
	t.Chdir(dir)
	r := procfleet(t, "validate")
	if r.code != 0 || r.stdout != "2 servers OK (1 file)\n" {
		t.Errorf("validate without -f in a folder with procfleet.yaml: code %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
}

func TestQuickstartValidates(t *testing.T) {
	r := procfleet(t, "validate", "-f", "../../examples/quickstart")
	// The binaries are built by run.sh, not here: their absence is a
	// warning, which does not fail validate.
	if r.code != 0 || !strings.Contains(r.stdout, "\n3 servers OK (1 file)") {
		t.Errorf("validate -f examples/quickstart: code %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
}

func TestGitHubAnnotationEscaping(t *testing.T) {
	r := procfleet(t, "validate", "-f", "testdata/bad.yaml", "-o", "github")
	for _, line := range strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n") {
		if !strings.HasPrefix(line, "::error file=testdata/bad.yaml") {
			t.Errorf("annotation %q: want ::error file=testdata/bad.yaml...", line)
		}
	}
	got := githubAnnotation(&spec.FieldError{File: "a,b:c.yaml", Line: 3, Field: "spec.port", Message: "100%\nbad"}, false)
	want := "::error file=a%2Cb%3Ac.yaml,line=3,title=spec.port::100%25%0Abad"
	if got != want {
		t.Errorf("githubAnnotation = %q, want %q", got, want)
	}
}

func TestSchema(t *testing.T) {
	r := procfleet(t, "schema")
	if r.code != 0 {
		t.Fatalf("schema: exit code %d, stderr %s", r.code, r.stderr)
	}
	var doc map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil {
		t.Fatalf("schema output is not a JSON object: %v", err)
	}
	if len(doc) == 0 {
		t.Fatal("schema output is an empty JSON object")
	}
	for _, word := range []string{"apiVersion", "metadata", "readinessProbe", "dependsOn"} {
		if !strings.Contains(r.stdout, `"`+word+`"`) {
			t.Errorf("schema does not mention %q", word)
		}
	}
}

// TestCheckedInSchema keeps examples/schema/server.schema.json, which the
// examples' yaml-language-server modelines point at, equal to `procfleet schema`.
func TestCheckedInSchema(t *testing.T) {
	b, err := schemaBytes()
	if err != nil {
		t.Fatal(err)
	}
	goldenFile(t, filepath.Join("..", "..", "examples", "schema", "server.schema.json"), string(b))
}

func TestVersion(t *testing.T) {
	r := procfleet(t, "version")
	if r.code != 0 {
		t.Fatalf("version: exit code %d, stderr %s", r.code, r.stderr)
	}
	for _, want := range []string{"procfleet ", runtime.Version(), runtime.GOOS + "/" + runtime.GOARCH} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("version output %q does not contain %q", r.stdout, want)
		}
	}

	r = procfleet(t, "version", "-o", "json")
	var info buildInfo
	if err := json.Unmarshal([]byte(r.stdout), &info); err != nil || r.code != 0 {
		t.Fatalf("version -o json: code %d, %v: %s", r.code, err, r.stdout)
	}
	if info.GoVersion != runtime.Version() || info.Version == "" {
		t.Errorf("version -o json = %+v", info)
	}
}

func TestWriteVersion(t *testing.T) {
	info := buildInfo{
		Version:   "v1.2.3",
		GoVersion: "go1.26.8",
		Platform:  "linux/amd64",
		Revision:  "0123456789abcdef0123456789abcdef01234567",
		Time:      "2026-11-30T10:00:00Z",
		Modified:  true,
	}
	var text, js bytes.Buffer
	if err := writeVersion(&text, info, false); err != nil {
		t.Fatal(err)
	}
	if err := writeVersion(&js, info, true); err != nil {
		t.Fatal(err)
	}
	golden(t, "version.txt", text.String())
	golden(t, "version.json", js.String())

	var bare bytes.Buffer
	if err := writeVersion(&bare, buildInfo{Version: "(devel)", GoVersion: "go1.26.8", Platform: "darwin/arm64"}, false); err != nil {
		t.Fatal(err)
	}
	golden(t, "version-novcs.txt", bare.String())
}

func TestUsageErrors(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		wantStderr string
	}{
		{"unknown flag", []string{"validate", "--no-such-flag"}, "unknown flag: --no-such-flag"},
		{"unknown global flag", []string{"--bogus", "version"}, "unknown flag: --bogus"},
		{"unknown shorthand", []string{"schema", "-z"}, "unknown shorthand flag: 'z'"},
		{"unknown command", []string{"frobnicate"}, `unknown command "frobnicate"`},
		{"bad log format", []string{"--log-format", "xml", "version"}, `invalid --log-format "xml"`},
		{"bad validate output", []string{"validate", "-f", "testdata/good.yaml", "-o", "yaml"}, `invalid -o "yaml"`},
		{"stray argument", []string{"schema", "extra"}, `unknown command "extra"`},
		{"flag without value", []string{"validate", "-f"}, "flag needs an argument"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := procfleet(t, tt.args...)
			if r.code != 1 {
				t.Errorf("exit code = %d, want 1", r.code)
			}
			if !strings.Contains(r.stderr, tt.wantStderr) {
				t.Errorf("stderr = %q, want it to contain %q", r.stderr, tt.wantStderr)
			}
			if !strings.HasPrefix(r.stderr, "Error: ") || strings.Count(r.stderr, "Error: ") != 1 {
				t.Errorf("stderr = %q, want the error printed once, after \"Error: \"", r.stderr)
			}
		})
	}
}

func TestHelp(t *testing.T) {
	r := procfleet(t, "--help")
	if r.code != 0 {
		t.Fatalf("--help: exit code %d", r.code)
	}
	for _, want := range []string{"validate", "schema", "version", "--state-dir", "--log-format", "--verbose"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("--help does not mention %q:\n%s", want, r.stdout)
		}
	}
	root := newRootCmd(&globalOptions{})
	for _, c := range root.Commands() {
		if c.Name() == "completion" || c.Name() == "help" {
			continue
		}
		if strings.TrimSpace(c.Example) == "" {
			t.Errorf("command %q has no Example for --help", c.Name())
		}
		if c.Run != nil {
			t.Errorf("command %q uses Run; use RunE so errors reach the exit code", c.Name())
		}
	}
}

func TestExitCodeOf(t *testing.T) {
	tests := []struct {
		name       string
		err        error
		wantCode   int
		wantStderr string
	}{
		{"nil", nil, 0, ""},
		{"plain error", errString("boom"), 1, "Error: boom\n"},
		{"silent failure", silentExit(exitFailure), 1, ""},
		{"changes pending", silentExit(exitPending), 2, ""},
		{"coded error", &exitError{code: 2, err: errString("3 changes pending")}, 2, "Error: 3 changes pending\n"},
		{"wrapped coded error", wrap(&exitError{code: 2}), 2, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stderr bytes.Buffer
			if got := exitCodeOf(tt.err, &stderr); got != tt.wantCode {
				t.Errorf("exitCodeOf = %d, want %d", got, tt.wantCode)
			}
			if stderr.String() != tt.wantStderr {
				t.Errorf("stderr = %q, want %q", stderr.String(), tt.wantStderr)
			}
		})
	}
}

type errString string

func (e errString) Error() string { return string(e) }

type wrapped struct{ err error }

func (w wrapped) Error() string { return "wrapped: " + w.err.Error() }
func (w wrapped) Unwrap() error { return w.err }

func wrap(err error) error { return wrapped{err} }

// TestExampleModelines checks that every example fleet file starts with a
// yaml-language-server modeline pointing at the checked-in schema.
func TestExampleModelines(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "..", "examples", "*", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no example fleet files found: %v", err)
	}
	want, err := filepath.Abs(filepath.Join("..", "..", "examples", "schema", "server.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	const prefix = "# yaml-language-server: $schema="
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		first, _, _ := strings.Cut(string(b), "\n")
		ref, ok := strings.CutPrefix(first, prefix)
		if !ok {
			t.Errorf("%s: first line %q, want %s<path of examples/schema/server.schema.json>", f, first, prefix)
			continue
		}
		got, err := filepath.Abs(filepath.Join(filepath.Dir(f), filepath.FromSlash(ref)))
		if err != nil || got != want {
			t.Errorf("%s: modeline points at %s, want %s", f, got, want)
		}
	}
}

// TestQuickstartSessionInREADME: the README's quick-start session is
// testdata/quickstart-session.txt, byte for byte.
func TestQuickstartSessionInREADME(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile("testdata/quickstart-session.txt")
	if err != nil {
		t.Fatal(err)
	}
	const open = "```text\n$ ./examples/quickstart/run.sh"
	s := string(readme)
	i := strings.Index(s, open)
	if i < 0 {
		t.Fatal("README has no quick-start session block")
	}
	block := s[i+len("```text\n"):]
	block = block[:strings.Index(block, "```")]
	if block != string(want) {
		t.Errorf("README's quick-start session differs from testdata/quickstart-session.txt:\n%s", cmp.Diff(string(want), block))
	}
}
