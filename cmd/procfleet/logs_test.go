package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/procfleet/procfleet/actuate"
	"github.com/procfleet/procfleet/internal/logfile"
	"github.com/procfleet/procfleet/internal/testutil"
	"github.com/procfleet/procfleet/reconciler"
)

// stateFolder makes the state folder dir (mode 0700, as up makes it) with
// its logs/ folder, and returns the logs folder.
func stateFolder(tb testing.TB, dir string) string {
	tb.Helper()
	logs := filepath.Join(dir, "logs")
	if err := os.MkdirAll(logs, 0o700); err != nil {
		tb.Fatal(err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		tb.Fatal(err)
	}
	return logs
}

// logsState makes a state folder whose logs/ holds api.log and its rotated
// copy api.log.1 (which ends in the middle of a line, as a collapse cut
// leaves it), and db.log, and returns the folder.
func logsState(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	logs := stateFolder(t, dir)
	for name, content := range map[string]string{
		"api.log.1": "one\ntw",
		"api.log":   "o\nthree\nfour\nfive", // no final line feed: a write in progress
		"db.log":    "",
	} {
		if err := os.WriteFile(filepath.Join(logs, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// appendFile opens the file at path for appending, as a server's stdout
// is; it is closed when the test ends.
func appendFile(t *testing.T, path string) *os.File {
	t.Helper()
	w, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return w
}

// writeFleet writes a fleet file declaring servers (YAML documents after
// metadata.name) into dir and returns its path. No server is started.
func writeFleet(t *testing.T, dir string, servers map[string]string) string {
	t.Helper()
	var b strings.Builder
	for name, extra := range servers {
		fmt.Fprintf(&b, "---\napiVersion: procfleet.dev/v1alpha1\nkind: Server\nmetadata: {name: %s}\nspec:\n  command: [/bin/true]\n%s", name, extra)
	}
	path := filepath.Join(dir, "procfleet.yaml")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestLogs(t *testing.T) {
	dir := logsState(t)
	fleetDir := t.TempDir()
	fleet := writeFleet(t, fleetDir, map[string]string{"api": "", "web": ""})
	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantOut    string
		wantErrHas string
	}{
		{"one server, oldest first, as written", []string{"logs", "api"}, 0, "one\ntwo\nthree\nfour\nfive", ""},
		{"tail within the live log", []string{"logs", "api", "--tail", "2"}, 0, "four\nfive", ""},
		{"tail across the split line", []string{"logs", "api", "--tail", "4"}, 0, "two\nthree\nfour\nfive", ""},
		{"tail 0", []string{"logs", "api", "--tail", "0"}, 0, "", ""},
		{"empty log", []string{"logs", "db"}, 0, "", ""},
		{"two servers, prefixed, no color when not a terminal", []string{"logs", "db", "api", "--tail", "2"}, 0, "api | four\napi | five\n", ""},
		{"no prefix", []string{"logs", "api", "db", "--no-prefix", "--tail", "1"}, 0, "five\n", ""},
		{"unknown name", []string{"logs", "apj"}, 1, "", "no server named apj (did you mean api?)"},
		{"declared, no log", []string{"logs", "web", "--file", fleet}, 1, "", `server "web" has no log at ` + filepath.Join(dir, "logs", "web.log")},
		{"the whole fleet", []string{"logs", "--file", fleet, "--tail", "1"}, 0, "api | five\n", ""},
		{"nothing known", []string{"logs"}, 1, "", "no server in the fleet files"},
		{"escaping name", []string{"logs", "../api"}, 1, "", "not a DNS label"},
		{"absolute name", []string{"logs", "/etc/passwd"}, 1, "", "not a DNS label"},
		{"long name", []string{"logs", strings.Repeat("a", 64)}, 1, "", "longer than 63"},
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

// TestLogNames: which instances logs prints for the names given.
func TestLogNames(t *testing.T) {
	src := &logSource{
		declared: map[string][]string{"api": {"api-0", "api-1"}, "db": {"db"}, "idle": nil},
		order:    []string{"api-0", "api-1", "db"},
		recorded: map[string]bool{"db": true, "old": true},
		logs:     map[string]bool{"api-0": true, "db": true, "gone": true, "old": true},
	}
	tests := []struct {
		args    []string
		want    []string
		wantErr string
	}{
		{nil, []string{"api-0", "api-1", "db", "old"}, ""},
		{[]string{"api"}, []string{"api-0", "api-1"}, ""},
		{[]string{"api-1", "db", "api"}, []string{"api-1", "db", "api-0"}, ""},
		{[]string{"gone"}, []string{"gone"}, ""},
		{[]string{"old", "old"}, []string{"old"}, ""},
		{[]string{"idle"}, nil, ""},
		{[]string{"api-2"}, nil, "no server named api-2 (did you mean api-0?)"},
		{[]string{"db", "zzzzzz"}, nil, "no server named zzzzzz"},
	}
	for _, tt := range tests {
		got, err := src.resolve(tt.args)
		if (err == nil) != (tt.wantErr == "") || (err != nil && err.Error() != tt.wantErr) {
			t.Errorf("resolve(%q) error %v, want %q", tt.args, err, tt.wantErr)
			continue
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("resolve(%q) (-want +got):\n%s", tt.args, diff)
		}
	}
}

// TestLogsFleetFile: --file names the fleet files (and so the state
// folder); a replicated server's name stands for its instances.
func TestLogsFleetFile(t *testing.T) {
	dir := t.TempDir()
	fleet := writeFleet(t, dir, map[string]string{"api": "  replicas: 2\n", "db": ""})
	logs := stateFolder(t, filepath.Join(dir, ".procfleet"))
	for name, content := range map[string]string{"api-0": "zero\n", "api-1": "one\n", "db": "d\n"} {
		if err := os.WriteFile(filepath.Join(logs, name+".log"), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	r := procfleet(t, "logs", "api", "--file", fleet)
	if r.code != 0 || r.stdout != "api-0 | zero\napi-1 | one\n" {
		t.Errorf("logs api --file: code %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	r = procfleet(t, "logs", "--file", fleet)
	if want := "api-0 | zero\napi-1 | one\ndb    | d\n"; r.code != 0 || r.stdout != want {
		t.Errorf("logs --file: code %d, stdout %q, want %q (stderr %q)", r.code, r.stdout, want, r.stderr)
	}
}

// TestLogsFromSubfolder: in a folder below the project, logs finds the
// project's procfleet.yaml, and so its state folder.
func TestLogsFromSubfolder(t *testing.T) {
	dir := t.TempDir()
	writeFleet(t, dir, map[string]string{"api": ""})
	logs := stateFolder(t, filepath.Join(dir, ".procfleet"))
	if err := os.WriteFile(filepath.Join(logs, "api.log"), []byte("hello\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	deep := filepath.Join(dir, "src", "pkg")
	if err := os.MkdirAll(deep, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Chdir(deep)
	t.Setenv(stateDirEnv, "")
	for _, args := range [][]string{{"logs", "api"}, {"logs"}} {
		if r := procfleet(t, args...); r.code != 0 || r.stdout != "hello\n" {
			t.Errorf("%v from %s: code %d, stdout %q, stderr %q", args, deep, r.code, r.stdout, r.stderr)
		}
	}
}

func TestLogsStateDirFromEnvironment(t *testing.T) {
	dir := logsState(t)
	t.Setenv(stateDirEnv, dir)
	r := procfleet(t, "logs", "api", "--tail", "1")
	if r.code != 0 || r.stdout != "five" {
		t.Errorf("got code %d, stdout %q (stderr %q); want 0, \"five\"", r.code, r.stdout, r.stderr)
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
	for _, args := range [][]string{{"logs", "web"}, {"logs", "web", "--tail", "1"}, {"logs", "api", "web"}} {
		r := procfleet(t, append(args, "--state-dir", dir)...)
		if strings.Contains(r.stdout, "secret") {
			t.Errorf("%v printed the symlink's target", args)
		}
	}
}

// startLogs runs `procfleet logs` in-process with args until the test
// ends (then it must exit 0 within 30 s); its output goes to out.
func startLogs(t *testing.T, out io.Writer, args ...string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var stderr bytes.Buffer
	done := make(chan int, 1)
	go func() { done <- run(ctx, append([]string{"logs"}, args...), out, &stderr) }()
	t.Cleanup(func() {
		cancel()
		select {
		case code := <-done:
			if code != 0 {
				t.Errorf("logs %v: exit code %d after interrupt, want 0 (stderr %q)", args, code, stderr.String())
			}
		case <-time.After(30 * time.Second):
			t.Errorf("logs %v did not stop 30 s after its context ended", args)
		}
	})
}

// TestLogsFollow: logs -f prints the tail, then lines written later, and
// goes on after a rotation, until its context ends (Ctrl-C), with exit 0.
func TestLogsFollow(t *testing.T) {
	dir := logsState(t)
	live := filepath.Join(dir, "logs", "api.log")
	w := appendFile(t, live)

	out := testutil.NewSyncBuffer()
	startLogs(t, out, "api", "-f", "--tail", "4", "--state-dir", dir)
	out.WaitFor(t, "two\nthree\nfour\n") // "five" waits for its line feed
	fmt.Fprint(w, " (end)\nsix\n")
	out.WaitFor(t, "six\n")
	if err := logfile.Rotate(live, logfile.Options{}); err != nil {
		t.Fatal(err)
	}
	fmt.Fprint(w, "seven\n")
	out.WaitFor(t, "seven\n")
	if got, want := out.String(), "two\nthree\nfour\nfive (end)\nsix\nseven\n"; got != want {
		t.Errorf("logs -f printed %q, want %q", got, want)
	}
}

// TestLogsFollowStalledReader (issue 20): logs -f's reader stops reading
// while logs -f is behind (it holds one read of a long log), the log is
// rotated twice meanwhile; once the reader reads again, every line comes
// exactly once, in order, none torn.
func TestLogsFollowStalledReader(t *testing.T) {
	dir := logsState(t)
	live := filepath.Join(dir, "logs", "db.log")
	w := appendFile(t, live)
	var want strings.Builder
	next := 0
	write := func(n int) {
		var b strings.Builder
		for i := 0; i < n; i++ {
			fmt.Fprintf(&b, "%08d %s\n", next, strings.Repeat("x", 60))
			next++
		}
		if _, err := w.WriteString(b.String()); err != nil {
			t.Fatal(err)
		}
		want.WriteString(b.String())
	}
	out := testutil.NewSyncBuffer()
	sw := testutil.NewStallWriter(out)
	sw.Stall()
	startLogs(t, sw, "db", "-f", "--state-dir", dir)
	t.Cleanup(sw.Resume) // before startLogs' cleanup, so logs can return
	write(3000)          // 207,000 bytes: more than one read
	sw.WaitBlocked(t)
	for i := 0; i < 2; i++ {
		write(3000)
		if err := logfile.Rotate(live, logfile.Options{}); err != nil {
			t.Fatal(err)
		}
	}
	write(10)
	sw.Resume()
	out.WaitFor(t, fmt.Sprintf("%08d ", next-1))
	if got := out.String(); got != want.String() {
		t.Errorf("after a stall across two rotations logs -f printed %d bytes, want %d: lines lost, repeated, torn or out of order", len(got), want.Len())
	}
}

// killAndRestart kills name with SIGKILL and waits until up has it Ready
// again with another pid.
func (f *e2eFleet) killAndRestart(st reconciler.Status, name string) reconciler.Status {
	f.t.Helper()
	old := pidIn(st, name)
	if err := syscall.Kill(old, syscall.SIGKILL); err != nil {
		f.t.Fatal(err)
	}
	return f.waitStatus(name+" restarted", func(st reconciler.Status) bool {
		return readyWith(name)(st) && pidIn(st, name) != old
	})
}

// inOrder checks that got holds each of lines, in that order.
func inOrder(t *testing.T, got string, lines []string) {
	t.Helper()
	at := 0
	for _, l := range lines {
		i := strings.Index(got[at:], l)
		if i < 0 {
			t.Fatalf("%q missing or out of order in:\n%s", l, got)
		}
		at += i + len(l)
	}
}

// httpPrint makes the test server on port print line on its stdout.
func httpPrint(t *testing.T, port int, line string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/print?line=%s", port, url.QueryEscape(line)), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("print on port %d: %v", port, err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("print on port %d: %s", port, resp.Status)
	}
}

// TestLogsFollowFleet (issue 15): real servers run by a real up; logs -f
// of the fleet prints the lines of all three, each after its padded name,
// in the order they were written, across a rotation of one log and a
// restart of one server, whose start shows as a marker with its new pid
// before the lines it prints. Its output is not a terminal: no colors.
func TestLogsFollowFleet(t *testing.T) {
	f := newE2EFleet(t, "api", "backend", "web")
	f.write(nil, nil)
	f.up()
	st := f.waitStatus("all ready", readyWith("api", "backend", "web"))

	out := testutil.NewSyncBuffer()
	startLogs(t, out, "-f", "--file", f.file, "--state-dir", f.state)
	var sent []string
	say := func(name, line string) {
		t.Helper()
		httpPrint(t, f.ports[name], line)
		l := fmt.Sprintf("%-7s | %s\n", name, line)
		out.WaitFor(t, l)
		sent = append(sent, l)
	}
	for i, name := range []string{"web", "api", "backend", "api", "web", "backend"} {
		say(name, fmt.Sprintf("%s line %d", name, i))
	}

	apiLog := filepath.Join(f.state, "logs", "api.log")
	if err := logfile.Rotate(apiLog, logfile.Options{}); err != nil {
		t.Fatal(err)
	}
	say("api", "api after rotation")
	say("web", "web after api's rotation")

	st = f.killAndRestart(st, "api")
	marker := fmt.Sprintf("api     | --- procfleet: started pid %d at ", pidIn(st, "api"))
	out.WaitFor(t, marker)
	say("api", "api after restart")
	say("backend", "backend at the end")

	got := out.String()
	if strings.Contains(got, "\x1b[") {
		t.Errorf("colors in output that is not a terminal:\n%s", got)
	}
	// The lines sent appear in the order sent; the marker comes before the
	// restarted api's line.
	inOrder(t, got, sent)
	if m, l := strings.Index(got, marker), strings.Index(got, "api     | api after restart\n"); m < 0 || m > l {
		t.Errorf("the restart marker is not before the restarted server's line:\n%s", got)
	}
	if n := len(regexp.MustCompile(`(?m)^api     \| --- procfleet: started pid `).FindAllString(got, -1)); n != 1 {
		t.Errorf("%d start markers for api, want 1 (one restart while following):\n%s", n, got)
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

// TestEventsFileName: logfile reads a server's events where the
// reconciler writes them.
func TestEventsFileName(t *testing.T) {
	sd := &actuate.StateDir{Path: t.TempDir()}
	if got, want := filepath.Join(filepath.Dir(sd.LogPath("api")), logfile.EventsFile("api")), sd.EventsPath("api"); got != want {
		t.Errorf("logfile reads events at %s; the state folder keeps them at %s", got, want)
	}
}
