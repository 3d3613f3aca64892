package observe

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/procfleet/procfleet/internal/testserver"
)

func TestProbeHTTP(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/health":
			w.WriteHeader(http.StatusOK)
		case "/fail":
			w.WriteHeader(http.StatusServiceUnavailable)
		case "/moved":
			http.Redirect(w, r, "/fail", http.StatusFound)
		case "/hang":
			select {
			case <-r.Context().Done():
			case <-release:
			}
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	defer close(release)
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	refused := testserver.FreePort(t)
	tests := []struct {
		name    string
		port    int
		path    string
		timeout time.Duration
		ok      bool
		msg     string
	}{
		{"200", port, "/health", 5 * time.Second, true, "GET /health: 200"},
		{"503", port, "/fail", 5 * time.Second, false, "GET /fail: 503"},
		{"404", port, "/nope", 5 * time.Second, false, "GET /nope: 404"},
		// 3xx counts as success and is not followed (it leads to a 503).
		{"redirect not followed", port, "/moved", 5 * time.Second, true, "GET /moved: 302"},
		{"path without slash", port, "health", 5 * time.Second, true, "GET /health: 200"},
		{"refused", refused, "/health", 5 * time.Second, false, "GET /health: connection refused"},
		{"timeout", port, "/hang", 100 * time.Millisecond, false, "GET /hang: timed out after 100ms"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := ProbeHTTP(context.Background(), "", tt.port, tt.path, tt.timeout)
			if r.OK != tt.ok || r.Message != tt.msg || r.Duration <= 0 {
				t.Errorf("ProbeHTTP = %+v, want ok=%v %q", r, tt.ok, tt.msg)
			}
		})
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if r := ProbeHTTP(ctx, "127.0.0.1", port, "/health", time.Second); r.OK || r.Message != "GET /health: canceled" {
		t.Errorf("ProbeHTTP with a canceled context = %+v", r)
	}
}

func TestProbeHTTPIPv6(t *testing.T) {
	l, err := net.Listen("tcp6", "[::1]:0")
	if err != nil {
		t.Skipf("no IPv6 loopback: %v", err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	srv.Listener = l
	srv.Start()
	defer srv.Close()
	port := l.Addr().(*net.TCPAddr).Port
	if r := ProbeHTTP(context.Background(), "::1", port, "/", time.Second); !r.OK || r.Message != "GET /: 200" {
		t.Errorf("ProbeHTTP([::1]) = %+v", r)
	}
	if !PortAccepting(context.Background(), port) {
		t.Error("PortAccepting = false for an IPv6-only listener")
	}
}

func TestProbeTCP(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	if r := ProbeTCP(context.Background(), "", port, time.Second); !r.OK || r.Message != "connect: ok" {
		t.Errorf("ProbeTCP(listener) = %+v", r)
	}
	refused := testserver.FreePort(t)
	if r := ProbeTCP(context.Background(), "127.0.0.1", refused, time.Second); r.OK || r.Message != "connect: connection refused" {
		t.Errorf("ProbeTCP(free port) = %+v", r)
	}
}

func TestProbeExec(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("uses sh")
	}
	dir := t.TempDir()
	tests := []struct {
		name    string
		argv    []string
		env     []string
		timeout time.Duration
		ok      bool
		msg     string
	}{
		{"exit 0", []string{"true"}, nil, 5 * time.Second, true, "exit code 0"},
		{"exit 3 with output", []string{"sh", "-c", "echo; echo first line; echo second; exit 3"}, nil, 5 * time.Second, false, "exit code 3: first line"},
		{"env and dir", []string{"sh", "-c", `echo "$PROBE_X $(pwd)"; exit 1`}, []string{"PROBE_X=hello"}, 5 * time.Second, false, "exit code 1: hello " + dir},
		{"killed", []string{"sh", "-c", "kill -9 $$"}, nil, 5 * time.Second, false, "killed by signal 9 (killed)"},
		{"timeout", []string{"sleep", "30"}, nil, 200 * time.Millisecond, false, "exec: timed out after 200ms"},
		{"not found", []string{"/nonexistent/probe"}, nil, 5 * time.Second, false, "exec: fork/exec /nonexistent/probe: no such file or directory"},
		{"empty", nil, nil, time.Second, false, "exec: no command"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := ProbeExec(context.Background(), tt.argv, dir, tt.env, tt.timeout)
			if r.OK != tt.ok || r.Message != tt.msg {
				t.Errorf("ProbeExec(%q) = %+v, want ok=%v %q", tt.argv, r, tt.ok, tt.msg)
			}
		})
	}
}

// A probe whose child keeps running in the background: exit 0 counts, and
// the leftover child (in the probe's process group) is killed.
func TestProbeExecLeftoverChild(t *testing.T) {
	dir := t.TempDir()
	r := ProbeExec(context.Background(), []string{"sh", "-c", "sleep 30 & echo $! > child; exit 0"}, dir, nil, 10*time.Second)
	if !r.OK {
		t.Fatalf("ProbeExec = %+v", r)
	}
	b, err := readFileTrim(dir + "/child")
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(b)
	if err != nil {
		t.Fatal(err)
	}
	h, err := Pin(pid)
	if err != nil {
		return // already gone
	}
	defer h.Close()
	if err := h.Wait(testCtx(t, 10*time.Second)); err != nil {
		t.Errorf("leftover probe child %d still running: %v", pid, err)
	}
}

func readFileTrim(path string) (string, error) {
	b, err := os.ReadFile(path)
	return strings.TrimSpace(string(b)), err
}
