package export

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/procfleet/procfleet/spec"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// fleets are the test fleets in testdata, each read as if from
// /srv/<name>/procfleet.yaml so that workingDir resolves to a fixed path.
var fleets = []string{"quickstart", "everything", "replicas", "edges"}

func loadFleet(t *testing.T, name string) []spec.Server {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name+".yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if env, err := os.ReadFile(filepath.Join("testdata", name+".env")); err == nil {
		return loadWithEnvFile(t, name, data, env)
	}
	servers, err := spec.LoadBytes("/srv/"+name+"/procfleet.yaml", data)
	if err != nil {
		t.Fatalf("load %s: %v", name, err)
	}
	if errs := spec.Validate(servers); len(errs) > 0 {
		t.Fatalf("validate %s: %v", name, errs)
	}
	return servers
}

// loadWithEnvFile loads the fleet through spec.Load, which reads env
// files, from a temporary copy with env as .env, then moves its paths to
// /srv/<name> as if it had been read there.
func loadWithEnvFile(t *testing.T, name string, data, env []byte) []spec.Server {
	t.Helper()
	dir := t.TempDir()
	for file, content := range map[string][]byte{"procfleet.yaml": data, ".env": env} {
		if err := os.WriteFile(filepath.Join(dir, file), content, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	f, err := spec.Load(filepath.Join(dir, "procfleet.yaml"))
	if err != nil {
		t.Fatalf("load %s: %v", name, err)
	}
	srv := "/srv/" + name
	for i := range f.Servers {
		s := &f.Servers[i]
		s.Spec.WorkingDir = filepath.Join(srv, strings.TrimPrefix(s.Spec.WorkingDir, dir))
		for j := range s.EnvFiles {
			s.EnvFiles[j].Path = filepath.Join(srv, s.Spec.EnvFile[j])
			s.EnvFiles[j].Name = s.Spec.EnvFile[j]
		}
	}
	return f.Servers
}

// server returns the server called name in servers.
func server(t *testing.T, servers []spec.Server, name string) *spec.Server {
	t.Helper()
	for i := range servers {
		if servers[i].Metadata.Name == name {
			return &servers[i]
		}
	}
	t.Fatalf("no server %q", name)
	return nil
}

func fleetOptions(name string) Options {
	o := Options{Name: name, Image: "registry.example.com/acme/" + name + ":1.0"}
	if name == "everything" {
		o.Images = map[string]string{"app": "registry.example.com/acme/app@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"}
	}
	return o
}

func export(t *testing.T, target Target, fleet string) *Result {
	t.Helper()
	res, err := Export(target, loadFleet(t, fleet), fleetOptions(fleet))
	if err != nil {
		t.Fatalf("Export(%s, %s): %v", target, fleet, err)
	}
	return res
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden file (go test -update creates it): %v", err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("%s differs (-want +got; go test -update rewrites it):\n%s", path, diff)
	}
}

func warningLines(ws []Warning) string {
	var b strings.Builder
	for _, w := range ws {
		b.WriteString(w.String())
		b.WriteByte('\n')
	}
	return b.String()
}

// TestGolden pins the output and the warnings of every target for each test
// fleet.
func TestGolden(t *testing.T) {
	for _, fleet := range fleets {
		for _, target := range Targets {
			t.Run(fleet+"/"+string(target), func(t *testing.T) {
				res := export(t, target, fleet)
				var out bytes.Buffer
				if _, err := res.WriteTo(&out); err != nil {
					t.Fatal(err)
				}
				golden(t, fleet+"."+string(target)+".golden", out.String())
				golden(t, fleet+"."+string(target)+".warnings", warningLines(res.Warnings))
			})
		}
	}
}

// TestWarningsNameServerAndField: every warning names a server of the fleet
// and a field path of the fleet file.
func TestWarningsNameServerAndField(t *testing.T) {
	for _, fleet := range fleets {
		names := map[string]bool{}
		for _, s := range loadFleet(t, fleet) {
			names[s.Metadata.Name] = true
		}
		for _, target := range Targets {
			res := export(t, target, fleet)
			if fleet == "everything" && len(res.Warnings) == 0 {
				t.Errorf("%s/%s: no warnings; the fleet uses fields no target maps exactly", fleet, target)
			}
			for _, w := range res.Warnings {
				if !names[w.Server] {
					t.Errorf("%s/%s: warning %q names no server of the fleet", fleet, target, w)
				}
				if !strings.HasPrefix(w.Field, "spec.") && !strings.HasPrefix(w.Field, "metadata.") {
					t.Errorf("%s/%s: warning %q names no field path", fleet, target, w)
				}
			}
		}
	}
}

func TestExportErrors(t *testing.T) {
	qs := func(t *testing.T) []spec.Server { return loadFleet(t, "quickstart") }
	tests := []struct {
		name    string
		target  Target
		servers func(t *testing.T) []spec.Server
		opts    Options
		want    string // substring of the error
		is      error
	}{
		{"no image", Kubernetes, qs, Options{}, "for api, backend, web: a process has no image", ErrNoImage},
		{"image for some only", Kubernetes, qs, Options{Images: map[string]string{"api": "a:1"}}, "for backend, web:", ErrNoImage},
		{"image for a stranger", Kubernetes, qs, Options{Image: "x:1", Images: map[string]string{"nope": "a:1"}}, `image for "nope": no such server`, nil},
		{"bad fleet name", Systemd, qs, Options{Name: "My Fleet"}, `fleet name "My Fleet" is not a DNS label`, nil},
		{"unknown target", Target("swarm"), qs, Options{}, `unknown target "swarm"`, nil},
		{"duplicate", Nomad, func(t *testing.T) []spec.Server { s := qs(t); return append(s, s[0]) }, Options{}, "duplicate server name", nil},
		{"newline in argv", Systemd, func(t *testing.T) []spec.Server {
			s := qs(t)
			api := server(t, s, "api")
			api.Spec.Args = append(api.Spec.Args, "two\nlines")
			return s
		}, Options{}, `spec.args[4]: "two\nlines": control character U+000A`, errControl},
		{"relative command without workingDir", Systemd, func(t *testing.T) []spec.Server {
			s := qs(t)
			server(t, s, "api").Spec.WorkingDir = ""
			return s
		}, Options{}, `spec.command[0]: "./bin/api" is relative and spec.workingDir is not an absolute path`, nil},
		{"env files not read", Nomad, func(t *testing.T) []spec.Server {
			s := qs(t)
			server(t, s, "api").Spec.EnvFile = []string{".env"}
			return s
		}, Options{}, "api: spec.envFile: the env files were not read (load the fleet with spec.Load)", nil},
		{"service name starting with a digit", Kubernetes, func(t *testing.T) []spec.Server {
			s := qs(t)
			server(t, s, "backend").Metadata.Name = "1backend"
			server(t, s, "api").Spec.DependsOn = nil
			return s
		}, Options{Image: "x:1"}, "not usable as a Service name", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := Export(tt.target, tt.servers(t), tt.opts)
			if err == nil {
				t.Fatalf("Export = %d files, want an error containing %q", len(res.Files), tt.want)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error = %q, want it to contain %q", err, tt.want)
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("error %q does not wrap %v", err, tt.is)
			}
		})
	}
}

// TestImagePrecedence: --image NAME=IMAGE beats the procfleet.dev/image
// label, which beats --image IMAGE.
func TestImagePrecedence(t *testing.T) {
	servers := loadFleet(t, "quickstart")
	server(t, servers, "api").Metadata.Labels[ImageLabel] = "from-label:1"
	server(t, servers, "backend").Metadata.Labels[ImageLabel] = "from-label:2"
	res, err := Export(Kubernetes, servers, Options{Image: "default:1", Images: map[string]string{"backend": "from-flag:2"}})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"api.yaml": "from-label:1", "backend.yaml": "from-flag:2", "web.yaml": "default:1"}
	for _, f := range res.Files {
		if img := want[f.Name]; !strings.Contains(string(f.Data), "image: "+img+"\n") {
			t.Errorf("%s: want image %s in:\n%s", f.Name, img, f.Data)
		}
		if strings.Contains(string(f.Data), ImageLabel) {
			t.Errorf("%s: the image label is copied into the manifest:\n%s", f.Name, f.Data)
		}
	}
}

func TestWriteTo(t *testing.T) {
	one := &Result{Target: Nomad, Files: []File{{Name: "a.json", Data: []byte("{}\n")}}}
	k8s := &Result{Target: Kubernetes, Files: []File{{Name: "a.yaml", Data: []byte("kind: A\n")}, {Name: "b.yaml", Data: []byte("kind: B\n")}}}
	units := &Result{Target: Systemd, Files: []File{{Name: "f-a.service", Data: []byte("[Unit]\n")}, {Name: "f.target", Data: []byte("[Unit]\n")}}}
	tests := []struct {
		r    *Result
		want string
	}{
		{one, "{}\n"},
		{k8s, "---\n# Source: a.yaml\nkind: A\n---\n# Source: b.yaml\nkind: B\n"},
		{units, "# ==> f-a.service <==\n[Unit]\n\n# ==> f.target <==\n[Unit]\n"},
	}
	for _, tt := range tests {
		var b bytes.Buffer
		if _, err := tt.r.WriteTo(&b); err != nil {
			t.Fatal(err)
		}
		if b.String() != tt.want {
			t.Errorf("%s: WriteTo = %q, want %q", tt.r.Target, b.String(), tt.want)
		}
	}
}

func TestSanitizeName(t *testing.T) {
	tests := map[string]string{
		"quickstart":            "quickstart",
		"My Project_2":          "my-project-2",
		"--x--":                 "x",
		"":                      DefaultFleetName,
		"///":                   DefaultFleetName,
		strings.Repeat("a", 70): strings.Repeat("a", 63),
	}
	for in, want := range tests {
		if got := SanitizeName(in); got != want {
			t.Errorf("SanitizeName(%q) = %q, want %q", in, got, want)
		}
		if err := validateName(SanitizeName(in)); err != nil {
			t.Errorf("SanitizeName(%q) is not a valid name: %v", in, err)
		}
	}
}

func TestParseTarget(t *testing.T) {
	for _, target := range Targets {
		if got, err := ParseTarget(string(target)); err != nil || got != target {
			t.Errorf("ParseTarget(%q) = %q, %v", target, got, err)
		}
	}
	if _, err := ParseTarget("k8s"); err == nil || !strings.Contains(err.Error(), "kubernetes, nomad, systemd") {
		t.Errorf("ParseTarget(k8s) error = %v, want one listing the targets", err)
	}
}
