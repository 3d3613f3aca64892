package dashboard

import (
	"context"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"testing"

	"github.com/procfleet/procfleet/internal/testserver"
	"github.com/procfleet/procfleet/internal/testutil"
)

func TestMain(m *testing.M) {
	testserver.RunIfHelper()
	if mode := os.Getenv(benchServeEnv); mode != "" {
		os.Exit(benchServe(mode, os.Stdin, os.Stdout))
	}
	os.Exit(m.Run())
}

// served is a Dashboard listening on a loopback port for one test.
type served struct {
	d    *Dashboard
	addr net.Addr
	url  string // with the token
	base string // http://127.0.0.1:PORT
}

// serve starts a Dashboard on 127.0.0.1 with a free port until the test
// ends.
func serve(t testing.TB, cfg Config) *served {
	t.Helper()
	d, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	l, err := Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	testutil.RunUntilCleanup(t, "Serve", func(ctx context.Context) error { return d.Serve(ctx, l) })
	return &served{d: d, addr: l.Addr(), url: d.URL(l.Addr()), base: "http://" + l.Addr().String()}
}

// client returns an HTTP client that has traded the token for the cookie,
// as a browser does on the first visit.
func (s *served) client(t testing.TB) *http.Client {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	c := &http.Client{Jar: jar}
	resp, err := c.Get(s.url)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s with the token: %s", s.base, resp.Status)
	}
	u, _ := url.Parse(s.base)
	if len(jar.Cookies(u)) != 1 {
		t.Fatalf("the token was not traded for one cookie: %v", jar.Cookies(u))
	}
	return c
}
