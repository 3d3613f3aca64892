// Command workload is the benchmark's server: the smallest Go HTTP server
// that still looks like a real one to a supervisor.
//
// At start it appends "<start unix ns> <pid>\n" to its stamp file (one
// O_APPEND write, so concurrent instances never interleave), then listens on
// 127.0.0.1:PORT and answers GET /health with 200 and "pid <pid> gen <gen>".
// SIGTERM or SIGINT makes it exit 0 at once, so a stop measures the
// supervisor, not the server's shutdown.
//
// The port is -port, or the variable named by -port-env (PM2's
// increment_var gives each instance its own). The stamp file is -stamp, or
// <port>.stamp in -stamp-dir (one per instance of a replicated server).
//
// With -spew RATE it is also a log writer: it prints "ready" at start and,
// from the first SIGUSR1 on, RATE numbered lines a second to stdout, one
// write(2) per line as a logging server does ("seq <n> <padding>", -line
// bytes each with the newline), for -spew-for (0: until stopped), then
// "end <count>". -port 0 then means no listener.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

func main() {
	os.Exit(run(os.Args[1:]))
}

type config struct {
	port     int
	portEnv  string
	stamp    string
	stampDir string
	gen      string
	spew     int
	spewFor  time.Duration
	line     int
}

func run(args []string) int {
	start := time.Now()
	var c config
	fs := flag.NewFlagSet("workload", flag.ContinueOnError)
	fs.IntVar(&c.port, "port", 0, "TCP port to listen on (127.0.0.1)")
	fs.StringVar(&c.portEnv, "port-env", "", "read the port from this environment variable instead")
	fs.StringVar(&c.stamp, "stamp", "", "file to append \"<start unix ns> <pid>\" to")
	fs.StringVar(&c.stampDir, "stamp-dir", "", "append the stamp to <port>.stamp in this folder instead")
	fs.StringVar(&c.gen, "gen", "1", "generation, echoed on /health (the bench edits it)")
	fs.IntVar(&c.spew, "spew", 0, "after SIGUSR1, print this many numbered lines a second to stdout")
	fs.DurationVar(&c.spewFor, "spew-for", 0, "stop printing after this long and print \"end <count>\" (0: never)")
	fs.IntVar(&c.line, "line", 64, "bytes per printed line, newline included (at least 16)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if c.portEnv != "" {
		p, err := strconv.Atoi(os.Getenv(c.portEnv))
		if err != nil {
			fmt.Fprintf(os.Stderr, "workload: -port-env %s: %v\n", c.portEnv, err)
			return 2
		}
		c.port = p
	}
	if c.port < 0 || c.port > 65535 || (c.port == 0 && c.spew == 0) {
		fmt.Fprintln(os.Stderr, "workload: -port (or -port-env) is required")
		return 2
	}
	if c.spew < 0 || c.line < 16 {
		fmt.Fprintln(os.Stderr, "workload: -spew must be positive, -line at least 16")
		return 2
	}
	if c.stampDir != "" {
		c.stamp = filepath.Join(c.stampDir, strconv.Itoa(c.port)+".stamp")
	}

	sigc := make(chan os.Signal, 1)
	signal.Notify(sigc, syscall.SIGTERM, syscall.SIGINT)
	usr1 := make(chan os.Signal, 1)
	if c.spew > 0 {
		signal.Notify(usr1, syscall.SIGUSR1)
	}

	if c.stamp != "" {
		if err := appendStamp(c.stamp, start); err != nil {
			fmt.Fprintln(os.Stderr, "workload:", err)
			return 3
		}
	}
	errc := make(chan error, 1)
	if c.port != 0 {
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(c.port)))
		if err != nil {
			fmt.Fprintln(os.Stderr, "workload: listen:", err)
			return 4
		}
		body := []byte(fmt.Sprintf("pid %d gen %s\n", os.Getpid(), c.gen))
		mux := http.NewServeMux()
		mux.HandleFunc("/health", func(w http.ResponseWriter, _ *http.Request) {
			_, _ = w.Write(body)
		})
		srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
		go func() { errc <- srv.Serve(l) }()
	}
	if c.spew > 0 {
		// The signal handler is in place: a SIGUSR1 from now on starts it.
		if _, err := os.Stdout.WriteString("ready\n"); err != nil {
			fmt.Fprintln(os.Stderr, "workload: print:", err)
			return 6
		}
		go func() {
			<-usr1
			errc <- spew(os.Stdout, c.spew, c.spewFor, c.line)
		}()
	}

	select {
	case <-sigc:
		return 0
	case err := <-errc:
		if err == nil {
			// Spewing ended: keep serving until stopped.
			<-sigc
			return 0
		}
		fmt.Fprintln(os.Stderr, "workload:", err)
		return 5
	}
}

// spewTick is how often spew catches up with its rate: it writes, line by
// line, what the rate owes since the start, then waits for the next tick.
const spewTick = time.Millisecond

// spew writes rate lines a second to w, one write per line, for d (0:
// forever), then "end <count>".
func spew(w *os.File, rate int, d time.Duration, size int) error {
	line := bytes.Repeat([]byte{'.'}, size)
	line[size-1] = '\n'
	t0 := time.Now()
	tick := time.NewTicker(spewTick)
	defer tick.Stop()
	n := 0
	for {
		el := time.Since(t0)
		if d > 0 && el >= d {
			el = d
		}
		for owed := int(el.Seconds() * float64(rate)); n < owed; {
			n++
			copy(line, fmt.Sprintf("seq %09d ", n))
			if _, err := w.Write(line); err != nil {
				return fmt.Errorf("print line %d: %w", n, err)
			}
		}
		if d > 0 && el >= d {
			_, err := fmt.Fprintf(w, "end %d\n", n)
			if err != nil {
				return fmt.Errorf("print end: %w", err)
			}
			return nil
		}
		<-tick.C
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
