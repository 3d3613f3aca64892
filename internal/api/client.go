package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"syscall"
	"time"
)

// maxResponseBytes bounds a response body (the status of a thousand servers
// with their conditions is well under a megabyte).
const maxResponseBytes = 32 << 20

// Client talks to a running `procfleet up` over its socket. Every method
// takes a context and returns when it ends; its deadline bounds the whole
// call, including a reload's wait. A Client is safe for concurrent use.
type Client struct {
	path string
	hc   *http.Client
}

// Error is an error answered by the server. errors.Is matches it with
// ErrNotFound, ErrInvalid and ErrFailed by status code.
type Error struct {
	// StatusCode is the HTTP status.
	StatusCode int
	// Message is the server's error text.
	Message string
}

func (e *Error) Error() string { return e.Message }

// Is matches the sentinel that gives e's status code.
func (e *Error) Is(target error) bool {
	switch target {
	case ErrNotFound:
		return e.StatusCode == http.StatusNotFound
	case ErrInvalid:
		return e.StatusCode == http.StatusBadRequest || e.StatusCode == http.StatusRequestEntityTooLarge
	case ErrFailed:
		return e.StatusCode == http.StatusConflict
	}
	return false
}

// Dial connects to the `procfleet up` listening at socketPath and checks
// that it answers. The error matches ErrNoServer when nobody listens there
// (no socket file, or one left by an `up` that is gone): the caller then acts
// by itself, under the state folder's lock. A socket file that is not a
// socket or belongs to another user is an error, never ErrNoServer, and is
// never connected to.
func Dial(ctx context.Context, socketPath string) (*Client, error) {
	fi, err := os.Lstat(socketPath)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("api: dial %s: %w", socketPath, ErrNoServer)
	}
	if err != nil {
		return nil, fmt.Errorf("api: dial %s: %w", socketPath, err)
	}
	uid := os.Geteuid()
	if err := checkSocketFile(fi, uid); err != nil {
		return nil, fmt.Errorf("api: dial %s: %w", socketPath, err)
	}
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			c, err := dialUnix(ctx, socketPath)
			if err != nil {
				return nil, err
			}
			// The other end must be our own user too: a socket file we own
			// can only have been bound by us, but check the kernel's word.
			p, err := peerCred(c)
			if err == nil && p.UID != uid {
				err = fmt.Errorf("server is uid %d, not us (uid %d)", p.UID, uid)
			}
			if err != nil {
				_ = c.Close()
				return nil, err
			}
			return c, nil
		},
		DisableCompression:  true,
		MaxIdleConns:        2,
		IdleConnTimeout:     30 * time.Second,
		TLSHandshakeTimeout: time.Second, // never used: no TLS on a Unix socket
	}
	c := &Client{path: socketPath, hc: &http.Client{Transport: tr}}
	var ping PingResponse
	if err := c.do(ctx, http.MethodGet, "/v1/ping", nil, &ping); err != nil {
		c.Close()
		return nil, err
	}
	if ping.API != APIVersion {
		c.Close()
		return nil, fmt.Errorf("api: dial %s: server speaks API %q, want %q (procfleet versions differ)", socketPath, ping.API, APIVersion)
	}
	return c, nil
}

// Close releases idle connections.
func (c *Client) Close() error {
	c.hc.CloseIdleConnections()
	return nil
}

// Status decodes the status of the named servers (all when names is empty)
// into out.
func (c *Client) Status(ctx context.Context, names []string, out any) error {
	q := url.Values{}
	for _, n := range names {
		q.Add("name", n)
	}
	p := "/v1/status"
	if len(q) > 0 {
		p += "?" + q.Encode()
	}
	return c.do(ctx, http.MethodGet, p, nil, out)
}

// Reload makes the server re-read its fleet files; with wait, it returns
// once the fleet converged, failed, or timeout (0: no limit but ctx) passed.
// The result, also sent with an ErrFailed error, is decoded into out.
func (c *Client) Reload(ctx context.Context, wait bool, timeout time.Duration, out any) error {
	req := ReloadRequest{Wait: wait}
	if wait && timeout > 0 {
		req.Timeout = timeout.String()
	}
	return c.do(ctx, http.MethodPost, "/v1/reload", req, out)
}

// Down stops the named servers, or every server when names is empty. The
// result, also sent with an ErrFailed error, is decoded into out.
func (c *Client) Down(ctx context.Context, names []string, out any) error {
	req := DownRequest{Names: names, All: len(names) == 0}
	return c.do(ctx, http.MethodPost, "/v1/down", req, out)
}

// Verb asks for stop, start or restart (one of Verbs) of the named servers;
// with wait, it returns once they are carried out, failed, or timeout (0:
// no limit but ctx) passed. The result, also sent with an ErrFailed error,
// is decoded into out.
func (c *Client) Verb(ctx context.Context, verb string, names []string, wait bool, timeout time.Duration, out any) error {
	if !slices.Contains(Verbs, verb) {
		return fmt.Errorf("api: %w: unknown verb %q", ErrInvalid, verb)
	}
	req := VerbRequest{Names: names, Wait: wait}
	if wait && timeout > 0 {
		req.Timeout = timeout.String()
	}
	return c.do(ctx, http.MethodPost, "/v1/"+verb, req, out)
}

// Events decodes the named server's recent events into out.
func (c *Client) Events(ctx context.Context, name string, out any) error {
	if err := CheckName(name); err != nil {
		return fmt.Errorf("api: events: %w", err)
	}
	return c.do(ctx, http.MethodGet, "/v1/events/"+name, nil, out)
}

// do sends one request and decodes the result into out (nil: discard). For
// an error answer, the result sent with it, if any, is decoded into out and
// a *Error returned.
func (c *Client) do(ctx context.Context, method, path string, in, out any) error {
	op := method + " " + path
	var body io.Reader
	if in != nil {
		data, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("api: %s: %w", op, err)
		}
		body = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://procfleet"+path, body)
	if err != nil {
		return fmt.Errorf("api: %s: %w", op, err)
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		if isNoServer(err) {
			return fmt.Errorf("api: %s on %s: %w: %v", op, c.path, ErrNoServer, err)
		}
		return fmt.Errorf("api: %s on %s: %w", op, c.path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes+1))
	if err != nil {
		return fmt.Errorf("api: %s: read response: %w", op, err)
	}
	if len(data) > maxResponseBytes {
		return fmt.Errorf("api: %s: response larger than %d bytes", op, maxResponseBytes)
	}
	if resp.StatusCode != http.StatusOK {
		var eb errorBody
		if err := json.Unmarshal(data, &eb); err != nil || eb.Error == "" {
			return &Error{StatusCode: resp.StatusCode, Message: fmt.Sprintf("%s: %s", op, resp.Status)}
		}
		if out != nil && len(eb.Result) > 0 && string(eb.Result) != "null" {
			_ = json.Unmarshal(eb.Result, out) // best effort: the error is what matters
		}
		return &Error{StatusCode: resp.StatusCode, Message: eb.Error}
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("api: %s: decode response: %w", op, err)
	}
	return nil
}

// isNoServer reports whether a dial error means nobody listens.
func isNoServer(err error) bool {
	return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ENOENT)
}
