package dashboard

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"html"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
)

// tokenBytes is the size of the secret in the printed URL: 256 bits.
const tokenBytes = 32

// tokenParam is the URL query parameter that carries the token once.
const tokenParam = "token"

// newToken returns a random token, URL-safe base64 without padding.
func newToken() (string, error) {
	b := make([]byte, tokenBytes)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("make the dashboard token: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// cookieName is the cookie that carries the token. Browsers send a cookie
// of 127.0.0.1 to every port of it, so the name is derived from the token:
// two dashboards (two projects' up) never overwrite each other's cookie.
func cookieName(token string) string {
	sum := sha256.Sum256([]byte(token))
	return "procfleet-ui-" + hex.EncodeToString(sum[:4])
}

// sameToken compares two tokens in constant time.
func sameToken(got, want string) bool {
	return subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

// loopbackHost reports whether host (a Host header or URL host, with or
// without a port) names the loopback interface: "localhost", an address in
// 127.0.0.0/8, or ::1. Any other name may be a DNS-rebinding attacker's
// domain that resolves to 127.0.0.1, and is refused.
func loopbackHost(host string) bool {
	h := host
	if hh, _, err := net.SplitHostPort(host); err == nil {
		h = hh
	} else if strings.HasPrefix(host, "[") && strings.HasSuffix(host, "]") {
		h = host[1 : len(host)-1]
	}
	if strings.EqualFold(h, "localhost") {
		return true
	}
	a, err := netip.ParseAddr(h)
	return err == nil && a.Zone() == "" && a.Unmap().IsLoopback()
}

// sameOrigin reports whether origin (an Origin header) is the dashboard's
// own origin as the browser sees it: http, and the request's Host exactly.
func sameOrigin(origin, host string) bool {
	u, err := url.Parse(origin)
	if err != nil || u.Scheme != "http" || u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
		return false
	}
	return strings.EqualFold(u.Host, host)
}

// ErrNotLoopback is wrapped by Listen's error for an address that is not
// on the loopback interface.
var ErrNotLoopback = errors.New("the dashboard listens on loopback only")

// CheckAddr checks a listen address ("127.0.0.1:7070", "[::1]:7070",
// "localhost:0"): the host must be a loopback address or "localhost"; an
// empty host (every interface), 0.0.0.0, :: and every other name or
// address are refused, because anyone who can reach the port can try the
// token. It returns the address to bind ("localhost" becomes 127.0.0.1).
func CheckAddr(addr string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("dashboard address %q: %w (want HOST:PORT, e.g. 127.0.0.1:7070)", addr, err)
	}
	if _, err := net.LookupPort("tcp", port); err != nil || port == "" {
		return "", fmt.Errorf("dashboard address %q: bad port %q", addr, port)
	}
	if strings.EqualFold(host, "localhost") {
		return net.JoinHostPort("127.0.0.1", port), nil
	}
	a, err := netip.ParseAddr(host)
	if err != nil || a.Zone() != "" || !a.Unmap().IsLoopback() {
		what := host
		if what == "" {
			what = "every interface"
		}
		return "", fmt.Errorf("dashboard address %q: %s is not a loopback address: %w (use 127.0.0.1, ::1 or localhost; to reach it from elsewhere, forward the port over SSH)", addr, what, ErrNotLoopback)
	}
	return net.JoinHostPort(a.Unmap().String(), port), nil
}

// Listen checks addr with CheckAddr and listens on it, and checks the
// address actually bound too.
func Listen(addr string) (net.Listener, error) {
	bind, err := CheckAddr(addr)
	if err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", bind)
	if err != nil {
		return nil, fmt.Errorf("dashboard: listen on %s: %w", bind, err)
	}
	if ta, ok := l.Addr().(*net.TCPAddr); !ok || !ta.IP.IsLoopback() {
		_ = l.Close()
		return nil, fmt.Errorf("dashboard: bound %s: %w", l.Addr(), ErrNotLoopback)
	}
	return l, nil
}

// guard is the gate every request passes, in this order: a loopback Host
// (DNS rebinding), the token (from the cookie, or once from the URL, traded
// for the cookie), and for anything that is not GET or HEAD: POST with the
// dashboard's own Origin. No CORS header is ever sent; a preflight is
// refused like any other cross-origin request.
type guard struct {
	token  string
	cookie string
	next   http.Handler
	refuse func(w http.ResponseWriter, r *http.Request, why string)
}

func (g *guard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	setSecurityHeaders(w.Header())
	if !loopbackHost(r.Host) {
		g.refuse(w, r, "the Host header is not a loopback name or address")
		return
	}
	if tok := r.URL.Query().Get(tokenParam); tok != "" {
		if r.Method != http.MethodGet || !sameToken(tok, g.token) {
			g.refuse(w, r, "wrong token")
			return
		}
		http.SetCookie(w, &http.Cookie{
			Name: g.cookie, Value: g.token, Path: "/",
			HttpOnly: true, SameSite: http.SameSiteStrictMode,
		})
		// Drop the token from the address bar and the history.
		u := *r.URL
		q := u.Query()
		q.Del(tokenParam)
		u.RawQuery = q.Encode()
		if r.Header.Get("Sec-Fetch-Site") == "cross-site" {
			moveOn(w, u.RequestURI())
			return
		}
		http.Redirect(w, r, u.RequestURI(), http.StatusSeeOther)
		return
	}
	c, err := r.Cookie(g.cookie)
	if err != nil || !sameToken(c.Value, g.token) {
		g.refuse(w, r, "no token: open the URL that procfleet up printed (procfleet ui prints it again)")
		return
	}
	switch r.Method {
	case http.MethodGet, http.MethodHead:
	case http.MethodPost:
		if !sameOrigin(r.Header.Get("Origin"), r.Host) {
			g.refuse(w, r, "cross-origin request")
			return
		}
		if s := r.Header.Get("Sec-Fetch-Site"); s != "" && s != "same-origin" {
			g.refuse(w, r, "cross-origin request")
			return
		}
	default:
		g.refuse(w, r, "method not allowed")
		return
	}
	g.next.ServeHTTP(w, r)
}

// moveOn answers a page that sends the browser on to target by itself.
// A navigation that another site started (a link elsewhere, the file that
// `procfleet ui --open` opens) keeps that site through a redirect, and
// the browser withholds the SameSite=Strict cookie from the redirected
// request; a refresh the dashboard's own page makes is same-site, so it
// carries the cookie. The refresh replaces the page in the history.
func moveOn(w http.ResponseWriter, target string) {
	t := html.EscapeString(target)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	_, _ = fmt.Fprintf(w, "<!doctype html>\n<meta charset=\"utf-8\">\n<meta http-equiv=\"refresh\" content=\"0; url=%s\">\n<title>procfleet</title>\n<p><a href=\"%s\">Open the dashboard</a></p>\n", t, t)
}

// setSecurityHeaders sets the headers of every response: scripts, styles
// and connections only from the dashboard itself, no framing, no referrer
// (the first URL carries the token), no caching, no MIME sniffing.
func setSecurityHeaders(h http.Header) {
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-store")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
}
