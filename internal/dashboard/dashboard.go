package dashboard

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"path"
	"time"

	"github.com/go-logr/logr"

	"github.com/procfleet/procfleet/internal/api"
)

// Defaults of Config.
const (
	// DefaultMinInterval is the least time between two updates of one page:
	// a fleet changing at once (100 servers restarting) becomes a few
	// updates a second, not hundreds, and each costs one Snapshot and one
	// render.
	DefaultMinInterval = 500 * time.Millisecond
	// DefaultLogLines is how much of a server's log its page shows first.
	DefaultLogLines = 200
	// DefaultMaxStreams bounds the pages connected at once.
	DefaultMaxStreams = 32
)

// Timeouts of the HTTP server.
const (
	readHeaderTimeout = 5 * time.Second
	writeTimeout      = 30 * time.Second // whole responses; streams set it per event
	idleTimeout       = 60 * time.Second
	// heartbeat is the interval of a comment on an idle stream, so that a
	// proxy (an editor's port forward) does not close it as idle.
	heartbeat = 25 * time.Second
	// requestTimeout bounds the wait for the reconciler to take a request.
	requestTimeout = 30 * time.Second
	// shutdownGrace bounds Serve's wait for requests in flight at its end.
	shutdownGrace = 5 * time.Second
)

// Config configures a Dashboard. Only Backend is required.
type Config struct {
	// Backend is the running reconciler.
	Backend Backend
	// Log receives refused requests (V(1)) and requested actions (V(0)).
	// The zero value discards.
	Log logr.Logger
	// MinInterval is the least time between two updates sent to one page;
	// 0 means DefaultMinInterval.
	MinInterval time.Duration
	// LogLines is how many of a server's last log lines its page shows
	// before following; 0 means DefaultLogLines.
	LogLines int
	// MaxStreams bounds the pages connected at once (more get 503); 0 means
	// DefaultMaxStreams.
	MaxStreams int
}

// Dashboard serves the live dashboard: the fleet page, a page per server,
// their Server-Sent Event streams, and stop/start/restart requests.
type Dashboard struct {
	cfg     Config
	token   string
	cookie  string
	streams chan struct{} // one slot per connected page
	handler http.Handler
}

// New returns a Dashboard with a fresh random token.
func New(cfg Config) (*Dashboard, error) {
	if cfg.Backend == nil {
		return nil, errors.New("dashboard: no backend")
	}
	if cfg.MinInterval <= 0 {
		cfg.MinInterval = DefaultMinInterval
	}
	if cfg.LogLines <= 0 {
		cfg.LogLines = DefaultLogLines
	}
	if cfg.MaxStreams <= 0 {
		cfg.MaxStreams = DefaultMaxStreams
	}
	cfg.Log = cfg.Log.WithName("dashboard")
	tok, err := newToken()
	if err != nil {
		return nil, err
	}
	d := &Dashboard{cfg: cfg, token: tok, cookie: cookieName(tok), streams: make(chan struct{}, cfg.MaxStreams)}

	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", d.fleetPage)
	mux.HandleFunc("GET /events", d.fleetEvents)
	mux.HandleFunc("GET /servers/{name}", d.serverPage)
	mux.HandleFunc("GET /servers/{name}/events", d.serverEvents)
	mux.HandleFunc("POST /servers/{name}/{action}", d.act)
	static, _ := fs.Sub(assets, "assets")
	files := http.FileServerFS(static)
	mux.HandleFunc("GET /assets/{file}", func(w http.ResponseWriter, r *http.Request) {
		switch path.Ext(r.PathValue("file")) {
		case ".css", ".js", ".svg":
			http.StripPrefix("/assets", files).ServeHTTP(w, r)
		default:
			http.NotFound(w, r)
		}
	})
	d.handler = &guard{token: tok, cookie: d.cookie, next: mux, refuse: d.refuse}
	return d, nil
}

// Handler returns the dashboard's HTTP handler, guarded (see guard).
func (d *Dashboard) Handler() http.Handler { return d.handler }

// URL returns the address to open, with the token, for a listener's
// address: http://127.0.0.1:7070/?token=... It is a secret: print it to
// the user who ran up, nowhere else.
func (d *Dashboard) URL(addr net.Addr) string {
	u := url.URL{Scheme: "http", Host: addr.String(), Path: "/", RawQuery: tokenParam + "=" + d.token}
	return u.String()
}

// Serve serves the dashboard on l until ctx ends, then closes every
// stream and returns nil once the requests in flight have ended (at most
// shutdownGrace later). l should come from Listen, which refuses every
// address but loopback.
func (d *Dashboard) Serve(ctx context.Context, l net.Listener) error {
	reqCtx, cancelReqs := context.WithCancel(context.Background())
	defer cancelReqs()
	srv := &http.Server{
		Handler:           d.handler,
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       readHeaderTimeout,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    16 << 10,
		BaseContext:       func(net.Listener) context.Context { return reqCtx },
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(l) }()
	select {
	case err := <-done:
		return fmt.Errorf("dashboard: serve on %s: %w", l.Addr(), err)
	case <-ctx.Done():
	}
	cancelReqs() // ends the streams, which would keep Shutdown waiting
	sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		_ = srv.Close()
	}
	if err := <-done; !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("dashboard: serve on %s: %w", l.Addr(), err)
	}
	return nil
}

// refuse answers 403 and says why, and logs it without the token.
func (d *Dashboard) refuse(w http.ResponseWriter, r *http.Request, why string) {
	d.cfg.Log.V(1).Info("Refused a request", "remote", r.RemoteAddr, "method", r.Method, "path", r.URL.Path, "host", r.Host, "origin", r.Header.Get("Origin"), "why", why)
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusForbidden)
	_, _ = fmt.Fprintf(w, "403 Forbidden: %s\n", why)
}

func (d *Dashboard) fleetPage(w http.ResponseWriter, r *http.Request) {
	v := newFleetView(d.cfg.Backend.Snapshot(), layoutFleet)
	d.writePage(w, http.StatusOK, "fleet", v)
}

func (d *Dashboard) serverPage(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	v, ok := d.serverView(r.Context(), name)
	if !ok {
		d.writePage(w, http.StatusNotFound, "notfound", name)
		return
	}
	d.writePage(w, http.StatusOK, "server", v)
}

// serverView gathers a server's page; false when there is no such server.
func (d *Dashboard) serverView(ctx context.Context, name string) (serverView, bool) {
	if api.CheckName(name) != nil {
		return serverView{}, false
	}
	snap := d.cfg.Backend.Snapshot()
	det, err := d.cfg.Backend.Detail(ctx, name)
	v := newServerView(name, snap, det, err)
	if errors.Is(err, ErrNotFound) {
		v.DetailErr = ""
		if !v.Known && v.Spec == nil {
			return v, false
		}
	}
	return v, true
}

func (d *Dashboard) writePage(w http.ResponseWriter, code int, name string, data any) {
	b := bufPool.Get().(*bytes.Buffer)
	b.Reset()
	defer bufPool.Put(b)
	if err := page(b, name, data); err != nil {
		d.cfg.Log.Error(err, "Cannot render a page", "page", name)
		http.Error(w, "render: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(code)
	_, _ = w.Write(b.Bytes())
}

// act carries out a button: POST /servers/{name}/{stop|start|restart}.
// A fetch from the page (Accept: application/json) gets JSON; a plain form
// post (no JavaScript) is sent back to the server's page.
func (d *Dashboard) act(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	a, err := ParseAction(r.PathValue("action"))
	if err == nil {
		err = api.CheckName(name)
	}
	if err != nil {
		d.answer(w, r, name, http.StatusNotFound, err)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 4<<10)
	ctx, cancel := context.WithTimeout(r.Context(), requestTimeout)
	defer cancel()
	d.cfg.Log.Info("Request from the dashboard", "server", name, "action", string(a))
	err = d.cfg.Backend.Request(ctx, name, a)
	code := http.StatusOK
	switch {
	case err == nil:
	case errors.Is(err, ErrNotFound):
		code = http.StatusNotFound
	case errors.Is(err, context.DeadlineExceeded):
		code = http.StatusGatewayTimeout
	default:
		code = http.StatusConflict
	}
	if err != nil {
		d.cfg.Log.Info("Request from the dashboard refused", "server", name, "action", string(a), "error", err.Error())
	}
	d.answer(w, r, name, code, err)
}

// answer replies to an action.
func (d *Dashboard) answer(w http.ResponseWriter, r *http.Request, name string, code int, err error) {
	if r.Header.Get("Accept") != "application/json" {
		if err != nil {
			http.Error(w, err.Error(), code)
			return
		}
		http.Redirect(w, r, "/servers/"+url.PathEscape(name), http.StatusSeeOther)
		return
	}
	body := map[string]any{"ok": err == nil}
	if err != nil {
		body["error"] = err.Error()
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(body)
}
