package spec

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func names(f *Fleet) []string {
	var out []string
	for _, s := range f.Servers {
		out = append(out, s.Metadata.Name)
	}
	return out
}

func TestLoadMultiDocumentAndFolder(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"b.yaml":      "---\n" + server("web", "  workingDir: sub\n") + "---\n# only a comment\n---\n" + server("api", "  port: 8080\n"),
		"a.yml":       server("db", ""),
		"c.yaml.orig": server("ignored", ""),
		".#b.yaml":    server("hidden", ""),
		"notes.txt":   "not yaml",
	})
	if err := os.Mkdir(filepath.Join(dir, "nested.yaml"), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := names(f), []string{"api", "db", "web"}; !slices.Equal(got, want) {
		t.Errorf("servers = %v, want %v", got, want)
	}
	if want := []string{filepath.Join(dir, "a.yml"), filepath.Join(dir, "b.yaml")}; !slices.Equal(f.Files, want) {
		t.Errorf("files = %v, want %v", f.Files, want)
	}
	api, ok := f.Get("api")
	if !ok {
		t.Fatal("Get(api) not found")
	}
	if api.Source.File != filepath.Join(dir, "b.yaml") || api.Source.Line != 12 || api.Source.Doc != 2 {
		t.Errorf("api source = %+v, want b.yaml line 12 doc 2", api.Source)
	}
	if _, ok := f.Get("nope"); ok {
		t.Error("Get(nope) found")
	}
	web, _ := f.Get("web")
	if web.Spec.WorkingDir != filepath.Join(dir, "sub") {
		t.Errorf("web workingDir = %q, want %q", web.Spec.WorkingDir, filepath.Join(dir, "sub"))
	}
	if api.Spec.WorkingDir != dir {
		t.Errorf("api workingDir = %q, want the file's folder %q", api.Spec.WorkingDir, dir)
	}
}

func TestLoadSeveralPathsAndSymlink(t *testing.T) {
	real := writeFiles(t, map[string]string{"real.yaml": server("api", "  workingDir: ./w\n")})
	other := writeFiles(t, map[string]string{"procfleet.yaml": server("db", "")})
	link := filepath.Join(other, "link.yaml")
	if err := os.Symlink(filepath.Join(real, "real.yaml"), link); err != nil {
		t.Fatal(err)
	}
	// The folder holds the link; the link is also given directly: read once.
	f, err := Load(other, link)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := names(f), []string{"api", "db"}; !slices.Equal(got, want) {
		t.Errorf("servers = %v, want %v", got, want)
	}
	if len(f.Files) != 2 {
		t.Errorf("files = %v, want 2", f.Files)
	}
	api, _ := f.Get("api")
	if want := filepath.Join(other, "w"); api.Spec.WorkingDir != want {
		t.Errorf("workingDir = %q, want %q (relative to the link's folder)", api.Spec.WorkingDir, want)
	}
}

func TestLoadErrors(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.yaml")
	_, err := Load(missing)
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Load(missing) = %v, want fs.ErrNotExist", err)
	}
	if err == nil || !strings.HasPrefix(err.Error(), missing+": ") {
		t.Errorf("error %q does not start with the file name", err)
	}

	dangling := filepath.Join(dir, "dangling.yaml")
	if err := os.Symlink(missing, dangling); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Load(folder with dangling link) = %v, want fs.ErrNotExist", err)
	}

	big := filepath.Join(t.TempDir(), "big.yaml")
	if err := os.WriteFile(big, []byte(strings.Repeat("#", MaxFileSize+1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(big); err == nil || !strings.Contains(err.Error(), "larger than 4194304 bytes") {
		t.Errorf("Load(big) = %v, want too large", err)
	}
	if _, err := LoadBytes("x.yaml", make([]byte, MaxFileSize+1)); err == nil {
		t.Error("LoadBytes(too large) succeeded")
	}
}

func TestLoadDefaultFile(t *testing.T) {
	dir := writeFiles(t, map[string]string{DefaultFile: server("api", "")})
	t.Chdir(dir)
	f, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	if got := names(f); !slices.Equal(got, []string{"api"}) {
		t.Errorf("servers = %v", got)
	}
}

func TestEmptyFolderAndEmptyFile(t *testing.T) {
	dir := writeFiles(t, map[string]string{"empty.yaml": "", "comments.yaml": "# nothing\n---\n---\n"})
	f, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Servers) != 0 || len(f.Files) != 2 {
		t.Errorf("got %d servers from %v, want none from 2 files", len(f.Servers), f.Files)
	}
}

func TestDefaults(t *testing.T) {
	servers, err := LoadBytes("/srv/app/procfleet.yaml", []byte(server("api", `  port: 8080
  readinessProbe:
    httpGet: {}
  livenessProbe:
    tcpSocket: {}
    failureThreshold: 5
`)))
	if err != nil {
		t.Fatal(err)
	}
	sp := servers[0].Spec
	if sp.RestartPolicy != RestartAlways {
		t.Errorf("restartPolicy = %q", sp.RestartPolicy)
	}
	if sp.StartupTimeout() != 300*time.Second || sp.TerminationGracePeriod() != 20*time.Second || sp.KillTimeout() != 10*time.Second {
		t.Errorf("timeouts = %v %v %v", sp.StartupTimeout(), sp.TerminationGracePeriod(), sp.KillTimeout())
	}
	if *sp.StartupTimeoutSeconds != 300 || *sp.TerminationGracePeriodSeconds != 20 || *sp.KillTimeoutSeconds != 10 {
		t.Errorf("timeout fields not set")
	}
	r := sp.ReadinessProbe
	if r.HTTPGet.Port != 0 || r.HTTPGet.Path != "/" || r.PeriodSeconds != 1 || r.TimeoutSeconds != 1 || r.FailureThreshold != 3 || r.SuccessThreshold != 1 {
		t.Errorf("readiness probe = %+v %+v", r, r.HTTPGet)
	}
	if r.Period() != time.Second || r.Timeout() != time.Second || r.InitialDelay() != 0 {
		t.Errorf("probe durations = %v %v %v", r.Period(), r.Timeout(), r.InitialDelay())
	}
	l := sp.LivenessProbe
	if l.TCPSocket.Port != 0 || l.FailureThreshold != 5 {
		t.Errorf("liveness probe = %+v %+v", l, l.TCPSocket)
	}
	// A probe port left out is the instance's port, resolved per instance.
	in := servers[0].instance(-1, nil)
	if in.Readiness.HTTPGet.Port != 8080 || in.Liveness.TCPSocket.Port != 8080 {
		t.Errorf("instance probes = %+v %+v, want port 8080", in.Readiness.HTTPGet, in.Liveness.TCPSocket)
	}
	if sp.ReadinessProbe.HTTPGet.Port != 0 {
		t.Errorf("resolving the instance changed the declared probe")
	}
	if sp.WorkingDir != "/srv/app" {
		t.Errorf("workingDir = %q", sp.WorkingDir)
	}
	if sp.EffectiveReadiness() != r {
		t.Errorf("EffectiveReadiness is not the declared probe")
	}
	if sp.MinReady() != 0 || in.MinReady != 0 {
		t.Errorf("MinReady with a probe = %v, want 0", sp.MinReady())
	}
}

func TestEffectiveReadinessAndArgv(t *testing.T) {
	sp := ServerSpec{Command: []string{"a", "b"}, Args: []string{"c"}, Port: 9000}
	p := sp.EffectiveReadiness()
	if p == nil || p.TCPSocket == nil || p.TCPSocket.Port != 9000 || p.Period() != time.Second || p.FailureThreshold != 3 {
		t.Errorf("EffectiveReadiness = %+v", p)
	}
	sp.Port = 0
	if p := sp.EffectiveReadiness(); p != nil {
		t.Errorf("EffectiveReadiness without port = %+v, want nil", p)
	}
	argv := sp.Argv()
	if !slices.Equal(argv, []string{"a", "b", "c"}) {
		t.Errorf("Argv = %v", argv)
	}
	argv[0] = "z"
	if sp.Command[0] != "a" {
		t.Error("Argv shares memory with Command")
	}
}

func TestYAMLFeatures(t *testing.T) {
	data := header + `metadata: {name: api}
spec:
  command: [./api]
  env: &env
  - {name: A, value: "1"}
  readinessProbe: &probe
    tcpSocket: {port: 81}
    <<: {periodSeconds: 5, timeoutSeconds: 2}
  livenessProbe: *probe
---
` + header + `metadata: {name: db}
spec:
  command: [./db]
  env: *env
`
	servers, err := LoadBytes("a.yaml", []byte(data))
	if err != nil {
		t.Fatal(err)
	}
	if len(servers) != 2 || servers[1].Spec.Env[0].Value != "1" {
		t.Fatalf("aliases not followed: %+v", servers)
	}
	if p := servers[0].Spec.LivenessProbe; p.PeriodSeconds != 5 || p.TimeoutSeconds != 2 || p.TCPSocket.Port != 81 {
		t.Errorf("merge key not applied: %+v", p)
	}
}

// TestAliasBomb checks that alias fan-out is bounded: the merge keys below
// would visit 10^9 mappings.
func TestAliasBomb(t *testing.T) {
	var b strings.Builder
	b.WriteString("m0: &m0 {name: a, value: b}\n")
	for i := 1; i <= 9; i++ {
		fmt.Fprintf(&b, "m%d: &m%d {<<: [%s]}\n", i, i, strings.TrimSuffix(strings.Repeat(fmt.Sprintf("*m%d, ", i-1), 10), ", "))
	}
	data := header + "x:\n" + indent(b.String()) + "metadata: {name: a}\nspec:\n  command: [x]\n  env: [*m9]\n"
	_, err := LoadBytes("bomb.yaml", []byte(data))
	if err == nil || !strings.Contains(err.Error(), "document too complex") {
		t.Fatalf("got %v, want document too complex", err)
	}
}

func indent(s string) string {
	return "  " + strings.ReplaceAll(strings.TrimSuffix(s, "\n"), "\n", "\n  ") + "\n"
}

// TestSelfMerge checks that a mapping merging itself is an error, not an
// endless recursion.
func TestSelfMerge(t *testing.T) {
	data := header + "metadata: {name: a}\nspec:\n  command: [x]\n  readinessProbe: &p {<<: *p, periodSeconds: 2}\n"
	_, err := LoadBytes("a.yaml", []byte(data))
	if err == nil || !strings.Contains(err.Error(), "a.yaml:6: spec.readinessProbe: merge key (<<) refers to a mapping that contains it") {
		t.Fatalf("got %v, want a self-merge error", err)
	}
}

// BenchmarkLoad measures loading a folder of 1,000 servers in 10 files.
func BenchmarkLoad(b *testing.B) {
	files := map[string]string{}
	for f := range 10 {
		var sb strings.Builder
		for i := range 100 {
			fmt.Fprintf(&sb, "%smetadata: {name: s%d-%d, labels: {tier: web}}\nspec:\n  command: [./bin/server]\n  args: [--port, \"%d\"]\n  env: [{name: A, value: b}]\n  port: %d\n  readinessProbe:\n    httpGet: {path: /health}\n---\n", header, f, i, 10000+f*100+i, 10000+f*100+i)
		}
		files[fmt.Sprintf("f%d.yaml", f)] = sb.String()
	}
	dir := b.TempDir()
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		f, err := Load(dir)
		if err != nil || len(f.Servers) != 1000 {
			b.Fatal(err)
		}
	}
}

// TestLoadFileRemovedAfterListing: a file of a fleet folder removed
// between the folder's listing and its read (an editor that deletes and
// re-creates it) is no longer in the folder, not an error; a file named on
// its own that is gone is. The hook stands for the race, which no test can
// time between two system calls.
func TestLoadFileRemovedAfterListing(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"a.yaml": server("a", ""),
		"b.yaml": server("b", ""),
	})
	b := filepath.Join(dir, "b.yaml")
	removeB := func() {
		if err := os.Remove(b); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { testHookListed = nil })

	testHookListed = removeB
	f, err := Load(dir)
	if err != nil {
		t.Fatalf("Load(folder) with b.yaml removed after the listing: %v", err)
	}
	if len(f.Servers) != 1 || f.Servers[0].Metadata.Name != "a" {
		t.Errorf("Load(folder) = %d servers, want a alone", len(f.Servers))
	}

	if err := os.WriteFile(b, []byte(server("b", "")), 0o644); err != nil {
		t.Fatal(err)
	}
	testHookListed = removeB
	_, err = Load(filepath.Join(dir, "a.yaml"), b)
	var list ErrorList
	if !errors.As(err, &list) || len(list) != 1 || list[0].File != b || !strings.Contains(list[0].Message, "no such file") {
		t.Errorf("Load(a.yaml, b.yaml) with b.yaml removed = %v, want one error naming %s", err, b)
	}
}
