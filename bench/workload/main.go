// Command workload is the benchmark's server: the smallest Go HTTP server
// that still looks like a real one to a supervisor.
//
// At start it appends "<start unix ns> <pid>\n" to the stamp file (one
// O_APPEND write, so concurrent instances never interleave), then listens on
// 127.0.0.1:PORT and answers GET /health with 200 and "pid <pid> gen <gen>".
// SIGTERM or SIGINT makes it exit 0 at once, so a stop measures the
// supervisor, not the server's shutdown.
package main

import (
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"
)

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	start := time.Now()
	fs := flag.NewFlagSet("workload", flag.ContinueOnError)
	port := fs.Int("port", 0, "TCP port to listen on (127.0.0.1)")
	stamp := fs.String("stamp", "", "file to append \"<start unix ns> <pid>\" to")
	gen := fs.String("gen", "1", "generation, echoed on /health (the bench edits it)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *port <= 0 || *port > 65535 {
		fmt.Fprintln(os.Stderr, "workload: -port is required")
		return 2
	}

	sigc := make(chan os.Signal, 1)
	signal.Notify(sigc, syscall.SIGTERM, syscall.SIGINT)

	if *stamp != "" {
		if err := appendStamp(*stamp, start); err != nil {
			fmt.Fprintln(os.Stderr, "workload:", err)
			return 3
		}
	}
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(*port)))
	if err != nil {
		fmt.Fprintln(os.Stderr, "workload: listen:", err)
		return 4
	}
	body := []byte(fmt.Sprintf("pid %d gen %s\n", os.Getpid(), *gen))
	mux := http.NewServeMux()
	mux.HandleFunc("/health", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write(body)
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(l) }()

	select {
	case <-sigc:
		return 0
	case err := <-errc:
		fmt.Fprintln(os.Stderr, "workload: serve:", err)
		return 5
	}
}

func appendStamp(path string, start time.Time) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("open stamp file: %w", err)
	}
	_, werr := fmt.Fprintf(f, "%d %d\n", start.UnixNano(), os.Getpid())
	cerr := f.Close()
	if werr != nil {
		return fmt.Errorf("write stamp file: %w", werr)
	}
	if cerr != nil {
		return fmt.Errorf("close stamp file: %w", cerr)
	}
	return nil
}
