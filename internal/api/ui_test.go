package api

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-logr/logr/testr"

	"github.com/procfleet/procfleet/internal/testutil"
)

// TestUI asks a real socket for the dashboard's URL: the URL the server
// was given, or, from an up without a dashboard, a not-found error that
// says how to start one. The Backend is never asked.
func TestUI(t *testing.T) {
	const url = "http://127.0.0.1:7070/?token=abc"
	for _, tt := range []struct {
		name, url string
	}{{"with a dashboard", url}, {"without", ""}} {
		t.Run(tt.name, func(t *testing.T) {
			b := &fakeBackend{}
			l, err := Listen(filepath.Join(t.TempDir(), "procfleet.sock"), testr.New(t))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = l.Close() })
			srv := &Server{Backend: b, Log: testr.New(t), DashboardURL: tt.url}
			testutil.RunUntilCleanup(t, "Serve", func(ctx context.Context) error { return srv.Serve(ctx, l) })
			c := dial(t, l.Path())

			got, err := c.UI(testContext(t))
			switch {
			case tt.url != "" && (err != nil || got != tt.url):
				t.Errorf("UI() = %q, %v; want %q", got, err, tt.url)
			case tt.url == "" && (!errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "--ui ADDR")):
				t.Errorf("UI() without a dashboard = %q, %v; want a not-found error naming --ui ADDR", got, err)
			}
			if calls := b.Calls(); len(calls) != 0 {
				t.Errorf("the backend was called: %v", calls)
			}
		})
	}
}

// TestUIRejected: /v1/ui takes a GET without a query, nothing else.
func TestUIRejected(t *testing.T) {
	srv := &Server{Backend: &fakeBackend{}, DashboardURL: "http://127.0.0.1:1/?token=x"}
	h := srv.Handler()
	for _, tt := range []struct {
		method, target string
		want           int
	}{
		{http.MethodPost, "/v1/ui", http.StatusMethodNotAllowed},
		{http.MethodGet, "/v1/ui?x=1", http.StatusBadRequest},
		{http.MethodGet, "/v1/ui", http.StatusOK},
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(tt.method, tt.target, nil))
		if rec.Code != tt.want {
			t.Errorf("%s %s = %d, want %d", tt.method, tt.target, rec.Code, tt.want)
		}
	}
}
