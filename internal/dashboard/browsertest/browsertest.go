// Package browsertest drives the dashboard in a real headless Chromium for
// tests: the dashboard's own (over real processes) and the quick start's
// (over a real `procfleet up --ui`). Only test code imports it.
//
// Guarantees: every wait is bounded (Wait) and fails the test saying what
// the page showed instead; a wait for the page is on its DOM changes (a
// MutationObserver), not a timer; the browser and every process of its
// profile end, and the profile folder is removed, at the test's cleanup.
package browsertest

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
)

// Wait bounds every wait of a browser test: Chromium's start, a step, a
// page's update on a loaded 2-core machine.
const Wait = 60 * time.Second

// Chromium finds Debian's chromium (or $PROCFLEET_CHROMIUM), or skips the
// test saying how to install it.
func Chromium(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("PROCFLEET_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("browser test skipped: no chromium on PATH (Debian: apt-get install -y chromium; or set PROCFLEET_CHROMIUM)")
	return ""
}

// New starts a headless Chromium for the test, width x height, with the
// flags this machine needs (no network but loopback: see
// .library/env/machines/go.md) and a new empty profile; chromedp makes
// that profile folder, and at cleanup kills every process that uses it
// and removes it.
func New(t testing.TB, width, height int) context.Context {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(Chromium(t)),
		chromedp.Flag("headless", true),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true),
		chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("hide-scrollbars", true),
		chromedp.WindowSize(width, height),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() {
		cancel()
		cancelAlloc() // waits for the browser to exit
	})
	// The first Run starts the browser: no timeout on it (it would end the
	// browser with it), but the test's own bound on the start.
	started := make(chan error, 1)
	go func() { started <- chromedp.Do(ctx) }()
	select {
	case err := <-started:
		if err != nil {
			t.Fatalf("start chromium: %v", err)
		}
	case <-time.After(Wait):
		t.Fatalf("chromium did not start in %s", Wait)
	}
	return ctx
}

// Run runs steps, within Wait.
func Run(t testing.TB, ctx context.Context, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	cctx, cancel := context.WithTimeout(ctx, Wait)
	defer cancel()
	if err := chromedp.Do(cctx, steps...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// Eval evaluates a JavaScript expression in the page.
func Eval[T any](t testing.TB, ctx context.Context, expr string) T {
	t.Helper()
	cctx, cancel := context.WithTimeout(ctx, Wait)
	defer cancel()
	v, err := chromedp.Run(cctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// WaitJS waits until a JavaScript predicate holds in the page, evaluated
// at each change of the DOM (a MutationObserver, not a timer), at most
// Wait; on failure it shows what the page had instead (its rows, its
// stream's state, its log). A wait cut by a navigation (the poll does not
// survive one) starts again in the new document.
func WaitJS(t testing.TB, ctx context.Context, what, predicate string) {
	t.Helper()
	deadline := time.Now().Add(Wait)
	var err error
	for time.Now().Before(deadline) {
		cctx, cancel := context.WithDeadline(ctx, deadline.Add(5*time.Second))
		_, err = chromedp.Run(cctx, chromedp.Poll[chromedp.Void](predicate, chromedp.WithPollingMutation(), chromedp.WithPollingTimeout(time.Until(deadline))))
		cancel()
		if err == nil {
			return
		}
		if errors.Is(err, chromedp.ErrPollingTimeout) || ctx.Err() != nil {
			break
		}
	}
	shown, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`location.pathname + ": " +
		Array.from(document.querySelectorAll("[data-name][data-phase]")).map(r => r.dataset.name + "=" + r.dataset.phase + "/" + r.dataset.pid + "/" + r.dataset.restarts).join(" ") +
		"; live: " + (document.getElementById("live") || {dataset: {}}).dataset.state +
		"; log: " + JSON.stringify(Array.from(document.querySelectorAll("#log div")).map(d => d.textContent)) +
		"; text: " + JSON.stringify(((document.body || {}).innerText || "").slice(0, 200))`))
	t.Fatalf("%s: the page never showed it (%v); page: %s", what, err, shown)
}

// Row is a server's row on the fleet page.
type Row struct {
	Phase    string `json:"phase"`
	PID      int    `json:"pid"`
	Restarts int    `json:"restarts"`
	Ready    bool   `json:"ready"`
}

// Rows returns the fleet page's rows by server name.
func Rows(t testing.TB, ctx context.Context) map[string]Row {
	t.Helper()
	return Eval[map[string]Row](t, ctx, `Object.fromEntries(Array.from(document.querySelectorAll("#rows tr")).map(r => [r.dataset.name, {phase: r.dataset.phase, pid: +r.dataset.pid, restarts: +r.dataset.restarts, ready: r.dataset.ready === "true"}]))`)
}

// Screenshot sets the viewport and the colour scheme ("light", "dark"),
// opens url, waits until ready holds (and the page's stream is live), and
// returns a PNG of the whole page.
func Screenshot(t testing.TB, ctx context.Context, width, height int64, scheme, url, ready string) []byte {
	t.Helper()
	Run(t, ctx, "set "+scheme+" and open "+url,
		chromedp.EmulateViewport(width, height),
		chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			_, err := cdp.Call(ctx, tg, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
				Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: scheme}},
			})
			return err
		}),
		chromedp.Navigate(url))
	WaitJS(t, ctx, url+" ready", `document.getElementById("live").dataset.state === "live" && `+ready)
	cctx, cancel := context.WithTimeout(ctx, Wait)
	defer cancel()
	png, err := chromedp.Run(cctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot of %s: %v", url, err)
	}
	return png
}
