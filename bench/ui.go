package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// pageBound bounds loading the dashboard's page.
const pageBound = 30 * time.Second

// statusPoll is how often the bench asks `procfleet status` whether the
// fleet is ready again: each ask is a process start, so not too often.
const statusPoll = 250 * time.Millisecond

// ui: `up` is started again with --ui (it adopts the running fleet); its
// CPU over r.window with no page open, then with one page open (the fleet
// page and its event stream, as a browser holds them).
func (r *runner) ui(ctx context.Context, p *procfleetPeer, f Fleet, sr *sizeRows) error {
	out, err := runCmd(ctx, cmdBound, nil, p.bin, "up", "--help")
	if err != nil {
		return err
	}
	if !strings.Contains(string(out), "--ui") {
		return &unsupportedError{what: "`up --ui`"}
	}
	if err := p.endUp(); err != nil {
		return err
	}
	logStart := fileSize(p.upLog())
	addr := "127.0.0.1:" + strconv.Itoa(r.uiPort)
	if err := p.startUp("--ui", addr); err != nil {
		return err
	}
	url, err := waitDashboardURL(ctx, p.upLog(), logStart, addr, p.Err)
	if err != nil {
		return err
	}
	if err := p.waitReady(ctx, coldLimit(len(f.Servers))); err != nil {
		return fmt.Errorf("up --ui adopting the fleet: %w", err)
	}
	pid, err := p.SupervisorPID()
	if err != nil {
		return err
	}
	idle, err := r.cpuOver(ctx, pid, p.Err)
	if err != nil {
		return err
	}
	pctx, closePage := context.WithCancel(ctx)
	defer closePage()
	streamed, err := openPage(pctx, url)
	if err != nil {
		return err
	}
	open, err := r.cpuOver(ctx, pid, p.Err)
	if err != nil {
		return err
	}
	closePage()
	perSec := func(d time.Duration) float64 { return ms(d) / r.window.Seconds() }
	r.res.Set(sr.uiNoPage, p.Name(), perSec(idle))
	r.res.Set(sr.uiPage, p.Name(), perSec(open-idle))
	r.log.Printf("%s: up --ui with %d servers: %.2f ms/s, %.2f ms/s more with a page open (%d bytes streamed)",
		p.Name(), len(f.Servers), perSec(idle), perSec(open-idle), <-streamed)
	return nil
}

// waitReady polls `procfleet status` until every server is ready.
func (p *procfleetPeer) waitReady(ctx context.Context, bound time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	t := time.NewTicker(statusPoll)
	defer t.Stop()
	for {
		ok, notReady, err := p.allReady(ctx)
		if ok {
			return nil
		}
		if err := p.Err(); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for every server to be ready (%d not ready, last error %v): %w", notReady, err, context.Cause(ctx))
		case <-t.C:
		}
	}
}

func fileSize(path string) int64 {
	st, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return st.Size()
}

// waitDashboardURL polls up's log, from offset on, until it prints the
// dashboard's URL on addr.
func waitDashboardURL(ctx context.Context, logPath string, offset int64, addr string, check errCheck) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, followBound)
	defer cancel()
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for {
		data, err := os.ReadFile(logPath)
		if err != nil {
			return "", fmt.Errorf("read up's output: %w", err)
		}
		if int64(len(data)) > offset {
			if url := dashboardURL(data[offset:], addr); url != "" {
				return url, nil
			}
		}
		if err := check(); err != nil {
			return "", err
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("wait for up to print the dashboard URL on %s: %w", addr, context.Cause(ctx))
		case <-t.C:
		}
	}
}

var urlRE = regexp.MustCompile(`https?://[^\s"'<>]+`)

// dashboardURL returns the first URL on addr in out that carries a token.
func dashboardURL(out []byte, addr string) string {
	for _, u := range urlRE.FindAllString(string(out), -1) {
		if strings.Contains(u, "://"+addr+"/") && strings.Contains(u, "token=") {
			return u
		}
	}
	return ""
}

var streamRE = regexp.MustCompile(`data-stream="([^"]+)"`)

// openPage does what a browser does with the dashboard URL: it trades the
// token for the cookie, loads the page, and opens the event stream the
// page names (data-stream), which it reads until ctx ends. The channel
// then yields the bytes streamed.
func openPage(ctx context.Context, url string) (<-chan int64, error) {
	jar, err := cookiejar.New(nil)
	if err != nil {
		return nil, fmt.Errorf("open the dashboard: %w", err)
	}
	// The page must come within pageBound; the stream's headers too, its
	// body then runs until ctx ends.
	c := &http.Client{Jar: jar, Transport: &http.Transport{Proxy: nil, ResponseHeaderTimeout: pageBound}}
	lctx, cancel := context.WithTimeout(ctx, pageBound)
	defer cancel()
	req, err := http.NewRequestWithContext(lctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("open the dashboard: %w", err)
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, fmt.Errorf("open the dashboard: %w", err)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	resp.Body.Close()
	if err != nil {
		return nil, fmt.Errorf("open the dashboard: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("open the dashboard: %s: %s", resp.Status, tail(body, 200))
	}
	m := streamRE.FindSubmatch(body)
	if m == nil {
		return nil, errors.New("open the dashboard: the page names no event stream (data-stream)")
	}
	ref, err := resp.Request.URL.Parse(string(m[1]))
	if err != nil {
		return nil, fmt.Errorf("open the dashboard: stream %q: %w", m[1], err)
	}
	stream := ref.String()
	req, err = http.NewRequestWithContext(ctx, http.MethodGet, stream, nil)
	if err != nil {
		return nil, fmt.Errorf("open the dashboard's stream: %w", err)
	}
	req.Header.Set("Accept", "text/event-stream")
	resp, err = c.Do(req)
	if err != nil {
		return nil, fmt.Errorf("open the dashboard's stream %s: %w", stream, err)
	}
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		resp.Body.Close()
		return nil, fmt.Errorf("open the dashboard's stream %s: %s, %q", stream, resp.Status, resp.Header.Get("Content-Type"))
	}
	n := make(chan int64, 1)
	go func() {
		defer resp.Body.Close()
		k, _ := io.Copy(io.Discard, resp.Body) // ends when ctx does
		n <- k
	}()
	return n, nil
}
