package observe

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// portAcceptingTimeout bounds each connect of PortAccepting.
const portAcceptingTimeout = 250 * time.Millisecond

// PortAccepting reports whether something accepts TCP connections on
// 127.0.0.1:port or [::1]:port. Each connect is bounded by 250 ms (or ctx).
func PortAccepting(ctx context.Context, port int) bool {
	return portAccepting(ctx, port)
}

// ProbeHTTP sends GET http://host:port/path (host "" is 127.0.0.1) without
// keep-alives, proxies or following redirects. 2xx and 3xx are success.
func ProbeHTTP(ctx context.Context, host string, port int, path string, timeout time.Duration) ProbeResult {
	start := time.Now()
	if host == "" {
		host = "127.0.0.1"
	}
	if path == "" {
		path = "/"
	} else if !strings.HasPrefix(path, "/") {
		path = "/" + path
	}
	ctx, cancel := withTimeout(ctx, timeout)
	defer cancel()
	url := "http://" + net.JoinHostPort(host, strconv.Itoa(port)) + path
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return ProbeResult{Message: "GET " + path + ": " + err.Error(), Duration: time.Since(start)}
	}
	req.Header.Set("User-Agent", "procfleet-probe")
	client := &http.Client{
		Transport: &http.Transport{DisableKeepAlives: true, Proxy: nil},
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
	resp, err := client.Do(req)
	if err != nil {
		return ProbeResult{Message: "GET " + path + ": " + shortNetError(ctx, err, timeout), Duration: time.Since(start)}
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	ok := resp.StatusCode >= 200 && resp.StatusCode < 400
	return ProbeResult{OK: ok, Message: "GET " + path + ": " + strconv.Itoa(resp.StatusCode), Duration: time.Since(start)}
}

// ProbeTCP connects to host:port (host "" is 127.0.0.1).
func ProbeTCP(ctx context.Context, host string, port int, timeout time.Duration) ProbeResult {
	start := time.Now()
	if host == "" {
		host = "127.0.0.1"
	}
	ctx, cancel := withTimeout(ctx, timeout)
	defer cancel()
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		return ProbeResult{Message: "connect: " + shortNetError(ctx, err, timeout), Duration: time.Since(start)}
	}
	c.Close()
	return ProbeResult{OK: true, Message: "connect: ok", Duration: time.Since(start)}
}

// ProbeExec runs argv in dir with env added to this process's environment;
// exit 0 is success. The command runs in its own process group, which is
// killed when the timeout passes. The message holds the exit code (or the
// signal, or the timeout) and the first line of its output.
func ProbeExec(ctx context.Context, argv []string, dir string, env []string, timeout time.Duration) ProbeResult {
	start := time.Now()
	if len(argv) == 0 {
		return ProbeResult{Message: "exec: no command"}
	}
	ctx, cancel := withTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = dir
	if len(env) > 0 {
		cmd.Env = append(os.Environ(), env...)
	}
	out := &capBuffer{max: 4 << 10}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.WaitDelay = 500 * time.Millisecond
	setProbeGroup(cmd)
	err := cmd.Run()
	killProbeGroup(cmd)
	res := ProbeResult{Duration: time.Since(start)}
	line := firstLine(out.Bytes())
	var ee *exec.ExitError
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded) && err != nil:
		res.Message = "exec: timed out after " + timeout.String()
	case ctx.Err() != nil && err != nil:
		res.Message = "exec: " + ctx.Err().Error()
	case err == nil, errors.Is(err, exec.ErrWaitDelay):
		// ErrWaitDelay: exit 0, but a child kept the output open.
		res.OK = true
		res.Message = "exit code 0"
	case errors.As(err, &ee):
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			res.Message = "killed by signal " + strconv.Itoa(int(ws.Signal())) + " (" + ws.Signal().String() + ")"
		} else {
			res.Message = "exit code " + strconv.Itoa(ee.ExitCode())
		}
	default:
		res.Message = "exec: " + err.Error()
	}
	if line != "" {
		res.Message += ": " + line
	}
	return res
}

func withTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if d <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, d)
}

// shortNetError turns a dial or HTTP error into a few words.
func shortNetError(ctx context.Context, err error, timeout time.Duration) string {
	var errno syscall.Errno
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return "timed out after " + timeout.String()
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.As(err, &errno):
		return errno.Error()
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "connection closed"
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return "timed out after " + timeout.String()
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Err != nil {
		return op.Err.Error()
	}
	return err.Error()
}

// firstLine returns the first non-empty line, trimmed to 200 bytes.
func firstLine(b []byte) string {
	for _, l := range bytes.Split(b, []byte{'\n'}) {
		l = bytes.TrimSpace(l)
		if len(l) == 0 {
			continue
		}
		if len(l) > 200 {
			l = l[:200]
		}
		return string(l)
	}
	return ""
}

// capBuffer keeps the first max bytes written and discards the rest.
type capBuffer struct {
	buf bytes.Buffer
	max int
}

func (c *capBuffer) Write(p []byte) (int, error) {
	if room := c.max - c.buf.Len(); room > 0 {
		c.buf.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}

func (c *capBuffer) Bytes() []byte { return c.buf.Bytes() }
