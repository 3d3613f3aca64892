package api

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"github.com/google/go-cmp/cmp"

	"github.com/procfleet/procfleet/internal/testutil"
)

// peerEnv makes the test binary a peer that connects to the socket it names
// and prints what happened (see peerMain).
const peerEnv = "PROCFLEET_API_TEST_PEER"

func TestMain(m *testing.M) {
	if path := os.Getenv(peerEnv); path != "" {
		os.Exit(peerMain(path))
	}
	os.Exit(m.Run())
}

// peerMain connects to the socket at path, sends a status request and prints
// one line: "connect: ERR", "answered: STATUS LINE" or "closed: ERR".
func peerMain(path string) int {
	c, err := net.DialTimeout("unix", path, 5*time.Second)
	if err != nil {
		fmt.Println("connect:", err)
		return 0
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write([]byte("GET /v1/status HTTP/1.1\r\nHost: procfleet\r\n\r\n")); err != nil {
		fmt.Println("closed:", err)
		return 0
	}
	buf := make([]byte, 512)
	n, err := c.Read(buf)
	if n > 0 {
		line, _, _ := strings.Cut(string(buf[:n]), "\r\n")
		fmt.Println("answered:", line)
		return 0
	}
	fmt.Println("closed:", err)
	return 0
}

// call is one Backend call seen by fakeBackend.
type call struct {
	Method  string
	Names   []string
	Wait    bool
	Timeout time.Duration
}

// fakeBackend records calls and answers with result and err. It stands in
// for the reconciler, which is ours, not the kernel's.
type fakeBackend struct {
	mu     sync.Mutex
	calls  []call
	result any
	err    error
	block  chan struct{} // when set, calls wait for it or for ctx
	called chan call     // when set, receives each call (buffered)
}

func (b *fakeBackend) record(ctx context.Context, c call) (any, error) {
	b.mu.Lock()
	b.calls = append(b.calls, c)
	block, result, err := b.block, b.result, b.err
	b.mu.Unlock()
	if b.called != nil {
		b.called <- c
	}
	if block != nil {
		select {
		case <-block:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return result, err
}

func (b *fakeBackend) Status(ctx context.Context, names []string) (any, error) {
	return b.record(ctx, call{Method: "Status", Names: names})
}

func (b *fakeBackend) Reload(ctx context.Context, wait bool, timeout time.Duration) (any, error) {
	return b.record(ctx, call{Method: "Reload", Wait: wait, Timeout: timeout})
}

func (b *fakeBackend) Down(ctx context.Context, names []string) (any, error) {
	return b.record(ctx, call{Method: "Down", Names: names})
}

func (b *fakeBackend) Events(ctx context.Context, name string) (any, error) {
	return b.record(ctx, call{Method: "Events", Names: []string{name}})
}

func (b *fakeBackend) Verb(ctx context.Context, verb string, names []string, wait bool, timeout time.Duration) (any, error) {
	return b.record(ctx, call{Method: verb, Names: names, Wait: wait, Timeout: timeout})
}

func (b *fakeBackend) Calls() []call {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]call(nil), b.calls...)
}

// serve listens at dir/procfleet.sock and serves b until the test ends.
func serve(t *testing.T, dir string, b Backend) *Listener {
	t.Helper()
	l, err := Listen(filepath.Join(dir, "procfleet.sock"), testr.New(t))
	if err != nil {
		t.Fatalf("Listen: %v", err)
	}
	t.Cleanup(func() { _ = l.Close() }) // runs after Serve has returned
	srv := &Server{Backend: b, Log: testr.New(t)}
	testutil.RunUntilCleanup(t, "Serve", func(ctx context.Context) error { return srv.Serve(ctx, l) })
	return l
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func dial(t *testing.T, path string) *Client {
	t.Helper()
	c, err := Dial(testContext(t), path)
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

type result struct {
	Servers []string `json:"servers"`
}

func TestClientServer(t *testing.T) {
	tests := []struct {
		name      string
		backendOK any
		backendEr error
		do        func(ctx context.Context, c *Client, out any) error
		wantCall  call
		wantOut   result
		wantErr   error
	}{
		{
			name:      "status all",
			backendOK: result{Servers: []string{"api", "db"}},
			do:        func(ctx context.Context, c *Client, out any) error { return c.Status(ctx, nil, out) },
			wantCall:  call{Method: "Status"},
			wantOut:   result{Servers: []string{"api", "db"}},
		},
		{
			name:      "status named",
			backendOK: result{Servers: []string{"api"}},
			do: func(ctx context.Context, c *Client, out any) error {
				return c.Status(ctx, []string{"api", "web-1"}, out)
			},
			wantCall: call{Method: "Status", Names: []string{"api", "web-1"}},
			wantOut:  result{Servers: []string{"api"}},
		},
		{
			name:      "reload wait",
			backendOK: result{},
			do: func(ctx context.Context, c *Client, out any) error {
				return c.Reload(ctx, true, 90*time.Second, out)
			},
			wantCall: call{Method: "Reload", Wait: true, Timeout: 90 * time.Second},
		},
		{
			name: "reload no wait",
			do: func(ctx context.Context, c *Client, out any) error {
				return c.Reload(ctx, false, 0, out)
			},
			wantCall: call{Method: "Reload"},
		},
		{
			name: "down all",
			do:   func(ctx context.Context, c *Client, out any) error { return c.Down(ctx, nil, out) },
			// Empty names reach the Backend as "all".
			wantCall: call{Method: "Down"},
		},
		{
			name:      "down named, partly failed",
			backendOK: result{Servers: []string{"db"}},
			backendEr: fmt.Errorf("db: %w: quarantined", ErrFailed),
			do:        func(ctx context.Context, c *Client, out any) error { return c.Down(ctx, []string{"db"}, out) },
			wantCall:  call{Method: "Down", Names: []string{"db"}},
			wantOut:   result{Servers: []string{"db"}},
			wantErr:   ErrFailed,
		},
		{
			name:      "stop",
			backendOK: result{Servers: []string{"api"}},
			do: func(ctx context.Context, c *Client, out any) error {
				return c.Verb(ctx, "stop", []string{"api"}, true, 0, out)
			},
			wantCall: call{Method: "stop", Names: []string{"api"}, Wait: true},
			wantOut:  result{Servers: []string{"api"}},
		},
		{
			name: "start without wait",
			do: func(ctx context.Context, c *Client, out any) error {
				return c.Verb(ctx, "start", []string{"api", "db"}, false, 0, out)
			},
			wantCall: call{Method: "start", Names: []string{"api", "db"}},
		},
		{
			name:      "restart refused",
			backendOK: result{Servers: []string{"api"}},
			backendEr: fmt.Errorf("restart api refused: quarantined: %w", ErrFailed),
			do: func(ctx context.Context, c *Client, out any) error {
				return c.Verb(ctx, "restart", []string{"api"}, true, time.Minute, out)
			},
			wantCall: call{Method: "restart", Names: []string{"api"}, Wait: true, Timeout: time.Minute},
			wantOut:  result{Servers: []string{"api"}},
			wantErr:  ErrFailed,
		},
		{
			name:      "events of unknown server",
			backendEr: fmt.Errorf("server %q: %w", "nope", ErrNotFound),
			do:        func(ctx context.Context, c *Client, out any) error { return c.Events(ctx, "nope", out) },
			wantCall:  call{Method: "Events", Names: []string{"nope"}},
			wantErr:   ErrNotFound,
		},
		{
			name:      "backend failure",
			backendEr: errors.New("boom"),
			do:        func(ctx context.Context, c *Client, out any) error { return c.Status(ctx, nil, out) },
			wantCall:  call{Method: "Status"},
			wantErr:   &Error{StatusCode: 500, Message: "boom"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := &fakeBackend{result: tt.backendOK, err: tt.backendEr}
			l := serve(t, t.TempDir(), b)
			c := dial(t, l.Path())
			var out result
			err := tt.do(testContext(t), c, &out)
			switch want := tt.wantErr.(type) {
			case nil:
				if err != nil {
					t.Fatalf("got error %v, want none", err)
				}
			case *Error:
				var got *Error
				if !errors.As(err, &got) || *got != *want {
					t.Fatalf("got error %#v, want %#v", err, want)
				}
			default:
				if !errors.Is(err, want) {
					t.Fatalf("got error %v, want one matching %v", err, want)
				}
			}
			if diff := cmp.Diff([]call{tt.wantCall}, b.Calls()); diff != "" {
				t.Errorf("backend calls (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantOut, out); diff != "" {
				t.Errorf("decoded result (-want +got):\n%s", diff)
			}
		})
	}
}
