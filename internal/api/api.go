package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"regexp"
	"time"
)

// Backend is what the API serves: the running reconciler. Each method gets
// names already validated as DNS labels (no duplicates) and returns a value
// that is marshalled as JSON for the client, or an error.
//
// Errors choose the HTTP status: wrap ErrNotFound (404), ErrInvalid (400) or
// ErrFailed (409, "it ran but did not fully succeed"); context errors give
// 504 (deadline) or 503 (cancelled); anything else 500. With an error, a
// non-nil result is sent too (as "result"), so a partial outcome (which
// servers could not be stopped, which are not Ready) reaches the client.
type Backend interface {
	// Status reports the named servers, or all of them when names is empty.
	Status(ctx context.Context, names []string) (any, error)
	// Reload makes the reconciler re-read its fleet files and converge. With
	// wait, it returns once every server is Ready (or failed, or timeout has
	// passed; 0 means no limit other than ctx).
	Reload(ctx context.Context, wait bool, timeout time.Duration) (any, error)
	// Down stops the named servers, or every server when names is empty.
	Down(ctx context.Context, names []string) (any, error)
	// Events reports the named server's recent events.
	Events(ctx context.Context, name string) (any, error)
	// Verb carries out stop, start or restart (one of Verbs) on the named
	// servers (never none). With wait it returns once they are stopped, or
	// Ready (or given up on, or timeout has passed; 0 means no limit other
	// than ctx); without, once the request is taken.
	Verb(ctx context.Context, verb string, names []string, wait bool, timeout time.Duration) (any, error)
}

// Verbs are the requests on named servers the API carries: the CLI's
// stop, start and restart.
var Verbs = []string{"stop", "start", "restart"}

// Sentinel errors. A Backend wraps the first three to choose the status
// code; on the client side, a *Error matches them (errors.Is) by status code.
var (
	// ErrNotFound: no such server (404).
	ErrNotFound = errors.New("not found")
	// ErrInvalid: the request is malformed or not allowed (400).
	ErrInvalid = errors.New("invalid request")
	// ErrFailed: the operation ran but did not fully succeed (409).
	ErrFailed = errors.New("operation failed")
	// ErrNoServer: no `procfleet up` listens on the socket.
	ErrNoServer = errors.New("no procfleet up is listening")
	// ErrInUse: Listen found a live server on the socket.
	ErrInUse = errors.New("socket in use by a running procfleet up")
	// ErrNotSupported: peer credentials cannot be read on this system.
	ErrNotSupported = errors.New("peer credentials not supported on this system")
)

// Limits on requests.
const (
	// DefaultMaxBodyBytes bounds a request body.
	DefaultMaxBodyBytes = 64 << 10
	// MaxReloadTimeout bounds the timeout of a reload with wait.
	MaxReloadTimeout = 24 * time.Hour
	maxNameLen       = 63
)

// ReloadRequest is the body of POST /v1/reload.
type ReloadRequest struct {
	// Wait makes the call return only once the fleet has converged.
	Wait bool `json:"wait,omitempty"`
	// Timeout bounds the call (with wait, the wait), as a Go duration
	// ("90s"); empty means none.
	Timeout string `json:"timeout,omitempty"`
}

// DownRequest is the body of POST /v1/down: either names or all, never both
// and never neither (an empty body must not stop everything by accident).
type DownRequest struct {
	Names []string `json:"names,omitempty"`
	All   bool     `json:"all,omitempty"`
}

// VerbRequest is the body of POST /v1/stop, /v1/start and /v1/restart.
type VerbRequest struct {
	// Names are the servers; at least one.
	Names []string `json:"names"`
	// Wait makes the call return once the verb is carried out.
	Wait bool `json:"wait,omitempty"`
	// Timeout bounds the wait, as a Go duration; empty means none.
	Timeout string `json:"timeout,omitempty"`
}

// errorBody is the body of every error response.
type errorBody struct {
	Error  string          `json:"error"`
	Result json.RawMessage `json:"result,omitempty"`
}

// PingResponse is the body of GET /v1/ping.
type PingResponse struct {
	API string `json:"api"`
	PID int    `json:"pid"`
}

var dnsLabel = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

// CheckName reports whether name is a server name: a DNS label of at most 63
// bytes, so it can name a file in the state folder without escaping it.
func CheckName(name string) error {
	if len(name) > maxNameLen {
		return fmt.Errorf("%w: server name %.20q... is longer than %d bytes", ErrInvalid, name, maxNameLen)
	}
	if !dnsLabel.MatchString(name) {
		return fmt.Errorf("%w: server name %q is not a DNS label (lower case letters, digits and '-', starting and ending with a letter or digit)", ErrInvalid, name)
	}
	return nil
}

// checkNames validates each name and refuses duplicates.
func checkNames(names []string) error {
	seen := make(map[string]struct{}, len(names))
	for _, n := range names {
		if err := CheckName(n); err != nil {
			return err
		}
		if _, dup := seen[n]; dup {
			return fmt.Errorf("%w: server name %q given twice", ErrInvalid, n)
		}
		seen[n] = struct{}{}
	}
	return nil
}

// errTooLarge marks a body over the limit (413).
var errTooLarge = errors.New("request body too large")

// decodeStrict decodes one JSON value from data into v: no unknown fields,
// nothing but white space after it. An empty body is an error (every POST
// has an object). The size limit is applied before, by the server.
func decodeStrict(data []byte, v any) error {
	if trimmed := bytes.TrimSpace(data); len(trimmed) == 0 || trimmed[0] != '{' {
		return fmt.Errorf("%w: body is not a JSON object", ErrInvalid)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%w: decode body: %v", ErrInvalid, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("%w: decode body: data after the JSON object", ErrInvalid)
	}
	return nil
}

// decodeReload decodes and validates a reload body.
func decodeReload(data []byte) (wait bool, timeout time.Duration, err error) {
	var req ReloadRequest
	if err := decodeStrict(data, &req); err != nil {
		return false, 0, err
	}
	timeout, err = parseTimeout(req.Timeout)
	return req.Wait, timeout, err
}

// parseTimeout parses a request's timeout ("" means none).
func parseTimeout(s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	timeout, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%w: timeout: %v", ErrInvalid, err)
	}
	if timeout < 0 || timeout > MaxReloadTimeout {
		return 0, fmt.Errorf("%w: timeout %s is outside [0, %s]", ErrInvalid, timeout, MaxReloadTimeout)
	}
	return timeout, nil
}

// decodeVerb decodes and validates the body of a stop, start or restart:
// at least one name, each a DNS label, none twice.
func decodeVerb(data []byte) (names []string, wait bool, timeout time.Duration, err error) {
	var req VerbRequest
	if err := decodeStrict(data, &req); err != nil {
		return nil, false, 0, err
	}
	if len(req.Names) == 0 {
		return nil, false, 0, fmt.Errorf("%w: no server named", ErrInvalid)
	}
	if err := checkNames(req.Names); err != nil {
		return nil, false, 0, err
	}
	if timeout, err = parseTimeout(req.Timeout); err != nil {
		return nil, false, 0, err
	}
	return req.Names, req.Wait, timeout, nil
}

// decodeDown decodes and validates a down body. Empty names means all.
func decodeDown(data []byte) (names []string, err error) {
	var req DownRequest
	if err := decodeStrict(data, &req); err != nil {
		return nil, err
	}
	switch {
	case req.All && len(req.Names) > 0:
		return nil, fmt.Errorf("%w: names and all are exclusive", ErrInvalid)
	case !req.All && len(req.Names) == 0:
		return nil, fmt.Errorf("%w: no server named; send {\"all\": true} to stop every server", ErrInvalid)
	}
	if err := checkNames(req.Names); err != nil {
		return nil, err
	}
	return req.Names, nil
}

// decodeStatusQuery validates the query of GET /v1/status: only name=,
// repeated.
func decodeStatusQuery(q url.Values) ([]string, error) {
	for k := range q {
		if k != "name" {
			return nil, fmt.Errorf("%w: unknown query parameter %q", ErrInvalid, k)
		}
	}
	names := q["name"]
	if err := checkNames(names); err != nil {
		return nil, err
	}
	return names, nil
}
