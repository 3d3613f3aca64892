// Package serve runs the quick-start example servers: it listens on
// HOST:PORT (127.0.0.1 unless -host says otherwise), answers /health, and shuts down gracefully on SIGTERM or
// SIGINT (finishing requests in flight, for at most 5 seconds), which is what
// procfleet sends when it stops a server.
package serve

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"
)

// Main parses the common flags (-port, -host), serves mux and returns
// when a stop signal has been handled. It never returns on success before a
// signal arrives. name prefixes the server's log lines.
func Main(name string, defaultPort int, register func(mux *http.ServeMux)) {
	port := flag.Int("port", defaultPort, "TCP port to listen on")
	host := flag.String("host", "127.0.0.1", "address to listen on (0.0.0.0 for every interface)")
	flag.Parse()
	log.SetPrefix(name + " ")
	log.SetFlags(log.LstdFlags | log.Lmicroseconds)
	if err := run(*host, *port, register); err != nil {
		log.Printf("error: %v", err)
		os.Exit(1)
	}
}

func run(host string, port int, register func(mux *http.ServeMux)) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()

	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	register(mux)

	ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	log.Printf("listening on %s (pid %d)", ln.Addr(), os.Getpid())

	select {
	case err := <-served:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	log.Printf("stop signal received, shutting down")
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve: %w", err)
	}
	log.Printf("stopped")
	return nil
}
