package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/procfleet/procfleet/export"
)

const exportFleet = `apiVersion: procfleet.dev/v1alpha1
kind: Server
metadata: {name: backend}
spec:
  command: [./bin/backend, -port, "18081"]
  port: 18081
  readinessProbe:
    httpGet: {path: /health}
---
apiVersion: procfleet.dev/v1alpha1
kind: Server
metadata: {name: api, labels: {procfleet.dev/image: "ghcr.io/acme/api:2"}}
spec:
  command: [./bin/api, -port, "18082"]
  port: 18082
  dependsOn: [backend]
`

// writeExportFleet writes the fleet into <tmp>/My Shop/procfleet.yaml and
// returns the file's path.
func writeExportFleet(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "My Shop")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "procfleet.yaml")
	if err := os.WriteFile(p, []byte(exportFleet), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestExportCommand(t *testing.T) {
	file := writeExportFleet(t)
	dir := filepath.Dir(file)
	tests := []struct {
		name       string
		args       []string
		code       int
		stdout     []string // substrings
		stderr     []string
		notStdout  []string
		wantStdout func(t *testing.T, stdout string)
	}{
		{
			name: "systemd to stdout",
			args: []string{"export", "--to", "systemd", "-f", file},
			stdout: []string{
				"# ==> my-shop-api.service <==\n",
				"# ==> my-shop-backend.service <==\n",
				"# ==> my-shop.target <==\n",
				"ExecStart=\"" + dir + "/bin/api\" -port 18082\n",
				"Requires=my-shop-backend.service\n",
			},
			stderr: []string{"warning: api: spec.dependsOn: systemd starts api once backend has been executed"},
		},
		{
			name:   "kubernetes without an image for every server",
			args:   []string{"export", "--to", "kubernetes", "-f", file},
			code:   1,
			stderr: []string{"no container image for backend", "--image"},
		},
		{
			name:   "kubernetes with a per-server image",
			args:   []string{"export", "--to", "kubernetes", "-f", file, "--image", "backend=ghcr.io/acme/backend:1", "--name", "shop"},
			stdout: []string{"---\n# Source: api.yaml\n", "image: ghcr.io/acme/api:2\n", "image: ghcr.io/acme/backend:1\n", "app.kubernetes.io/part-of: shop\n", "kind: Service\n"},
			stderr: []string{"warning: api: spec.dependsOn: init containers wait until the Service backend:18081 accepts TCP"},
		},
		{
			name: "nomad",
			args: []string{"export", "--to", "nomad", "-f", dir, "--name", "shop"},
			wantStdout: func(t *testing.T, stdout string) {
				var body struct {
					Job struct {
						ID         string
						TaskGroups []struct{ Name string }
					}
				}
				if err := json.Unmarshal([]byte(stdout), &body); err != nil {
					t.Fatalf("stdout is not JSON: %v\n%s", err, stdout)
				}
				if body.Job.ID != "shop" || len(body.Job.TaskGroups) != 2 {
					t.Errorf("job = %+v, want ID shop with 2 groups", body.Job)
				}
			},
			stderr: []string{"warning: api: spec.dependsOn: Nomad starts the groups"},
		},
		{
			name:   "image flag for another target",
			args:   []string{"export", "--to", "systemd", "-f", file, "--image", "x:1"},
			stdout: []string{"# ==> my-shop.target <==\n"},
			stderr: []string{"warning: --image and --wait-image apply to --to kubernetes only; ignored"},
		},
		{name: "unknown target", args: []string{"export", "--to", "swarm", "-f", file}, code: 1, stderr: []string{`unknown export target "swarm"`}},
		{name: "no target", args: []string{"export", "-f", file}, code: 1, stderr: []string{`"to" not set`}},
		{name: "two default images", args: []string{"export", "--to", "kubernetes", "-f", file, "--image", "a:1", "--image", "b:1"}, code: 1, stderr: []string{"already a:1"}},
		{name: "bad name", args: []string{"export", "--to", "nomad", "-f", file, "--name", "Shop!"}, code: 1, stderr: []string{"not a DNS label"}},
		{name: "missing file", args: []string{"export", "--to", "nomad", "-f", filepath.Join(dir, "nope.yaml")}, code: 1, stderr: []string{"nope.yaml", "nothing exported"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := procfleet(t, tt.args...)
			if r.code != tt.code {
				t.Fatalf("exit code %d, want %d\nstdout:\n%s\nstderr:\n%s", r.code, tt.code, r.stdout, r.stderr)
			}
			for _, s := range tt.stdout {
				if !strings.Contains(r.stdout, s) {
					t.Errorf("stdout lacks %q:\n%s", s, r.stdout)
				}
			}
			for _, s := range tt.stderr {
				if !strings.Contains(r.stderr, s) {
					t.Errorf("stderr lacks %q:\n%s", s, r.stderr)
				}
			}
			if tt.code != 0 && r.stdout != "" {
				t.Errorf("failed, yet wrote to stdout:\n%s", r.stdout)
			}
			if tt.wantStdout != nil {
				tt.wantStdout(t, r.stdout)
			}
		})
	}
}

// TestExportOutputDir: -o writes one file per output file, lists the
// paths on stdout, and keeps the warnings on stderr.
func TestExportOutputDir(t *testing.T) {
	file := writeExportFleet(t)
	out := filepath.Join(t.TempDir(), "units", "nested")
	r := procfleet(t, "export", "--to", "systemd", "-f", file, "-o", out)
	if r.code != 0 {
		t.Fatalf("exit code %d\n%s", r.code, r.stderr)
	}
	want := []string{"my-shop-api.service", "my-shop-backend.service", "my-shop.target"}
	var listed []string
	for _, w := range want {
		listed = append(listed, filepath.Join(out, w))
		data, err := os.ReadFile(filepath.Join(out, w))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(string(data), "# Generated by procfleet export") {
			t.Errorf("%s: unexpected contents:\n%s", w, data)
		}
	}
	if diff := cmp.Diff(strings.Join(listed, "\n")+"\n", r.stdout); diff != "" {
		t.Errorf("stdout (-want +got):\n%s", diff)
	}
	if !strings.Contains(r.stderr, "warning: ") {
		t.Errorf("no warnings on stderr:\n%s", r.stderr)
	}
}

func TestParseImages(t *testing.T) {
	tests := []struct {
		in      []string
		want    export.Options
		wantErr string
	}{
		{in: nil, want: export.Options{}},
		{in: []string{"ghcr.io/acme/x:1"}, want: export.Options{Image: "ghcr.io/acme/x:1"}},
		{in: []string{"api=a:1", "web=localhost:5000/w@sha256:abc", "d:1"}, want: export.Options{Image: "d:1", Images: map[string]string{"api": "a:1", "web": "localhost:5000/w@sha256:abc"}}},
		{in: []string{"d:1", "d:1"}, want: export.Options{Image: "d:1"}},
		{in: []string{"=a:1"}, wantErr: "want IMAGE or NAME=IMAGE"},
		{in: []string{"api="}, wantErr: "want IMAGE or NAME=IMAGE"},
		{in: []string{""}, wantErr: "want IMAGE or NAME=IMAGE"},
		{in: []string{"api=a:1", "api=a:2"}, wantErr: "api already has the image a:1"},
		{in: []string{"a:1", "b:1"}, wantErr: "already a:1"},
	}
	for _, tt := range tests {
		var got export.Options
		err := parseImages(tt.in, &got)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("parseImages(%q) error = %v, want %q", tt.in, err, tt.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("parseImages(%q): %v", tt.in, err)
			continue
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("parseImages(%q) (-want +got):\n%s", tt.in, diff)
		}
	}
}

func TestDefaultFleetName(t *testing.T) {
	file := writeExportFleet(t)
	if got := defaultFleetName(file); got != "my-shop" {
		t.Errorf("defaultFleetName(file) = %q, want my-shop", got)
	}
	if got := defaultFleetName(filepath.Dir(file)); got != "my-shop" {
		t.Errorf("defaultFleetName(folder) = %q, want my-shop", got)
	}
}
