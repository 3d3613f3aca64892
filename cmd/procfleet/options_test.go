package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestStateDirPath(t *testing.T) {
	tmp := t.TempDir()
	fleetDir := filepath.Join(tmp, "fleet")
	if err := os.Mkdir(fleetDir, 0o755); err != nil {
		t.Fatal(err)
	}
	fleetFile := filepath.Join(tmp, "a", "procfleet.yaml")
	if err := os.MkdirAll(filepath.Dir(fleetFile), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(fleetFile, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Chdir(tmp)

	tests := []struct {
		name     string
		stateDir string
		files    []string
		env      string
		wantPath string
	}{
		{"flag wins", "/flag", []string{fleetFile}, "/env", "/flag"},
		{"env next", "", []string{fleetFile}, "/env", "/env"},
		{"relative flag is made absolute", "rel", nil, "", filepath.Join(tmp, "rel")},
		{"folder of the first file", "", []string{fleetFile, fleetDir}, "", filepath.Join(tmp, "a", ".procfleet")},
		{"first -f is a folder", "", []string{"fleet", fleetFile}, "", filepath.Join(fleetDir, ".procfleet")},
		{"missing file: its folder", "", []string{"b/none.yaml"}, "", filepath.Join(tmp, "b", ".procfleet")},
		{"default procfleet.yaml", "", nil, "", filepath.Join(tmp, ".procfleet")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := &globalOptions{StateDir: tt.stateDir, Files: tt.files}
			opts.getenv = func(k string) string {
				if k == stateDirEnv {
					return tt.env
				}
				return ""
			}
			got, err := opts.StateDirPath()
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.wantPath {
				t.Errorf("StateDirPath() = %q, want %q", got, tt.wantPath)
			}
		})
	}
}

func TestLoggerJSON(t *testing.T) {
	tests := []struct {
		verbosity int
		format    string
		wantV1    bool
	}{
		{0, logFormatJSON, false},
		{1, logFormatJSON, true},
		{2, logFormatAuto, true}, // a buffer is not a terminal: JSON
	}
	for _, tt := range tests {
		var buf bytes.Buffer
		opts := &globalOptions{LogFormat: tt.format, Verbosity: tt.verbosity, logOut: &buf}
		log := opts.Logger().WithName("test")
		log.Info("server started", "server", "api", "pid", 42)
		log.V(1).Info("probe passed", "server", "api")
		opts.syncLogs()

		lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
		wantLines := 1
		if tt.wantV1 {
			wantLines = 2
		}
		if len(lines) != wantLines {
			t.Fatalf("verbosity %d: got %d log lines, want %d:\n%s", tt.verbosity, len(lines), wantLines, buf.String())
		}
		var entry map[string]any
		if err := json.Unmarshal([]byte(lines[0]), &entry); err != nil {
			t.Fatalf("log line is not JSON: %v: %s", err, lines[0])
		}
		for k, want := range map[string]any{"msg": "server started", "logger": "test", "server": "api", "pid": float64(42)} {
			if entry[k] != want {
				t.Errorf("log entry %s = %v, want %v (entry %v)", k, entry[k], want, entry)
			}
		}
		if _, ok := entry["ts"]; !ok {
			t.Errorf("log entry has no ts: %v", entry)
		}
	}
}

func TestLoggerConsole(t *testing.T) {
	var buf bytes.Buffer
	opts := &globalOptions{LogFormat: logFormatConsole, logOut: &buf}
	opts.Logger().Info("server started", "server", "api")
	opts.Logger().V(1).Info("hidden at verbosity 0")
	got := buf.String()
	if !strings.Contains(got, "INFO") || !strings.Contains(got, "server started") || !strings.Contains(got, `"server": "api"`) {
		t.Errorf("console log = %q, want a level, the message and the key", got)
	}
	if strings.Contains(got, "hidden") || strings.HasPrefix(got, "{") {
		t.Errorf("console log = %q: V(1) shown at verbosity 0, or JSON written", got)
	}
}
