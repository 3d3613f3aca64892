package dashboard

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/procfleet/procfleet/reconciler"
)

// sse reads Server-Sent Events from a real HTTP stream.
type sse struct {
	t      testing.TB
	events chan [2]string // event name, data
	cancel context.CancelFunc
	done   chan struct{}
}

// openSSE connects to path with c and reads its events until the test
// ends.
func openSSE(t testing.TB, c *http.Client, url string) *sse {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	resp, err := c.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		cancel()
		resp.Body.Close()
		t.Fatalf("GET %s: %s %s", url, resp.Status, resp.Header.Get("Content-Type"))
	}
	s := &sse{t: t, events: make(chan [2]string, 64), cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		var name, data string
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if name != "" {
					select {
					case s.events <- [2]string{name, data}:
					case <-ctx.Done():
						return
					}
				}
				name, data = "", ""
			case strings.HasPrefix(line, "event: "):
				name = line[len("event: "):]
			case strings.HasPrefix(line, "data: "):
				data += line[len("data: "):]
			}
		}
	}()
	t.Cleanup(s.close)
	return s
}

func (s *sse) close() {
	s.cancel()
	select {
	case <-s.done:
	case <-time.After(30 * time.Second):
		s.t.Error("the SSE reader did not end")
	}
}

// next returns the next event named name, at most 30 s away.
func (s *sse) next(name string) string {
	s.t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case ev := <-s.events:
			if ev[0] == name {
				return ev[1]
			}
		case <-deadline:
			s.t.Fatalf("no %q event within 30 s", name)
		}
	}
}

func (s *sse) patch() patch {
	s.t.Helper()
	var p patch
	if err := json.Unmarshal([]byte(s.next("patch")), &p); err != nil {
		s.t.Fatal(err)
	}
	return p
}

// TestFleetStreamSendsWhatChanged: the first patch holds every fragment
// and row; after one server changes, the next holds that row (and the
// parts its change moved), nothing else; a removed server leaves the
// order.
func TestFleetStreamSendsWhatChanged(t *testing.T) {
	b := newTableBackend(syntheticFleet(10))
	s := serve(t, Config{Backend: b, MinInterval: time.Millisecond})
	ev := openSSE(t, s.client(t), s.base+"/events")

	p := ev.patch()
	if len(p.Rows) != 10 || len(p.Order) != 10 || p.Parts["f-graph"] == "" || p.Parts["f-summary"] == "" {
		t.Fatalf("first patch: %d rows, order %v, parts %v", len(p.Rows), p.Order, keys(p.Parts))
	}

	b.set(func(s *Snapshot) { s.Status.Servers[3].Restarts = 7 })
	p = ev.patch()
	if len(p.Rows) != 1 || !strings.Contains(p.Rows["s003"], `data-restarts="7"`) || p.Order != nil || len(p.Parts) != 0 {
		t.Fatalf("after a restart count changed: rows %v, order %v, parts %v; want row s003 only", keys(p.Rows), p.Order, keys(p.Parts))
	}

	b.set(func(s *Snapshot) {
		s.Status.Servers[4].Phase, s.Status.Servers[4].Ready = reconciler.PhaseFailed, false
	})
	p = ev.patch()
	if len(p.Rows) != 1 || len(p.Nodes) != 1 || !strings.Contains(p.Nodes["s004"], `data-phase="Failed"`) || p.Parts["f-summary"] == "" || len(p.Parts) != 1 {
		t.Fatalf("after a phase changed: rows %v, nodes %v, parts %v; want row and graph node s004, and the summary", keys(p.Rows), keys(p.Nodes), keys(p.Parts))
	}

	b.set(func(s *Snapshot) {
		s.Status.Servers = s.Status.Servers[1:]
		s.Status.Errors = []reconciler.StatusError{{File: "procfleet.yaml", Line: 7, Field: "spec.port", Message: "port 0 is not allowed"}}
	})
	p = ev.patch()
	if len(p.Order) != 9 || p.Order[0] != "s001" || !strings.Contains(p.Parts["f-banner"], "procfleet.yaml:7") || strings.Contains(p.Parts["f-graph"], `"node-s000"`) || p.Parts["f-graph"] == "" {
		t.Fatalf("after a server left and a file broke: order %v, banner %q, graph redrawn without s000: %v", p.Order, p.Parts["f-banner"], p.Parts["f-graph"] != "")
	}
}

// TestNoPageNoCost: with no page open the dashboard never calls the
// backend, however often the fleet changes; a page that goes away stops
// the calls.
func TestNoPageNoCost(t *testing.T) {
	b := newTableBackend(syntheticFleet(5))
	s := serve(t, Config{Backend: b, MinInterval: time.Millisecond})
	c := s.client(t) // the first visit renders the fleet page once
	base := b.snapshots.Load()
	for i := range 20 {
		b.set(func(s *Snapshot) { s.Status.Servers[0].Restarts = i })
	}
	if n := b.snapshots.Load() - base; n != 0 {
		t.Fatalf("%d Snapshot calls with no page open", n)
	}
	ev := openSSE(t, c, s.base+"/events")
	ev.patch()
	b.set(func(s *Snapshot) { s.Status.Servers[0].Restarts = 99 })
	ev.patch()
	ev.close()
	// The stream's handler ends when its request does; wait for its slot.
	deadline := time.Now().Add(30 * time.Second)
	for len(s.d.streams) > 0 {
		if time.Now().After(deadline) {
			t.Fatal("the stream did not end 30 s after its page went away")
		}
		time.Sleep(5 * time.Millisecond) // bounded by the deadline above
	}
	base = b.snapshots.Load()
	for i := range 20 {
		b.set(func(s *Snapshot) { s.Status.Servers[0].Restarts = i })
	}
	if n := b.snapshots.Load() - base; n != 0 {
		t.Fatalf("%d Snapshot calls after the page went away", n)
	}
}

// TestStreamThrottles: a fleet changing continuously gets at most one
// update per MinInterval.
func TestStreamThrottles(t *testing.T) {
	b := newTableBackend(syntheticFleet(5))
	const interval = 100 * time.Millisecond
	s := serve(t, Config{Backend: b, MinInterval: interval})
	ev := openSSE(t, s.client(t), s.base+"/events")
	ev.patch()
	ctx, cancel := context.WithCancel(context.Background())
	changer := make(chan struct{})
	go func() {
		defer close(changer)
		for i := 0; ctx.Err() == nil; i++ {
			b.set(func(s *Snapshot) { s.Status.Servers[0].Restarts = i })
			time.Sleep(time.Millisecond) // a busy fleet: a change every millisecond
		}
	}()
	start := time.Now()
	base := b.snapshots.Load()
	const updates = 5
	for range updates {
		ev.patch()
	}
	elapsed := time.Since(start)
	cancel()
	<-changer
	// Five updates after the first take at least four intervals: a lower
	// bound, which load cannot break (only slow it down).
	if elapsed < (updates-1)*interval {
		t.Fatalf("%d updates in %s, faster than one per %s", updates, elapsed, interval)
	}
	if n := b.snapshots.Load() - base; n > updates+1 {
		t.Fatalf("%d Snapshot calls for %d updates", n, updates)
	}
}

// TestServerStreamFollowsLog: a server's page gets its log's last lines,
// then each line as it is written, cleaned; a log that appears later is
// followed once it exists.
func TestServerStreamFollowsLog(t *testing.T) {
	dir := t.TempDir()
	logPath := filepath.Join(dir, "s000.log")
	b := newTableBackend(syntheticFleet(2))
	b.details["s000"] = Detail{LogPath: logPath}
	s := serve(t, Config{Backend: b, MinInterval: time.Millisecond, LogLines: 2})
	ev := openSSE(t, s.client(t), s.base+"/servers/s000/events")
	if p := ev.patch(); !strings.Contains(p.Parts["s-head"], "s000") {
		t.Fatalf("first patch: %v", keys(p.Parts))
	}
	// The log does not exist yet: it is looked for again at each change.
	if err := os.WriteFile(logPath, []byte("one\ntwo\nthree\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	b.set(func(*Snapshot) {})
	ev.next("logreset")
	if got := ev.next("log"); got != `["two","three"]` {
		t.Fatalf("first log event %s, want the last 2 lines", got)
	}
	f, err := os.OpenFile(logPath, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString("\x1b[32mfour\x1b[0m\n"); err != nil {
		t.Fatal(err)
	}
	if got := ev.next("log"); got != `["four"]` {
		t.Fatalf("log event %s, want [\"four\"] without escapes", got)
	}
}

func TestServerPageNotFound(t *testing.T) {
	b := newTableBackend(syntheticFleet(1))
	s := serve(t, Config{Backend: b})
	c := s.client(t)
	for _, p := range []string{"/servers/nope", "/servers/nope/events", "/servers/UPPER", "/nope"} {
		resp, err := c.Get(s.base + p)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s: %s, want 404", p, resp.Status)
		}
	}
}

func TestTooManyPages(t *testing.T) {
	b := newTableBackend(syntheticFleet(1))
	s := serve(t, Config{Backend: b, MaxStreams: 1})
	c := s.client(t)
	openSSE(t, c, s.base+"/events").patch()
	resp, err := c.Get(s.base + "/events")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("a second page with MaxStreams 1: %s, want 503", resp.Status)
	}
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestServerStreamRetriesLog: a log that cannot be followed (here a
// folder in its place) is tried again at the next change, and the page
// is told to clear what it showed before the tail comes again.
func TestServerStreamRetriesLog(t *testing.T) {
	dir := t.TempDir()
	logPath := filepath.Join(dir, "s000.log")
	if err := os.Mkdir(logPath, 0o700); err != nil {
		t.Fatal(err)
	}
	b := newTableBackend(syntheticFleet(1))
	b.details["s000"] = Detail{LogPath: logPath}
	s := serve(t, Config{Backend: b, MinInterval: time.Millisecond})
	ev := openSSE(t, s.client(t), s.base+"/servers/s000/events")
	ev.patch()
	ev.next("logreset") // the first try, which fails on the folder
	if err := os.Remove(logPath); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(logPath, []byte("back\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	b.set(func(*Snapshot) {})
	ev.next("logreset")
	if got := ev.next("log"); got != `["back"]` {
		t.Fatalf("log event %s after the retry, want [\"back\"]", got)
	}
}
