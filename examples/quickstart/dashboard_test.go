package quickstart_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/procfleet/procfleet/internal/dashboard/browsertest"
	"github.com/procfleet/procfleet/internal/testserver"
	"github.com/procfleet/procfleet/internal/testutil"
)

// screenshotDir names the folder for the dashboard's screenshots of the
// quick start; $PROCFLEET_UI_SCREENSHOTS is used when the flag is empty.
// Without either they go to the test's temporary folder.
var screenshotDir = flag.String("screenshots", "", "write the dashboard's screenshots of the quick start to this folder")

// maxKills bounds the kill -9s that make api back off: the first crash
// restarts at once, the next ones within 10 s of Ready wait 1, 2, 4 s
// (DESIGN.md "Starting"), long enough for the page to show it.
const maxKills = 4

// upFleet is the quick-start fleet run by a real `procfleet up --ui`.
type upFleet struct {
	t      *testing.T
	pf     string // the procfleet binary
	fleet  string // procfleet.yaml, with free ports
	state  string
	ports  map[string]int // by server name
	stderr *testutil.SyncBuffer
	up     *exec.Cmd
	url    string // the dashboard's URL, with its token
	base   string // http://127.0.0.1:PORT
}

var dashboardURL = regexp.MustCompile(`dashboard at (http://127\.0\.0\.1:\d+/\?token=[A-Za-z0-9_-]+)`)

// startUpUI builds the quick start, writes its fleet with free ports, and
// runs `procfleet up --ui 127.0.0.1:0` until the test ends; then up gets
// SIGTERM and `procfleet down` stops the servers.
func startUpUI(t *testing.T) *upFleet {
	t.Helper()
	bin := buildBinaries(t)
	dir := t.TempDir()
	free := testserver.FreePorts(t, 3)
	f := &upFleet{t: t, pf: filepath.Join(bin, "procfleet"), state: filepath.Join(dir, "state"),
		ports: map[string]int{"backend": free[0], "api": free[1], "web": free[2]}, stderr: testutil.NewSyncBuffer()}
	f.fleet = writeFleet(t, dir, bin, map[string]int{"18081": free[0], "18082": free[1], "18083": free[2]})
	t.Cleanup(func() {
		if out, err := f.procfleet("down", "-f", f.fleet); err != nil {
			t.Errorf("cleanup: procfleet down: %v\n%s", err, out)
		}
	})
	f.up = exec.Command(f.pf, "up", "--ui", "127.0.0.1:0", "-f", f.fleet, "--state-dir", f.state, "--log-format", "console")
	f.up.Stdout, f.up.Stderr = f.stderr, f.stderr
	if err := f.up.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = f.up.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = f.up.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = f.up.Process.Kill()
			<-exited
			t.Errorf("procfleet up did not exit within 30 s of SIGTERM:\n%s", f.stderr)
		}
	})
	f.stderr.WaitFor(t, "dashboard at http://")
	m := dashboardURL.FindStringSubmatch(f.stderr.String())
	if m == nil {
		t.Fatalf("up printed no dashboard URL:\n%s", f.stderr)
	}
	f.url = m[1]
	f.base = strings.TrimSuffix(f.url[:strings.Index(f.url, "?")], "/")
	return f
}

// procfleet runs the binary against the fleet's state folder, env added.
func (f *upFleet) procfleetEnv(env []string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, f.pf, append(args, "--state-dir", f.state)...)
	cmd.Env = append(os.Environ(), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

func (f *upFleet) procfleet(args ...string) (string, error) { return f.procfleetEnv(nil, args...) }

// status is `procfleet status -o json`: pid and restarts by server.
func (f *upFleet) status() map[string]browsertest.Row {
	f.t.Helper()
	out, err := f.procfleet("status", "-f", f.fleet, "-o", "json")
	if err != nil {
		f.t.Fatalf("procfleet status -o json: %v\n%s", err, out)
	}
	var st struct {
		Servers []struct {
			Name     string `json:"name"`
			Phase    string `json:"phase"`
			PID      int    `json:"pid"`
			Restarts int    `json:"restarts"`
			Ready    bool   `json:"ready"`
		} `json:"servers"`
	}
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		f.t.Fatalf("status -o json: %v\n%s", err, out)
	}
	rows := map[string]browsertest.Row{}
	for _, s := range st.Servers {
		rows[s.Name] = browsertest.Row{Phase: s.Phase, PID: s.PID, Restarts: s.Restarts, Ready: s.Ready}
	}
	return rows
}

// TestDashboard drives the dashboard of a real `procfleet up --ui` running
// the quick-start fleet in a real headless Chromium, opened the way a user
// opens it (`procfleet ui --open`): the fleet page lists the three servers
// with the pids `procfleet status` shows, and the graph a node per server
// and an edge per dependsOn; kill -9 of api shows, without a reload, its
// restart count go up and its phase change, then a new pid; web's Restart
// button gives it a new pid in the page and in procfleet status, and its
// Stop and Start buttons stop and start it; api's page shows
// the evidence procfleet holds and follows its log live across a restart;
// a request without the token, with a foreign Host, or a cross-origin
// POST is refused and stops nothing. It writes screenshots of the fleet
// page and api's page, light and dark, as the README shows them.
func TestDashboard(t *testing.T) {
	ctx := browsertest.New(t, 1280, 900)
	f := startUpUI(t)

	// Opened as `procfleet ui --open` opens it: the browser is handed a
	// page of the state folder that sends it on to the URL.
	argsFile := filepath.Join(t.TempDir(), "browser.args")
	script := filepath.Join(t.TempDir(), "browser.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\nprintf '%s\\n' \"$@\" > "+argsFile+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := f.procfleetEnv([]string{"BROWSER=" + script}, "ui", "--open", "-f", f.fleet); err != nil || !strings.Contains(out, f.url) {
		t.Fatalf("procfleet ui --open: %v, output %q; want the URL", err, out)
	}
	page, _ := os.ReadFile(argsFile)
	browsertest.Run(t, ctx, "open what ui --open gave the browser", chromedp.Navigate("file://"+strings.TrimSpace(string(page))))
	browsertest.WaitJS(t, ctx, "the fleet page, three servers Running and ready, live",
		`location.origin === "`+f.base+`" && document.querySelectorAll("#rows tr[data-phase=Running][data-ready=true]").length === 3 && document.getElementById("live").dataset.state === "live"`)
	if href := browsertest.Eval[string](t, ctx, `location.href`); strings.Contains(href, "token") {
		t.Errorf("the address bar still holds the token: %s", href)
	}
	if c := browsertest.Eval[string](t, ctx, `document.cookie`); c != "" {
		t.Errorf("the cookie is readable from JavaScript (not HttpOnly): %q", c)
	}
	rows, st := browsertest.Rows(t, ctx), f.status()
	for _, name := range []string{"backend", "api", "web"} {
		if r := rows[name]; r.PID == 0 || r.PID != st[name].PID || !r.Ready {
			t.Errorf("row %s = %+v; procfleet status says pid %d", name, r, st[name].PID)
		}
	}

	// The graph: a node per server, an edge per dependsOn.
	nodes := browsertest.Eval[[]string](t, ctx, `Array.from(document.querySelectorAll("#f-graph .node")).map(n => n.dataset.name).sort()`)
	edges := browsertest.Eval[[]string](t, ctx, `Array.from(document.querySelectorAll("#f-graph .edge")).map(e => e.dataset.from + "->" + e.dataset.to).sort()`)
	if want := []string{"api", "backend", "web"}; !slices.Equal(nodes, want) {
		t.Errorf("graph nodes = %v, want %v", nodes, want)
	}
	if want := []string{"api->backend", "web->api"}; !slices.Equal(edges, want) {
		t.Errorf("graph edges = %v, want %v", edges, want)
	}

	// kill -9 api, and again once it is back, until the page shows it
	// backing off (a crash loop: the first restart is immediate, the next
	// wait 1, 2, 4 s), all in the same document.
	browsertest.Run(t, ctx, "mark the page and record api's phases", chromedp.Evaluate[chromedp.Void](`
		window.__sameDocument = true;
		window.__apiPhases = [document.getElementById("row-api").dataset.phase];
		new MutationObserver(() => {
			const r = document.getElementById("row-api");
			if (r && window.__apiPhases[window.__apiPhases.length - 1] !== r.dataset.phase) window.__apiPhases.push(r.dataset.phase);
		}).observe(document.getElementById("rows"), {subtree: true, childList: true, attributes: true});
		undefined`))
	killed := []int{rows["api"].PID}
	for backedOff := false; !backedOff; {
		if len(killed) > maxKills {
			t.Fatalf("api never showed CrashLoopBackOff after %d kills (pids %v); phases seen: %v", maxKills, killed, browsertest.Eval[[]string](t, ctx, `window.__apiPhases`))
		}
		pid := killed[len(killed)-1]
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatalf("kill -9 %d: %v", pid, err)
		}
		browsertest.WaitJS(t, ctx, fmt.Sprintf("api after kill -9 %d: backing off, or back with a new pid", pid),
			fmt.Sprintf(`(r => r && (r.dataset.phase === "CrashLoopBackOff" || r.dataset.phase === "Running" && r.dataset.pid !== "0" && r.dataset.pid !== "%d"))(document.getElementById("row-api"))`, pid))
		r := browsertest.Rows(t, ctx)["api"]
		backedOff = r.Phase == "CrashLoopBackOff"
		// A restart counts when it starts: one backing off is not yet.
		if want := len(killed) - map[bool]int{true: 1}[backedOff]; r.Restarts < want {
			t.Errorf("after %d kills api's row shows %d restarts (%s), want at least %d", len(killed), r.Restarts, r.Phase, want)
		}
		if !backedOff {
			killed = append(killed, r.PID)
		}
	}
	last := killed[len(killed)-1]
	browsertest.WaitJS(t, ctx, "api back after its back-off, with a new pid",
		fmt.Sprintf(`(r => r && r.dataset.phase === "Running" && r.dataset.ready === "true" && r.dataset.pid !== "0" && r.dataset.pid !== "%d")(document.getElementById("row-api"))`, last))
	if !browsertest.Eval[bool](t, ctx, `window.__sameDocument === true`) {
		t.Fatal("the page was reloaded")
	}
	phases := browsertest.Eval[[]string](t, ctx, `window.__apiPhases`)
	if !slices.Contains(phases, "CrashLoopBackOff") || phases[0] != "Running" || phases[len(phases)-1] != "Running" {
		t.Errorf("api's phases in the page: %v, want Running, ..., CrashLoopBackOff, ..., Running", phases)
	}
	api, st := browsertest.Rows(t, ctx)["api"], f.status()
	if api.PID != st["api"].PID || api.Restarts != st["api"].Restarts || api.Restarts < len(killed) {
		t.Errorf("api after %d kills: page %+v, procfleet status %+v; want the same pid and restarts, at least %d", len(killed), api, st["api"], len(killed))
	}
	for _, pid := range killed {
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("killed pid %d: kill -0 = %v, want ESRCH", pid, err)
		}
	}
	for _, other := range []string{"backend", "web"} {
		if st[other].PID != rows[other].PID {
			t.Errorf("%s's pid went from %d to %d when api was killed", other, rows[other].PID, st[other].PID)
		}
	}

	// The buttons, on the fleet page, the same requests as the CLI verbs:
	// Restart gives web a new pid, in the page and in procfleet status;
	// Stop (confirmed) holds it Stopped; Start runs it again. web is the
	// leaf of the graph: nothing else may move.
	webPID := rows["web"].PID
	browsertest.Run(t, ctx, "click web's Restart", chromedp.Click(chromedp.CSS(`#row-web button[data-action=restart]`)))
	browsertest.WaitJS(t, ctx, "web restarted, with a new pid",
		fmt.Sprintf(`(r => r && r.dataset.phase === "Running" && r.dataset.ready === "true" && r.dataset.pid !== "0" && r.dataset.pid !== "%d")(document.getElementById("row-web"))`, webPID))
	web, st := browsertest.Rows(t, ctx)["web"], f.status()
	if web.PID != st["web"].PID || web.Restarts != st["web"].Restarts {
		t.Errorf("web after Restart: page %+v, procfleet status %+v; want the same pid and restarts", web, st["web"])
	}
	if err := syscall.Kill(webPID, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("web's pid %d before Restart: kill -0 = %v, want ESRCH", webPID, err)
	}
	browsertest.Run(t, ctx, "click web's Stop, confirming", chromedp.Evaluate[chromedp.Void](`window.confirm = () => true; undefined`),
		chromedp.Click(chromedp.CSS(`#row-web button[data-action=stop]`)))
	browsertest.WaitJS(t, ctx, "web stopped, with a Start button",
		`(r => r && r.dataset.phase === "Stopped" && r.dataset.pid === "0" && r.querySelector("button[data-action=start]"))(document.getElementById("row-web"))`)
	if st := f.status()["web"]; st.Phase != "Stopped" || st.PID != 0 {
		t.Errorf("web after Stop: procfleet status %+v, want Stopped with no pid", st)
	}
	if err := syscall.Kill(web.PID, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("web's pid %d after Stop: kill -0 = %v, want ESRCH", web.PID, err)
	}
	browsertest.Run(t, ctx, "click web's Start", chromedp.Click(chromedp.CSS(`#row-web button[data-action=start]`)))
	browsertest.WaitJS(t, ctx, "web running again",
		fmt.Sprintf(`(r => r && r.dataset.phase === "Running" && r.dataset.ready === "true" && r.dataset.pid !== "0" && r.dataset.pid !== "%d")(document.getElementById("row-web"))`, web.PID))
	web, st = browsertest.Rows(t, ctx)["web"], f.status()
	if web.PID != st["web"].PID || !st["web"].Ready {
		t.Errorf("web after Start: page %+v, procfleet status %+v; want the same pid, ready", web, st["web"])
	}
	for _, other := range []string{"backend", "api"} {
		if want := map[string]int{"backend": rows["backend"].PID, "api": api.PID}[other]; st[other].PID != want {
			t.Errorf("%s's pid went from %d to %d when web was restarted, stopped and started", other, want, st[other].PID)
		}
	}
	if !browsertest.Eval[bool](t, ctx, `window.__sameDocument === true`) {
		t.Fatal("the fleet page was reloaded")
	}

	// api's page: the evidence, and its log followed live across one more
	// kill -9.
	browsertest.Run(t, ctx, "open api's page", chromedp.Click(chromedp.CSS(`#row-api td.name a`)))
	pidLine := func(pid int) string {
		return fmt.Sprintf(`Array.from(document.querySelectorAll("#log div")).some(d => d.textContent.includes("listening on 127.0.0.1:%d (pid %d)"))`, f.ports["api"], pid)
	}
	browsertest.WaitJS(t, ctx, "api's page, live, its log showing the running process",
		`location.pathname === "/servers/api" && document.getElementById("live").dataset.state === "live" && `+pidLine(api.PID))
	html := browsertest.Eval[string](t, ctx, `document.documentElement.outerHTML`)
	for _, want := range []string{"Owned: the record proves procfleet started it", ">held<", "pinned by", "boot id",
		fmt.Sprintf("process group %d", api.PID), "killed by signal 9 (SIGKILL)", "depends on"} {
		if !strings.Contains(strings.ToLower(html), strings.ToLower(want)) {
			t.Errorf("api's page lacks %q", want)
		}
	}
	browsertest.Run(t, ctx, "mark api's page", chromedp.Evaluate[chromedp.Void](`window.__sameDocument = true; undefined`))
	if err := syscall.Kill(api.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	browsertest.WaitJS(t, ctx, "api's page shows a new pid", fmt.Sprintf(`(h => h && h.dataset.phase === "Running" && h.dataset.pid !== "0" && h.dataset.pid !== "%d")(document.querySelector("#s-head .s-head"))`, api.PID))
	newPID := browsertest.Eval[int](t, ctx, `+document.querySelector("#s-head .s-head").dataset.pid`)
	browsertest.WaitJS(t, ctx, "the new process's line in api's log, followed live", pidLine(newPID))
	if !browsertest.Eval[bool](t, ctx, `window.__sameDocument === true`) {
		t.Fatal("api's page was reloaded")
	}

	// Refused: no token, a foreign Host (DNS rebinding), and a
	// cross-origin form post from a page on another loopback port, which
	// the browser sends with the cookie (same site); api keeps running.
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, Timeout: 30 * time.Second}
	if code := httpStatus(t, c, f.url, ""); code != http.StatusOK {
		t.Errorf("GET the URL with its token: %d, want 200", code)
	}
	if code := httpStatus(t, &http.Client{Timeout: 30 * time.Second}, f.base+"/", ""); code != http.StatusForbidden {
		t.Errorf("GET without the token: %d, want 403", code)
	}
	if code := httpStatus(t, c, f.base+"/", "rebind.example:80"); code != http.StatusForbidden {
		t.Errorf("GET with the cookie and a foreign Host: %d, want 403", code)
	}
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, `<form id=f method=post action="%s/servers/api/stop"></form><script>document.getElementById("f").submit()</script>`, f.base)
	}))
	t.Cleanup(evil.Close)
	browsertest.Run(t, ctx, "open a page of another origin", chromedp.Navigate(evil.URL))
	browsertest.WaitJS(t, ctx, "the dashboard's refusal", `location.href.endsWith("/servers/api/stop") && document.body && document.body.innerText.includes("403 Forbidden")`)
	if st := f.status()["api"]; st.PID != newPID || st.Phase != "Running" {
		t.Errorf("api after a refused cross-origin stop: %+v, want Running with pid %d", st, newPID)
	}

	// Screenshots of the real fleet, light and dark.
	dir := *screenshotDir
	if dir == "" {
		dir = os.Getenv("PROCFLEET_UI_SCREENSHOTS")
	}
	if dir == "" {
		dir = t.TempDir()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	fleetReady := `document.querySelectorAll("#rows tr[data-phase=Running][data-ready=true]").length === 3`
	serverReady := `document.querySelectorAll("#log div").length > 0 && document.querySelectorAll("#s-events li").length > 0`
	shot := func(name string, width, height int64, scheme, url, ready string) {
		png := browsertest.Screenshot(t, ctx, width, height, scheme, url, ready)
		path := filepath.Join(dir, name+"-"+scheme+".png")
		if err := os.WriteFile(path, png, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s (%d bytes)", path, len(png))
	}
	for _, scheme := range []string{"light", "dark"} {
		shot("fleet", 1280, 900, scheme, f.base+"/", fleetReady)
		shot("server", 1280, 900, scheme, f.base+"/servers/api", serverReady)
	}
	shot("fleet-narrow", 390, 844, "light", f.base+"/", fleetReady)
	if w := browsertest.Eval[int](t, ctx, `document.documentElement.scrollWidth`); w > 390 {
		t.Errorf("the fleet page is %d px wide in a 390 px window: it does not fit", w)
	}
}

// httpStatus GETs url (with host as the Host header when set) and returns
// the status code.
func httpStatus(t *testing.T, c *http.Client, url, host string) int {
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
	resp.Body.Close()
	return resp.StatusCode
}
