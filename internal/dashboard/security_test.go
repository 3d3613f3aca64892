package dashboard

import (
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

func TestLoopbackHost(t *testing.T) {
	for _, tc := range []struct {
		host string
		want bool
	}{
		{"127.0.0.1:7070", true},
		{"127.0.0.1", true},
		{"127.8.9.10:80", true},
		{"localhost:7070", true},
		{"LOCALHOST:7070", true},
		{"localhost", true},
		{"[::1]:7070", true},
		{"[::1]", true},
		{"[::ffff:127.0.0.1]:7070", true},
		{"evil.example:7070", false}, // a rebinding attacker's name that resolves to 127.0.0.1
		{"localhost.evil.example", false},
		{"127.0.0.1.nip.io:7070", false},
		{"0.0.0.0:7070", false},
		{"10.0.0.1:7070", false},
		{"[fe80::1%lo]:7070", false},
		{"", false},
		{"[::1", false},
	} {
		if got := loopbackHost(tc.host); got != tc.want {
			t.Errorf("loopbackHost(%q) = %v, want %v", tc.host, got, tc.want)
		}
	}
}

func TestSameOrigin(t *testing.T) {
	for _, tc := range []struct {
		origin, host string
		want         bool
	}{
		{"http://127.0.0.1:7070", "127.0.0.1:7070", true},
		{"http://localhost:17070", "localhost:17070", true}, // a port forwarded elsewhere: the Host follows
		{"http://127.0.0.1:7071", "127.0.0.1:7070", false},  // another loopback port is another origin
		{"https://127.0.0.1:7070", "127.0.0.1:7070", false},
		{"http://localhost:7070", "127.0.0.1:7070", false},
		{"http://evil.example", "127.0.0.1:7070", false},
		{"null", "127.0.0.1:7070", false},
		{"", "127.0.0.1:7070", false},
		{"http://u@127.0.0.1:7070", "127.0.0.1:7070", false},
	} {
		if got := sameOrigin(tc.origin, tc.host); got != tc.want {
			t.Errorf("sameOrigin(%q, %q) = %v, want %v", tc.origin, tc.host, got, tc.want)
		}
	}
}

func TestCheckAddr(t *testing.T) {
	for _, tc := range []struct {
		addr, want string
	}{
		{"127.0.0.1:7070", "127.0.0.1:7070"},
		{"localhost:7070", "127.0.0.1:7070"},
		{"[::1]:0", "[::1]:0"},
		{"127.0.0.2:80", "127.0.0.2:80"},
		{"[::ffff:127.0.0.1]:7070", "127.0.0.1:7070"},
	} {
		got, err := CheckAddr(tc.addr)
		if err != nil || got != tc.want {
			t.Errorf("CheckAddr(%q) = %q, %v; want %q", tc.addr, got, err, tc.want)
		}
	}
	for _, addr := range []string{":7070", "0.0.0.0:7070", "[::]:7070", "192.168.1.5:7070", "example.com:7070", "127.0.0.1", "127.0.0.1:http-alt-nope", "[fe80::1%lo]:7070"} {
		_, err := CheckAddr(addr)
		if err == nil {
			t.Errorf("CheckAddr(%q) accepted a non-loopback or malformed address", addr)
			continue
		}
		if !strings.Contains(err.Error(), addr) {
			t.Errorf("CheckAddr(%q): the error does not name the address: %v", addr, err)
		}
	}
	if _, err := Listen("0.0.0.0:0"); !errors.Is(err, ErrNotLoopback) {
		t.Errorf("Listen(0.0.0.0:0) = %v, want ErrNotLoopback", err)
	}
}

func TestTokenIsRandom256Bits(t *testing.T) {
	a, err := newToken()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := newToken()
	if a == b {
		t.Fatal("two tokens are equal")
	}
	if n := len(a) * 6 / 8; n != tokenBytes || tokenBytes*8 != 256 {
		t.Fatalf("token %q holds %d bytes, want 32 (256 bits)", a, n)
	}
	if cookieName(a) == cookieName(b) {
		t.Fatal("two dashboards share a cookie name")
	}
}

// TestGate sends real HTTP requests to a served dashboard: without the
// token, with a foreign Host, cross-origin, and with methods other than
// GET and POST; each is refused with 403 and reaches nothing behind the
// gate. The backend is a table: the gate does not depend on processes.
func TestGate(t *testing.T) {
	b := newTableBackend(syntheticFleet(3))
	s := serve(t, Config{Backend: b})
	good := s.client(t)
	plain := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

	do := func(c *http.Client, method, path string, hdr map[string]string) (*http.Response, string) {
		t.Helper()
		req, err := http.NewRequest(method, s.base+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range hdr {
			if k == "Host" {
				req.Host = v
			} else {
				req.Header.Set(k, v)
			}
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp, string(body)
	}
	origin := map[string]string{"Origin": s.base}
	// Go's client, like a browser, picks cookies by the Host it sends: the
	// requests with another Host carry the cookie by hand.
	cookie := cookieName(s.d.token) + "=" + s.d.token

	// The token in the URL is traded for an HttpOnly, SameSite=Strict
	// cookie, and the address bar loses it.
	resp, _ := do(plain, "GET", "/?token="+url.QueryEscape(s.d.token), nil)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/" {
		t.Fatalf("GET with the token: %s, Location %q; want 303 to /", resp.Status, resp.Header.Get("Location"))
	}
	set := resp.Header.Get("Set-Cookie")
	for _, want := range []string{cookieName(s.d.token) + "=", "HttpOnly", "SameSite=Strict", "Path=/"} {
		if !strings.Contains(set, want) {
			t.Errorf("Set-Cookie %q lacks %q", set, want)
		}
	}
	// A navigation another site started gets a page that moves on by
	// itself (a redirect would keep that site, and the browser would not
	// send the Strict cookie after it), without the token in it.
	resp, body := do(plain, "GET", "/servers/s001?token="+url.QueryEscape(s.d.token), map[string]string{"Sec-Fetch-Site": "cross-site"})
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `<meta http-equiv="refresh" content="0; url=/servers/s001">`) ||
		strings.Contains(body, s.d.token) || !strings.Contains(resp.Header.Get("Set-Cookie"), "SameSite=Strict") {
		t.Errorf("GET with the token from another site: %s, Set-Cookie %q, body %q; want 200, the cookie, a refresh to /servers/s001 and no token",
			resp.Status, resp.Header.Get("Set-Cookie"), body)
	}

	refused := []struct {
		what   string
		c      *http.Client
		method string
		path   string
		hdr    map[string]string
	}{
		{"no token", plain, "GET", "/", nil},
		{"no token, server page", plain, "GET", "/servers/s001", nil},
		{"no token, stream", plain, "GET", "/events", nil},
		{"no token, asset", plain, "GET", "/assets/app.js", nil},
		{"no token, action", plain, "POST", "/servers/s001/restart", origin},
		{"wrong token", plain, "GET", "/?token=" + strings.Repeat("A", 43), nil},
		{"the token with POST", plain, "POST", "/servers/s001/restart?token=" + url.QueryEscape(s.d.token), origin},
		{"foreign Host (DNS rebinding)", plain, "GET", "/", map[string]string{"Host": "evil.example:" + portOf(s.base), "Cookie": cookie}},
		{"foreign Host with the token", plain, "GET", "/?token=" + url.QueryEscape(s.d.token), map[string]string{"Host": "evil.example"}},
		{"cross-origin POST", good, "POST", "/servers/s001/restart", map[string]string{"Origin": "http://evil.example"}},
		{"POST from another loopback port", good, "POST", "/servers/s001/restart", map[string]string{"Origin": "http://127.0.0.1:1"}},
		{"POST without Origin", good, "POST", "/servers/s001/restart", nil},
		{"POST with Sec-Fetch-Site cross-site", good, "POST", "/servers/s001/restart", map[string]string{"Origin": s.base, "Sec-Fetch-Site": "cross-site"}},
		{"CORS preflight", good, "OPTIONS", "/servers/s001/restart", map[string]string{"Origin": "http://evil.example", "Access-Control-Request-Method": "POST"}},
		{"PUT", good, "PUT", "/servers/s001/restart", origin},
		{"DELETE", good, "DELETE", "/servers/s001", origin},
	}
	for _, tc := range refused {
		resp, body := do(tc.c, tc.method, tc.path, tc.hdr)
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("%s: %s %s = %s, want 403", tc.what, tc.method, tc.path, resp.Status)
		}
		if strings.Contains(body, s.d.token) {
			t.Errorf("%s: the refusal shows the token", tc.what)
		}
		for k := range resp.Header {
			if strings.HasPrefix(k, "Access-Control-") {
				t.Errorf("%s: a CORS header was sent: %s", tc.what, k)
			}
		}
	}
	if n := b.requests.Load(); n != 0 {
		t.Fatalf("%d refused request(s) reached the backend", n)
	}

	// The same requests with the cookie, a loopback Host and our Origin
	// pass, and nothing sends CORS headers.
	for _, p := range []string{"/", "/servers/s001", "/assets/app.js", "/assets/style.css"} {
		resp, _ := do(good, "GET", p, nil)
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s with the cookie: %s", p, resp.Status)
		}
		for _, h := range []string{"Content-Security-Policy", "X-Frame-Options", "Referrer-Policy"} {
			if resp.Header.Get(h) == "" {
				t.Errorf("GET %s: no %s header", p, h)
			}
		}
	}
	resp, body = do(plain, "GET", "/", map[string]string{"Host": "localhost:" + portOf(s.base), "Cookie": cookie})
	if resp.StatusCode != http.StatusOK {
		t.Errorf("Host localhost: %s, want 200: %s", resp.Status, body)
	}
	resp, body = do(good, "POST", "/servers/s001/restart", map[string]string{"Origin": s.base, "Accept": "application/json", "Sec-Fetch-Site": "same-origin"})
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `"ok":true`) {
		t.Fatalf("same-origin POST: %s %s", resp.Status, body)
	}
	if got := b.lastReq.Load(); got != "s001 restart" {
		t.Fatalf("the backend got %v, want s001 restart", got)
	}
	// An unknown server, an unknown action, a name that is not a DNS label.
	for _, p := range []string{"/servers/nope/restart", "/servers/s001/exec", "/servers/..%2f/stop"} {
		resp, _ := do(good, "POST", p, map[string]string{"Origin": s.base, "Accept": "application/json"})
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("POST %s: %s, want 404", p, resp.Status)
		}
	}
	resp, _ = do(good, "GET", "/assets/templates.html", nil)
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET /assets/templates.html: %s, want 404", resp.Status)
	}
}

func portOf(base string) string {
	u, _ := url.Parse(base)
	return u.Port()
}
