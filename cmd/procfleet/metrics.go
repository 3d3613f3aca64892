package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"time"

	"github.com/procfleet/procfleet/reconciler"
)

// metricsAddrFlag is the help of up's --metrics-addr.
const metricsAddrFlag = "serve Prometheus metrics at http://`ADDR`/metrics (loopback only, like 127.0.0.1:9464)"

// checkMetricsAddr parses --metrics-addr and refuses any address that is not
// loopback: the metrics name every server, its pid and its exit codes, and
// procfleet has no authentication to put in front of them. It returns the
// address to listen on ("localhost" becomes 127.0.0.1).
func checkMetricsAddr(addr string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("invalid --metrics-addr %q: %v (want HOST:PORT on loopback, like 127.0.0.1:9464)", addr, err)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return "", fmt.Errorf("invalid --metrics-addr %q: port %q is not a number from 0 to 65535", addr, port)
	}
	if host == "localhost" {
		host = "127.0.0.1"
	}
	ip, err := netip.ParseAddr(host)
	switch {
	case host == "":
		return "", fmt.Errorf("refusing --metrics-addr %q: it listens on every interface; metrics are served on loopback only (use 127.0.0.1:%s or [::1]:%s)", addr, port, port)
	case err != nil:
		return "", fmt.Errorf("refusing --metrics-addr %q: %q is not an IP address; metrics are served on loopback only (use 127.0.0.1:%s)", addr, host, port)
	case !ip.IsLoopback():
		return "", fmt.Errorf("refusing --metrics-addr %q: %s is not a loopback address; metrics are served on loopback only (use 127.0.0.1:%s, and a reverse proxy with authentication to expose them)", addr, ip, port)
	}
	return net.JoinHostPort(ip.String(), port), nil
}

// serveMetrics listens on addr (already checked) and serves m's /metrics
// until stop is called. The listen happens before it returns, so a busy
// port is an error here, not later.
func serveMetrics(addr string, m *reconciler.Metrics, stderr io.Writer) (stop func(), err error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("up: serve metrics on %s: %w (choose another port with --metrics-addr)", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", m.Handler())
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, IdleTimeout: time.Minute}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			fmt.Fprintf(stderr, "procfleet up: metrics server on %s stopped: %v\n", addr, err)
		}
	}()
	fmt.Fprintf(stderr, "procfleet up: metrics at http://%s/metrics\n", l.Addr())
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		<-done
	}, nil
}

// startMetrics serves the metrics of up's reconciler when addr is set
// (--metrics-addr): it checks the address, listens, and returns the metrics
// to pass in reconciler.Config and the function that stops serving. With an
// empty addr it returns nil metrics and a no-op.
func startMetrics(addr string, stderr io.Writer) (*reconciler.Metrics, func(), error) {
	if addr == "" {
		return nil, func() {}, nil
	}
	listen, err := checkMetricsAddr(addr)
	if err != nil {
		return nil, nil, fmt.Errorf("up: %w", err)
	}
	m := reconciler.NewMetrics()
	stop, err := serveMetrics(listen, m, stderr)
	if err != nil {
		return nil, nil, err
	}
	return m, stop, nil
}
