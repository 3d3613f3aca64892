package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/procfleet/procfleet/internal/logfile"
	"github.com/procfleet/procfleet/internal/testutil"
)

// logState makes a state folder whose logs/ holds api.log and its rotated
// copy api.log.1, and returns the folder.
func logsState(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	logs := filepath.Join(dir, "logs")
	if err := os.MkdirAll(logs, 0o700); err != nil {
		t.Fatal(err)
	}
	for name, content := range map[string]string{
		"api.log.1": "one\ntwo\n",
		"api.log":   "three\nfour\nfive", // no final line feed: a write in progress
		"db.log":    "",
	} {
		if err := os.WriteFile(filepath.Join(logs, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestLogs(t *testing.T) {
	dir := logsState(t)
	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantOut    string
		wantErrHas string
	}{
		{"all, oldest first", []string{"logs", "api"}, 0, "one\ntwo\nthree\nfour\nfive", ""},
		{"tail within the live log", []string{"logs", "api", "--tail", "2"}, 0, "four\nfive\n", ""},
		{"tail reaching the rotated copy", []string{"logs", "api", "--tail", "4"}, 0, "two\nthree\nfour\nfive\n", ""},
		{"tail 0", []string{"logs", "api", "--tail", "0"}, 0, "", ""},
		{"empty log", []string{"logs", "db"}, 0, "", ""},
		{"no log", []string{"logs", "web"}, 1, "", `server "web" has no log at ` + filepath.Join(dir, "logs", "web.log")},
		{"escaping name", []string{"logs", "../api"}, 1, "", "not a DNS label"},
		{"absolute name", []string{"logs", "/etc/passwd"}, 1, "", "not a DNS label"},
		{"long name", []string{"logs", strings.Repeat("a", 64)}, 1, "", "longer than 63"},
		{"no name", []string{"logs"}, 1, "", "accepts 1 arg"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := procfleet(t, append(tt.args, "--state-dir", dir)...)
			if r.code != tt.wantCode {
				t.Errorf("exit code %d, want %d (stderr %q)", r.code, tt.wantCode, r.stderr)
			}
			if r.stdout != tt.wantOut {
				t.Errorf("stdout %q, want %q", r.stdout, tt.wantOut)
			}
			if !strings.Contains(r.stderr, tt.wantErrHas) {
				t.Errorf("stderr %q, want it to contain %q", r.stderr, tt.wantErrHas)
			}
		})
	}
}

func TestLogsStateDirFromEnvironment(t *testing.T) {
	dir := logsState(t)
	t.Setenv(stateDirEnv, dir)
	r := procfleet(t, "logs", "api", "--tail", "1")
	if r.code != 0 || r.stdout != "five\n" {
		t.Errorf("got code %d, stdout %q (stderr %q); want 0, \"five\\n\"", r.code, r.stdout, r.stderr)
	}
}

func TestLogsSymlinkNotFollowed(t *testing.T) {
	dir := logsState(t)
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(secret, filepath.Join(dir, "logs", "web.log")); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"logs", "web"}, {"logs", "web", "--tail", "1"}} {
		r := procfleet(t, append(args, "--state-dir", dir)...)
		if strings.Contains(r.stdout, "secret") {
			t.Errorf("%v printed the symlink's target", args)
		}
	}
}

// TestLogsFollow: logs -f prints the tail, then lines written later, and
// goes on after a rotation, until its context ends (Ctrl-C), with exit 0.
func TestLogsFollow(t *testing.T) {
	dir := logsState(t)
	live := filepath.Join(dir, "logs", "api.log")
	w, err := os.OpenFile(live, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := testutil.NewSyncBuffer()
	var stderr bytes.Buffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"logs", "api", "-f", "--tail", "4", "--state-dir", dir}, out, &stderr)
	}()

	out.WaitFor(t, "two\nthree\nfour\n") // "five" waits for its line feed
	fmt.Fprint(w, " (end)\nsix\n")
	out.WaitFor(t, "six\n")
	if err := logfile.Rotate(live, logfile.Options{}); err != nil {
		t.Fatal(err)
	}
	fmt.Fprint(w, "seven\n")
	out.WaitFor(t, "seven\n")
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("exit code %d after interrupt, want 0 (stderr %q)", code, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("logs -f did not stop after its context ended")
	}
	if got, want := out.String(), "two\nthree\nfour\nfive (end)\nsix\nseven\n"; got != want {
		t.Errorf("logs -f printed %q, want %q", got, want)
	}
}

func TestCompletion(t *testing.T) {
	tests := []struct {
		shell string
		want  string
	}{
		{"bash", "# bash completion V2 for procfleet"},
		{"zsh", "#compdef procfleet"},
		{"fish", "complete -c procfleet"},
	}
	for _, tt := range tests {
		t.Run(tt.shell, func(t *testing.T) {
			r := procfleet(t, "completion", tt.shell)
			if r.code != 0 || !strings.Contains(r.stdout, tt.want) {
				t.Errorf("completion %s: code %d, stdout starts %q; want 0 and %q", tt.shell, r.code, r.stdout[:min(len(r.stdout), 80)], tt.want)
			}
		})
	}
	r := procfleet(t, "completion", "tcsh")
	if r.code != 1 || !strings.Contains(r.stderr, `invalid argument "tcsh"`) {
		t.Errorf("completion tcsh: code %d, stderr %q; want 1 naming the argument", r.code, r.stderr)
	}
	r = procfleet(t, "completion", "--help")
	if r.code != 0 || !strings.Contains(r.stdout, "source <(procfleet completion bash)") {
		t.Errorf("completion --help: code %d, want examples; got %q", r.code, r.stdout)
	}
}

// TestCompleteLogNames: the shell asks for NAME; the servers with a log in
// the state folder are offered.
func TestCompleteLogNames(t *testing.T) {
	dir := logsState(t)
	r := procfleet(t, "__complete", "logs", "--state-dir", dir, "")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "api\ndb\n:4\n") {
		t.Errorf("completion of logs NAME: code %d, stdout %q; want api and db", r.code, r.stdout)
	}
}
