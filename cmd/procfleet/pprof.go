package main

import (
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
)

// envPprof, when set to a loopback address ("127.0.0.1:6060"), makes any
// procfleet command serve the Go profiler there (/debug/pprof/) while it
// runs: how up's idle CPU and memory were profiled. It is for developers
// and not documented for users; the address must be loopback.
const envPprof = "PROCFLEET_PPROF_ADDR"

func init() {
	addr := os.Getenv(envPprof)
	if addr == "" {
		return
	}
	if err := servePprof(addr); err != nil {
		fmt.Fprintf(os.Stderr, "procfleet: %s: %v\n", envPprof, err)
	}
}

func servePprof(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("serve pprof on %q: %w", addr, err)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("serve pprof on %q: not a loopback address", addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("serve pprof: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	go func() { _ = http.Serve(ln, mux) }() // for the process's life
	return nil
}
