package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/cookiejar"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/procfleet/procfleet/actuate"
	"github.com/procfleet/procfleet/internal/dashboard"
	"github.com/procfleet/procfleet/observe"
	"github.com/procfleet/procfleet/reconciler"
)

// TestUIOwnership maps a server's detail to its page's ownership section:
// describe's verdicts, the pin up holds winning over a record that no
// longer proves the process, untrusted records never shown as records,
// what to do by hand only for a quarantine, and the membership its record
// names (cgroup, or session and process group with the instance token).
func TestUIOwnership(t *testing.T) {
	rec := actuate.Record{Name: "api", PID: 42, PGID: 42, StartTime: 7, BootID: "b", Cmdline: []string{"./api"}}
	owned := &reconciler.RecordView{Record: rec, Verdict: actuate.VerdictOwned, Message: "pid 42 is this server",
		Evidence: "pid 42, start time 7, boot id b", Identity: observe.Identity{PID: 42, PPID: 1, PGID: 42, SID: 42, State: observe.StateSleeping}}
	changed := &reconciler.RecordView{Record: rec, Verdict: actuate.VerdictQuarantine, Reason: actuate.IdentityMismatch,
		Message: "command line differs", Identity: observe.Identity{PID: 42}}
	untrusted := &reconciler.RecordView{Record: actuate.Record{Name: "api"}, Untrusted: &actuate.UntrustedRecordError{Name: "api", Reason: "mode 0666"}}
	const token = "0123456789abcdef0123456789abcdef"
	withRecord := func(rv *reconciler.RecordView, edit func(*actuate.Record)) *reconciler.RecordView {
		c := *rv
		edit(&c.Record)
		return &c
	}
	running := reconciler.ServerStatus{Name: "api", Phase: reconciler.PhaseRunning, PID: 42}
	quarantined := reconciler.ServerStatus{Name: "api", Phase: reconciler.PhaseQuarantined, PID: 42}
	for _, tt := range []struct {
		name       string
		in         reconciler.ServerDetail
		wantRecord bool
		want       dashboard.Ownership
	}{
		{"no record, not running", reconciler.ServerDetail{Status: reconciler.ServerStatus{Name: "api", Phase: reconciler.PhaseStopped}}, false,
			dashboard.Ownership{}},
		{"owned and held", reconciler.ServerDetail{Status: running, Record: owned, Held: true}, true,
			dashboard.Ownership{Verdict: "Owned: the record proves procfleet started it", Held: true, Message: "pid 42 is this server",
				Evidence: "pid 42, start time 7, boot id b", Process: "sleeping, ppid 1, pgid 42, sid 42, uid 0", Membership: "process group 42 (its own session)"}},
		{"owned, in its cgroup", reconciler.ServerDetail{Status: running, Record: withRecord(owned, func(r *actuate.Record) {
			r.Instance, r.Cgroup = token, "/sys/fs/cgroup/procfleet-1-2/api"
		})}, true,
			dashboard.Ownership{Verdict: "Owned: the record proves procfleet started it", Message: "pid 42 is this server",
				Evidence: "pid 42, start time 7, boot id b", Process: "sleeping, ppid 1, pgid 42, sid 42, uid 0",
				Membership: "cgroup /sys/fs/cgroup/procfleet-1-2/api (no member can leave it); process group 42 (its own session)"}},
		{"owned, session and token", reconciler.ServerDetail{Status: running, Record: withRecord(owned, func(r *actuate.Record) { r.Instance = token })}, true,
			dashboard.Ownership{Verdict: "Owned: the record proves procfleet started it", Message: "pid 42 is this server",
				Evidence: "pid 42, start time 7, boot id b", Process: "sleeping, ppid 1, pgid 42, sid 42, uid 0",
				Membership: "process group 42 (its own session), and the processes whose environment carries its instance token"}},
		{"held, command line changed", reconciler.ServerDetail{Status: running, Record: changed, Held: true}, true,
			dashboard.Ownership{Verdict: heldVerdict, Held: true, Message: "its record alone would not prove it now: command line differs",
				Process: "unknown, ppid 0, pgid 0, sid 0, uid 0", Membership: "process group 42 (its own session)"}},
		{"held, record missing", reconciler.ServerDetail{Status: running, Held: true}, false,
			dashboard.Ownership{Verdict: heldVerdict, Held: true, Message: "its record is missing (see the events)"}},
		{"quarantined, not held", reconciler.ServerDetail{Status: quarantined, Record: changed}, true,
			dashboard.Ownership{Verdict: "Quarantine (IdentityMismatch): procfleet will not signal it", Message: "command line differs",
				Process: "unknown, ppid 0, pgid 0, sid 0, uid 0", Membership: "process group 42 (its own session)",
				StopByHand: actuate.ManualStopHint(rec)}},
		{"untrusted record", reconciler.ServerDetail{Status: reconciler.ServerStatus{Name: "api", Phase: reconciler.PhaseQuarantined}, Record: untrusted}, false,
			dashboard.Ownership{Verdict: "Untrusted record: never acted on", Message: untrusted.Untrusted.Error(),
				StopByHand: sentence(reconciler.UntrustedAdvice(untrusted.Untrusted))}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tt.in.Events = []reconciler.Event{{Reason: reconciler.ReasonStarting}}
			tt.in.LogPath = "/state/logs/api.log"
			got := uiDetail(tt.in)
			if got.Ownership != tt.want {
				t.Errorf("ownership:\n got %+v\nwant %+v", got.Ownership, tt.want)
			}
			if (got.Record != nil) != tt.wantRecord || got.Record != nil && got.Record.PID != 42 {
				t.Errorf("record = %+v, want shown: %v", got.Record, tt.wantRecord)
			}
			if got.LogPath != tt.in.LogPath || len(got.Events) != 1 {
				t.Errorf("log path %q, events %v: want them as given", got.LogPath, got.Events)
			}
		})
	}
}

func TestOpenerCommand(t *testing.T) {
	for _, tt := range []struct {
		browser string
		want    []string
	}{
		{"", []string{systemOpener, "/s/ui.html"}},
		{"  ", []string{systemOpener, "/s/ui.html"}},
		{"firefox", []string{"firefox", "/s/ui.html"}},
		{"chromium --new-window:firefox", []string{"chromium", "--new-window", "/s/ui.html"}},
		{"open -a Safari %s --background", []string{"open", "-a", "Safari", "/s/ui.html", "--background"}},
	} {
		if got := openerCommand(tt.browser, "/s/ui.html"); !slices.Equal(got, tt.want) {
			t.Errorf("openerCommand(%q) = %q, want %q", tt.browser, got, tt.want)
		}
	}
}

// TestWriteUIPage: the page is the user's only (0600), replaces an old
// one, escapes the URL, and leaves no temporary file.
func TestWriteUIPage(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, uiFile), []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	path, err := writeUIPage(dir, `http://127.0.0.1:7070/?token=a"b<c>&d`)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("%s: %v, mode %v; want 0600", path, err, fi.Mode())
	}
	b, _ := os.ReadFile(path)
	if want := `content="0; url=http://127.0.0.1:7070/?token=a&#34;b&lt;c&gt;&amp;d"`; !strings.Contains(string(b), want) {
		t.Errorf("page:\n%s\nwant it to hold %s", b, want)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("files left in the folder: %v, want only %s", entries, uiFile)
	}
}

var dashboardLine = regexp.MustCompile(`dashboard at (http://127\.0\.0\.1:\d+/\?token=[A-Za-z0-9_-]+)`)

// TestUpUI runs the real binary: --ui refuses a non-loopback address
// before it creates anything; `ui` says when no up runs or when the
// running up serves no dashboard; `up --ui` prints the dashboard's URL
// once, `ui` prints the same, `ui --open` hands the browser a page of the
// state folder, never the URL; the URL opens the fleet page and a
// server's page with its live process as evidence; a request without the
// token, with a foreign Host or a cross-origin POST is refused and stops
// nothing; once up has exited the dashboard is gone.
func TestUpUI(t *testing.T) {
	f := newE2EFleet(t, "db", "api")
	f.write(map[string][]string{"api": {"db"}}, nil)

	code, out := f.cmd("up", "-f", f.file, "--ui", "0.0.0.0:0")
	if code != 1 || !strings.Contains(out, "not a loopback address") {
		t.Errorf("up --ui 0.0.0.0:0: exit %d, output %q; want 1, refused as not loopback", code, out)
	}
	if _, err := os.Stat(f.state); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("up --ui 0.0.0.0:0 made the state folder: %v", err)
	}
	if code, out := f.cmd("ui", "-f", f.file); code != 1 || !strings.Contains(out, "no procfleet up runs") {
		t.Errorf("ui with no state folder: exit %d, output %q; want 1, no up", code, out)
	}

	plain, plainLog := f.up()
	f.waitStatus("ready", readyWith("db", "api"))
	waitLog(t, plainLog, "procfleet up (pid")
	if code, out := f.cmd("ui", "-f", f.file); code != 1 || !strings.Contains(out, "serves no dashboard") || !strings.Contains(out, "--ui ADDR") {
		t.Errorf("ui with an up without --ui: exit %d, output %q; want 1, no dashboard, how to start one", code, out)
	}
	stopUp(t, plain, plainLog)
	if code, out := f.cmd("ui", "-f", f.file); code != 1 || !strings.Contains(out, "no procfleet up runs") {
		t.Errorf("ui once up has exited: exit %d, output %q; want 1, no up", code, out)
	}

	up, upLog := f.up("--ui", "127.0.0.1:0")
	st := f.waitStatus("adopted, ready", readyWith("db", "api"))
	waitLog(t, upLog, "dashboard at http://127.0.0.1:")
	b, _ := os.ReadFile(upLog)
	urls := dashboardLine.FindAllStringSubmatch(string(b), -1)
	if len(urls) != 1 {
		t.Fatalf("up --ui printed the dashboard URL %d times, want once:\n%s", len(urls), b)
	}
	url := urls[0][1]
	base := strings.TrimSuffix(url[:strings.Index(url, "?")], "/")
	if code, out := f.cmd("ui", "-f", f.file); code != 0 || out != url+"\n" {
		t.Errorf("ui: exit %d, output %q; want 0 and %q", code, out, url+"\n")
	}

	// ui --open: the opener gets a page of the state folder, not the URL.
	argsFile := filepath.Join(f.dir, "browser.args")
	browser := filepath.Join(f.dir, "browser.sh")
	if err := os.WriteFile(browser, []byte("#!/bin/sh\nprintf '%s\\n' \"$@\" > "+argsFile+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	openOut := runWithEnv(t, []string{"BROWSER=" + browser}, procfleetBin(t), "ui", "--open", "-f", f.file, "--state-dir", f.state)
	args, _ := os.ReadFile(argsFile)
	page := filepath.Join(f.state, uiFile)
	if string(args) != page+"\n" || strings.Contains(string(args), "token") {
		t.Errorf("ui --open ran the browser with %q, want only %s (output %q)", args, page, openOut)
	}
	if pb, err := os.ReadFile(page); err != nil || !strings.Contains(string(pb), `url=`+url+`"`) {
		t.Errorf("%s = %q, %v; want a redirect to %s", page, pb, err, url)
	}

	// The URL: the token is traded for a cookie; the fleet page lists the
	// servers with their pids, a server's page its held process.
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, Timeout: 30 * time.Second}
	fleet := get(t, c, url, "", http.StatusOK)
	for _, name := range []string{"db", "api"} {
		if want := `id="row-` + name + `" data-name="` + name + `" data-phase="Running"`; !strings.Contains(fleet, want) {
			t.Errorf("fleet page lacks %s", want)
		}
		if want := `data-pid="` + strconv.Itoa(pidIn(st, name)) + `"`; !strings.Contains(fleet, want) {
			t.Errorf("fleet page lacks %s's pid: %s", name, want)
		}
	}
	server := get(t, c, base+"/servers/db", "", http.StatusOK)
	for _, want := range []string{"Owned: the record proves procfleet started it", ">held<", "pinned by", "process group " + strconv.Itoa(pidIn(st, "db"))} {
		if !strings.Contains(server, want) {
			t.Errorf("db's page lacks %q", want)
		}
	}

	// Refused: no token, a foreign Host, a cross-origin POST.
	get(t, &http.Client{Timeout: 30 * time.Second}, base+"/", "", http.StatusForbidden)
	get(t, c, base+"/", "evil.example", http.StatusForbidden)
	req, _ := http.NewRequest(http.MethodPost, base+"/servers/db/stop", nil)
	req.Header.Set("Origin", "http://127.0.0.1:1")
	if resp, err := c.Do(req); err != nil || resp.StatusCode != http.StatusForbidden {
		t.Errorf("cross-origin POST stop: %v, %v; want 403", resp, err)
	} else {
		resp.Body.Close()
	}
	if st2 := f.statusJSON(); pidIn(st2, "db") != pidIn(st, "db") {
		t.Errorf("db's pid went from %d to %d after a refused stop", pidIn(st, "db"), pidIn(st2, "db"))
	}

	// A button's request, as the page's fetch sends it: an unknown name is
	// 404 with the nearest name; api's Restart is the reconciler's
	// restart, a new pid in procfleet status and db untouched.
	if code, body := post(t, c, base, "/servers/apj/restart"); code != http.StatusNotFound || !strings.Contains(body, "did you mean api") {
		t.Errorf("restart of an unknown server: %d %s; want 404 naming api", code, body)
	}
	if code, body := post(t, c, base, "/servers/api/restart"); code != http.StatusOK || !strings.Contains(body, `"ok":true`) {
		t.Errorf("restart api: %d %s; want 200 ok", code, body)
	}
	st2 := f.waitStatus("api restarted", func(s reconciler.Status) bool {
		return readyWith("db", "api")(s) && pidIn(s, "api") != pidIn(st, "api")
	})
	if pidIn(st2, "db") != pidIn(st, "db") {
		t.Errorf("db's pid went from %d to %d when api was restarted", pidIn(st, "db"), pidIn(st2, "db"))
	}

	stopUp(t, up, upLog)
	if _, err := c.Get(base + "/"); err == nil {
		t.Errorf("the dashboard still answers after up exited")
	}
}

// post sends a button's request as the page does (same origin, asking for
// JSON) and returns the status code and body.
func post(t *testing.T, c *http.Client, base, path string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, base+path, nil)
	req.Header.Set("Origin", base)
	req.Header.Set("Accept", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// stopUp ends an up with SIGTERM and expects exit 0.
func stopUp(t *testing.T, up *exec.Cmd, log string) {
	t.Helper()
	if err := up.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := up.Wait(); err != nil {
		b, _ := os.ReadFile(log)
		t.Fatalf("up after SIGTERM: %v\n%s", err, b)
	}
}

// get fetches url (with host as the Host header when set) and expects the
// status code; it returns the body.
func get(t *testing.T, c *http.Client, url, host string, want int) string {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		t.Errorf("GET %s (Host %q): %s, want %d: %s", url, host, resp.Status, want, b)
	}
	return string(b)
}

// runWithEnv runs a command to completion with env added, and returns its
// output; a non-zero exit fails the test.
func runWithEnv(t *testing.T, env []string, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %v: %v\n%s", name, args, err, out.String())
	}
	return out.String()
}
