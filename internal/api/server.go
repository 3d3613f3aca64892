package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/go-logr/logr"
)

// APIVersion is the version answered by /v1/ping.
const APIVersion = "v1"

// Timeouts of the HTTP server.
const (
	readHeaderTimeout = 5 * time.Second
	readBodyTimeout   = 10 * time.Second
	idleTimeout       = time.Minute
	shutdownTimeout   = 5 * time.Second
	maxHeaderBytes    = 16 << 10
)

// Server serves a Backend. The zero value is not usable: Backend is required.
type Server struct {
	// Backend answers the requests. Required.
	Backend Backend
	// Log receives one line per request at V(1), refused connections and
	// handler errors at V(0). The zero value discards.
	Log logr.Logger
	// MaxBodyBytes bounds a request body; 0 means DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// DashboardURL is the URL (with its token) of the dashboard this up
	// serves, answered by GET /v1/ui; empty means none.
	DashboardURL string
}

// Serve answers requests on l until ctx is done, then stops accepting,
// gives in-flight requests up to 5 s (their contexts are cancelled with
// ctx) and closes l. It returns nil after ctx is done, or the error that
// stopped serving.
func (s *Server) Serve(ctx context.Context, l net.Listener) error {
	if s.Backend == nil {
		return errors.New("api: serve: Backend is required")
	}
	baseCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	hs := &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: readHeaderTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		BaseContext:       func(net.Listener) context.Context { return baseCtx },
		ErrorLog:          log.New(logWriter{s.Log}, "", 0),
	}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(l) }()
	select {
	case err := <-errc:
		return fmt.Errorf("api: serve %s: %w", l.Addr(), err)
	case <-ctx.Done():
	}
	cancel() // in-flight backend calls end now
	sctx, scancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer scancel()
	if err := hs.Shutdown(sctx); err != nil {
		s.Log.Error(err, "API shutdown did not finish in time; closing connections")
		_ = hs.Close()
	}
	<-errc // http.ErrServerClosed
	return nil
}

// logWriter sends net/http's own error lines (TLS-less here: mostly
// malformed requests and accept errors) to the logger at V(1).
type logWriter struct{ log logr.Logger }

func (w logWriter) Write(p []byte) (int, error) {
	w.log.V(1).Info("HTTP server message", "message", strings.TrimSpace(string(p)))
	return len(p), nil
}

// Handler returns the API's routes, for Serve or for tests.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/v1/ping", s.route(http.MethodGet, s.ping))
	mux.HandleFunc("/v1/status", s.route(http.MethodGet, s.status))
	mux.HandleFunc("/v1/reload", s.route(http.MethodPost, s.reload))
	mux.HandleFunc("/v1/down", s.route(http.MethodPost, s.down))
	mux.HandleFunc("/v1/events/{name}", s.route(http.MethodGet, s.events))
	mux.HandleFunc("/v1/ui", s.route(http.MethodGet, s.ui))
	for _, v := range Verbs {
		mux.HandleFunc("/v1/"+v, s.route(http.MethodPost, s.verb(v)))
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, fmt.Errorf("no route %s %s", r.Method, r.URL.Path), nil)
	})
	return mux
}

// handlerFunc is a route's body: it returns a result or an error.
type handlerFunc func(ctx context.Context, r *http.Request, body []byte) (any, error)

func (s *Server) route(method string, h handlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		log := s.Log.WithValues("method", r.Method, "path", r.URL.Path)
		if r.Method != method {
			w.Header().Set("Allow", method)
			writeError(w, http.StatusMethodNotAllowed, fmt.Errorf("method %s not allowed on %s, want %s", r.Method, r.URL.Path, method), nil)
			return
		}
		if method == http.MethodGet && r.ContentLength != 0 {
			writeError(w, http.StatusBadRequest, fmt.Errorf("%w: GET with a body", ErrInvalid), nil)
			return
		}
		var body []byte
		if method == http.MethodPost {
			var err error
			if body, err = s.readBody(w, r); err != nil {
				writeError(w, statusOf(err), err, nil)
				return
			}
		}
		result, err := h(r.Context(), r, body)
		code := statusOf(err)
		if err != nil {
			if code >= 500 {
				log.Error(err, "API request failed", "status", code)
			}
			writeError(w, code, err, result)
		} else {
			writeJSON(w, http.StatusOK, result)
		}
		log.V(1).Info("API request", "status", code, "duration", time.Since(start))
	}
}

// readBody reads a request body of at most MaxBodyBytes within
// readBodyTimeout. Only the body's read has a deadline, lifted once it is
// read: a reload with wait may take minutes after it, and net/http cancels a
// request's context when a read deadline passes.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	limit := s.MaxBodyBytes
	if limit <= 0 {
		limit = DefaultMaxBodyBytes
	}
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Now().Add(readBodyTimeout))
	data, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	_ = rc.SetReadDeadline(time.Time{})
	if err != nil {
		return nil, fmt.Errorf("%w: read body: %v", ErrInvalid, err)
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%w: %w (limit %d bytes)", ErrInvalid, errTooLarge, limit)
	}
	return data, nil
}

func (s *Server) ping(context.Context, *http.Request, []byte) (any, error) {
	return PingResponse{API: APIVersion, PID: os.Getpid()}, nil
}

func (s *Server) status(ctx context.Context, r *http.Request, _ []byte) (any, error) {
	names, err := decodeStatusQuery(r.URL.Query())
	if err != nil {
		return nil, err
	}
	return s.Backend.Status(ctx, names)
}

func (s *Server) reload(ctx context.Context, r *http.Request, body []byte) (any, error) {
	if len(r.URL.RawQuery) > 0 {
		return nil, fmt.Errorf("%w: unexpected query", ErrInvalid)
	}
	wait, timeout, err := decodeReload(body)
	if err != nil {
		return nil, err
	}
	return s.Backend.Reload(ctx, wait, timeout)
}

func (s *Server) down(ctx context.Context, r *http.Request, body []byte) (any, error) {
	if len(r.URL.RawQuery) > 0 {
		return nil, fmt.Errorf("%w: unexpected query", ErrInvalid)
	}
	names, err := decodeDown(body)
	if err != nil {
		return nil, err
	}
	return s.Backend.Down(ctx, names)
}

// verb serves POST /v1/<verb>.
func (s *Server) verb(verb string) handlerFunc {
	return func(ctx context.Context, r *http.Request, body []byte) (any, error) {
		if len(r.URL.RawQuery) > 0 {
			return nil, fmt.Errorf("%w: unexpected query", ErrInvalid)
		}
		names, wait, timeout, err := decodeVerb(body)
		if err != nil {
			return nil, err
		}
		return s.Backend.Verb(ctx, verb, names, wait, timeout)
	}
}

func (s *Server) events(ctx context.Context, r *http.Request, _ []byte) (any, error) {
	if len(r.URL.RawQuery) > 0 {
		return nil, fmt.Errorf("%w: unexpected query", ErrInvalid)
	}
	name := r.PathValue("name")
	if err := CheckName(name); err != nil {
		return nil, err
	}
	return s.Backend.Events(ctx, name)
}

// statusOf maps an error to an HTTP status.
func statusOf(err error) int {
	switch {
	case err == nil:
		return http.StatusOK
	case errors.Is(err, errTooLarge):
		return http.StatusRequestEntityTooLarge
	case errors.Is(err, ErrInvalid):
		return http.StatusBadRequest
	case errors.Is(err, ErrNotFound):
		return http.StatusNotFound
	case errors.Is(err, ErrFailed):
		return http.StatusConflict
	case errors.Is(err, context.DeadlineExceeded):
		return http.StatusGatewayTimeout
	case errors.Is(err, context.Canceled):
		return http.StatusServiceUnavailable
	default:
		return http.StatusInternalServerError
	}
}

func writeError(w http.ResponseWriter, code int, err error, result any) {
	body := errorBody{Error: err.Error()}
	if result != nil {
		if raw, merr := json.Marshal(result); merr == nil {
			body.Result = raw
		}
	}
	writeJSON(w, code, body)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		code = http.StatusInternalServerError
		data, _ = json.Marshal(errorBody{Error: "encode result: " + err.Error()})
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	_, _ = w.Write(append(data, '\n'))
}
