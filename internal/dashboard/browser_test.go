package dashboard

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/go-logr/logr/testr"

	"github.com/procfleet/procfleet/internal/dashboard/browsertest"
	"github.com/procfleet/procfleet/reconciler"
)

// screenshotDir names the folder for the browser tests' screenshots; the
// environment's PROCFLEET_UI_SCREENSHOTS is used when the flag is empty.
// Without either they go to the test's temporary folder.
var screenshotDir = flag.String("screenshots", "", "write the dashboard's screenshots to this folder")

// healthPID asks a server's /health which pid answers.
func healthPID(t *testing.T, port int) int {
	t.Helper()
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get("http://127.0.0.1:" + strconv.Itoa(port) + "/health")
	if err != nil {
		t.Fatalf("GET /health on port %d: %v", port, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var pid int
	if _, err := fmt.Sscanf(string(b), "pid %d", &pid); err != nil {
		t.Fatalf("/health on port %d answered %q", port, b)
	}
	return pid
}

// TestBrowserFleet drives the dashboard in a real headless Chromium over a
// fleet of real processes: the quick-start servers are listed with their
// live pids; the graph has a node per server and an edge per dependsOn;
// a kill -9 shows in the page (phase, then a new pid and one more restart)
// without a reload; the Restart button restarts a server (a new pid in the
// page, in the status and answering on its port); the server page follows
// the log live and never shows an env value; a cross-origin form post from
// another loopback port is refused.
func TestBrowserFleet(t *testing.T) {
	ctx := browsertest.New(t, 1280, 900)
	b := startProcBackend(t, quickStart)
	s := serve(t, Config{Backend: b, Log: testr.New(t)})

	browsertest.Run(t, ctx, "open the printed URL", chromedp.Navigate(s.url))
	browsertest.WaitJS(t, ctx, "three Running rows", `document.querySelectorAll("#rows tr[data-phase=Running]").length === 3 && document.getElementById("live").dataset.state === "live"`)
	if href := browsertest.Eval[string](t, ctx, `location.href`); strings.Contains(href, "token") {
		t.Errorf("the address bar still holds the token: %s", href)
	}
	if c := browsertest.Eval[string](t, ctx, `document.cookie`); c != "" {
		t.Errorf("the cookie is readable from JavaScript (not HttpOnly): %q", c)
	}
	rows := browsertest.Rows(t, ctx)
	st := b.status()
	for _, want := range []string{"backend", "api", "web"} {
		ss, _ := st.Get(want)
		if r, ok := rows[want]; !ok || r.PID != ss.PID || !r.Ready || r.PID == 0 {
			t.Errorf("row %s = %+v, want Running and ready with pid %d", want, r, ss.PID)
		}
	}

	// The dependency graph: a node per server, an edge per dependsOn.
	nodes := browsertest.Eval[[]string](t, ctx, `Array.from(document.querySelectorAll("#f-graph .node")).map(n => n.dataset.name).sort()`)
	edges := browsertest.Eval[[]string](t, ctx, `Array.from(document.querySelectorAll("#f-graph .edge")).map(e => e.dataset.from + "->" + e.dataset.to).sort()`)
	if want := []string{"api", "backend", "web"}; !slices.Equal(nodes, want) {
		t.Errorf("graph nodes = %v, want %v", nodes, want)
	}
	if want := []string{"api->backend", "web->api"}; !slices.Equal(edges, want) {
		t.Errorf("graph edges = %v, want %v", edges, want)
	}
	if colour := browsertest.Eval[string](t, ctx, `getComputedStyle(document.querySelector('#f-graph .node[data-name=api] rect')).stroke`); colour == "" || colour == "none" {
		t.Errorf("graph node api has no phase colour: %q", colour)
	}

	// kill -9: the page shows the crash, then the new process, without a
	// reload. The backend holds the restart (a back-off) until the page has
	// shown the crash, so the test sees both states whatever the load.
	browsertest.Run(t, ctx, "mark the page and record api's phases", chromedp.Evaluate[chromedp.Void](`
		window.__sameDocument = true;
		window.__apiPhases = [document.getElementById("row-api").dataset.phase];
		new MutationObserver(() => {
			const r = document.getElementById("row-api");
			if (r && window.__apiPhases[window.__apiPhases.length - 1] !== r.dataset.phase) window.__apiPhases.push(r.dataset.phase);
		}).observe(document.getElementById("rows"), {subtree: true, childList: true, attributes: true});
		undefined`))
	oldAPI := rows["api"].PID
	release := b.setHold()
	if err := syscall.Kill(oldAPI, syscall.SIGKILL); err != nil {
		t.Fatalf("kill -9 %d: %v", oldAPI, err)
	}
	browsertest.WaitJS(t, ctx, "api crashed, one restart", `(r => r && r.dataset.phase === "CrashLoopBackOff" && r.dataset.restarts === "1")(document.getElementById("row-api"))`)
	release()
	browsertest.WaitJS(t, ctx, "api back with a new pid", fmt.Sprintf(`(r => r && r.dataset.phase === "Running" && r.dataset.pid !== "0" && r.dataset.pid !== "%d")(document.getElementById("row-api"))`, oldAPI))
	if !browsertest.Eval[bool](t, ctx, `window.__sameDocument === true`) {
		t.Fatal("the page was reloaded")
	}
	phases := browsertest.Eval[[]string](t, ctx, `window.__apiPhases`)
	if i := slices.Index(phases, "CrashLoopBackOff"); i < 1 || phases[0] != "Running" || phases[len(phases)-1] != "Running" {
		t.Errorf("api's phases in the page: %v, want Running, CrashLoopBackOff, ..., Running", phases)
	}
	rows = browsertest.Rows(t, ctx)
	apiSt, _ := b.status().Get("api")
	if rows["api"].PID != apiSt.PID || rows["api"].Restarts != 1 || healthPID(t, apiSt.Port) != apiSt.PID {
		t.Errorf("after kill -9: page %+v, status pid %d restarts %d; want the same new pid, answering on its port, 1 restart", rows["api"], apiSt.PID, apiSt.Restarts)
	}

	// The Restart button.
	oldWeb := rows["web"].PID
	browsertest.Run(t, ctx, "click web's Restart", chromedp.Click(chromedp.CSS(`#row-web button[data-action=restart]`)))
	browsertest.WaitJS(t, ctx, "web restarted", fmt.Sprintf(`(r => r && r.dataset.phase === "Running" && r.dataset.pid !== "0" && r.dataset.pid !== "%d")(document.getElementById("row-web"))`, oldWeb))
	webSt, _ := b.status().Get("web")
	if got := browsertest.Rows(t, ctx)["web"].PID; got != webSt.PID || healthPID(t, webSt.Port) != webSt.PID {
		t.Errorf("after Restart: page pid %d, status pid %d; want the same, answering on its port", got, webSt.PID)
	}
	if err := syscall.Kill(oldWeb, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("web's old pid %d: kill -0 = %v, want ESRCH (gone)", oldWeb, err)
	}
	if n := b.requests.Load(); n != 1 {
		t.Errorf("the backend got %d requests, want 1 (the Restart)", n)
	}

	// The server page: status, evidence, events and the live log.
	browsertest.Run(t, ctx, "open api's page", chromedp.Click(chromedp.CSS(`#row-api td.name a`)))
	browsertest.WaitJS(t, ctx, "api's page", `location.pathname === "/servers/api"`)
	// Each start prints its line twice: the test server writes -print on
	// stdout and stderr, both the log file.
	browsertest.WaitJS(t, ctx, "api's page, live, with two starts in its log",
		`document.body.dataset.page === "server" && document.getElementById("live").dataset.state === "live" &&
		 Array.from(document.querySelectorAll("#log div")).filter(d => d.textContent.startsWith("api: listening")).length === 2*2`)
	html := browsertest.Eval[string](t, ctx, `document.documentElement.outerHTML`)
	for _, want := range []string{"killed by signal 9 (SIGKILL)", "API_TOKEN", "(values not shown)", "boot id", "depends on", "./bin/api"} {
		if !strings.Contains(strings.ToLower(html), strings.ToLower(want)) {
			t.Errorf("api's page lacks %q", want)
		}
	}
	if strings.Contains(html, secretValue) {
		t.Fatal("api's page shows an env value")
	}
	apiSt, _ = b.status().Get("api")
	browsertest.Run(t, ctx, "click api's Restart on its page", chromedp.Click(chromedp.CSS(`#s-head button[data-action=restart]`)))
	browsertest.WaitJS(t, ctx, "a third start in api's log, followed live",
		`Array.from(document.querySelectorAll("#log div")).filter(d => d.textContent.startsWith("api: listening")).length === 3*2`)
	browsertest.WaitJS(t, ctx, "api's page shows the new pid", fmt.Sprintf(`(h => h && h.dataset.phase === "Running" && h.dataset.pid !== "%d")(document.querySelector("#s-head .s-head"))`, apiSt.PID))

	// A cross-origin form post from a page on another loopback port: the
	// browser sends it (and, the site being the same, the cookie); the
	// dashboard refuses it and nothing reaches the backend.
	before := b.requests.Load()
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, `<form id=f method=post action="%s/servers/api/stop"></form><script>document.getElementById("f").submit()</script>`, s.base)
	}))
	t.Cleanup(evil.Close)
	browsertest.Run(t, ctx, "open a page of another origin", chromedp.Navigate(evil.URL))
	browsertest.WaitJS(t, ctx, "the dashboard's refusal", `location.href.endsWith("/servers/api/stop") && document.body && document.body.innerText.includes("403 Forbidden")`)
	if n := b.requests.Load(); n != before {
		t.Fatalf("a cross-origin post reached the backend (%d requests, %d before)", n, before)
	}
	if st, _ := b.status().Get("api"); st.Phase != reconciler.PhaseRunning {
		t.Fatalf("api after the refused stop: %s, want Running", st.Phase)
	}
}

// TestBrowserScreenshots writes the fleet page and a server page, light and
// dark, and the fleet page in a narrow window, as PNG files (the README
// shows copies from docs/). The fleet has one server in a crash loop and
// one that was killed and came back, so that the pictures show more than
// green.
func TestBrowserScreenshots(t *testing.T) {
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
	ctx := browsertest.New(t, 1280, 900)
	fleet := append(append([]fleetServer(nil), quickStart...), fleetServer{"worker", []string{"backend"}}, fleetServer{"cache", nil}, fleetServer{"admin", []string{"api", "cache"}})
	b := startProcBackend(t, fleet)
	s := serve(t, Config{Backend: b, Log: testr.New(t)})

	// api is killed and comes back (its page then shows a last exit and
	// the events around it); worker crashes and stays in back-off, its
	// restart held until the end of the test.
	api, _ := b.status().Get("api")
	if err := syscall.Kill(api.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	b.waitFor(t, "api", func(s reconciler.ServerStatus) bool { return s.Ready && s.Restarts == 1 })
	release := b.setHold()
	t.Cleanup(release)
	worker, _ := b.status().Get("worker")
	if err := syscall.Kill(worker.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	b.waitFor(t, "worker", func(s reconciler.ServerStatus) bool { return s.Phase == reconciler.PhaseCrashLoopBackOff })

	shot := func(name string, width, height int64, dark bool, url, ready string) {
		t.Helper()
		scheme := "light"
		if dark {
			scheme = "dark"
		}
		png := browsertest.Screenshot(t, ctx, width, height, scheme, url, ready)
		path := filepath.Join(dir, name+"-"+scheme+".png")
		if err := os.WriteFile(path, png, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s (%d bytes)", path, len(png))
	}
	browsertest.Run(t, ctx, "open the printed URL", chromedp.Navigate(s.url))
	fleetReady := `document.querySelectorAll("#rows tr").length === 6 && document.querySelector("#row-worker").dataset.phase === "CrashLoopBackOff"`
	serverReady := `document.querySelectorAll("#log div").length > 0 && document.querySelectorAll("#s-events li").length > 0`
	for _, dark := range []bool{false, true} {
		shot("fleet", 1280, 900, dark, s.base+"/", fleetReady)
		shot("server", 1280, 900, dark, s.base+"/servers/api", serverReady)
	}
	shot("fleet-narrow", 390, 844, false, s.base+"/", fleetReady)
	if w := browsertest.Eval[int](t, ctx, `document.documentElement.scrollWidth`); w > 390 {
		t.Errorf("the fleet page is %d px wide in a 390 px window: it does not fit", w)
	}
}
