// Command app is the real-servers example's application: a small HTTP
// server that needs postgres, redis and memcached. It speaks just enough of
// each one's wire protocol to prove it reaches the real server (a postgres
// startup handshake, a redis PING, a memcached version), with no client
// library.
//
//	GET /health  200 "ok" while all three answer, else 503 naming the first that does not
//	GET /        what each server said (its version), one line each
//
// Usage: app -addr 127.0.0.1:22090 -postgres 127.0.0.1:22432 -redis 127.0.0.1:22379 -memcached 127.0.0.1:22211
package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

// checkTimeout bounds one check of one server (dial, exchange, close).
const checkTimeout = 2 * time.Second

func main() {
	addr := flag.String("addr", "127.0.0.1:22090", "listen address")
	pg := flag.String("postgres", "127.0.0.1:22432", "postgres address")
	pgUser := flag.String("postgres-user", "postgres", "postgres user (trust authentication)")
	rd := flag.String("redis", "127.0.0.1:22379", "redis address")
	mc := flag.String("memcached", "127.0.0.1:22211", "memcached address")
	flag.Parse()

	logger := log.New(os.Stderr, "app ", log.LstdFlags|log.Lmicroseconds)
	backends := []backend{
		{name: "postgres", addr: *pg, check: func(c net.Conn) (string, error) { return postgresHello(c, *pgUser) }},
		{name: "redis", addr: *rd, check: redisPing},
		{name: "memcached", addr: *mc, check: memcachedVersion},
	}

	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, r *http.Request) {
		for _, b := range backends {
			if _, err := b.run(r.Context()); err != nil {
				http.Error(w, err.Error(), http.StatusServiceUnavailable)
				return
			}
		}
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		for _, b := range backends {
			said, err := b.run(r.Context())
			if err != nil {
				said = "error: " + err.Error()
			}
			fmt.Fprintf(w, "%s %s: %s\n", b.name, b.addr, said)
		}
	})

	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		logger.Fatalf("listen: %v", err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(shutdown); err != nil {
			logger.Printf("shutdown: %v", err)
		}
	}()
	logger.Printf("listening on %s (pid %d)", ln.Addr(), os.Getpid())
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		logger.Fatalf("serve: %v", err)
	}
	logger.Printf("stopped")
}

// backend is one server the app needs and how to check it.
type backend struct {
	name, addr string
	// check talks to the server over c and returns what it said.
	check func(c net.Conn) (string, error)
}

// run dials the backend and checks it, bounded by checkTimeout.
func (b backend) run(ctx context.Context) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, checkTimeout)
	defer cancel()
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", b.addr)
	if err != nil {
		return "", fmt.Errorf("%s: %w", b.name, err)
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(dl)
	}
	said, err := b.check(c)
	if err != nil {
		return "", fmt.Errorf("%s at %s: %w", b.name, b.addr, err)
	}
	return said, nil
}

// redisPing sends an inline PING and expects +PONG.
func redisPing(c net.Conn) (string, error) {
	if _, err := io.WriteString(c, "PING\r\n"); err != nil {
		return "", err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return "", err
	}
	if line = strings.TrimSpace(line); line != "+PONG" {
		return "", fmt.Errorf("PING answered %q", line)
	}
	return "PONG", nil
}

// memcachedVersion sends "version" and expects "VERSION x".
func memcachedVersion(c net.Conn) (string, error) {
	if _, err := io.WriteString(c, "version\r\n"); err != nil {
		return "", err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return "", err
	}
	v, ok := strings.CutPrefix(strings.TrimSpace(line), "VERSION ")
	if !ok {
		return "", fmt.Errorf("version answered %q", strings.TrimSpace(line))
	}
	return "version " + v, nil
}

// postgresHello runs the startup handshake of the postgres protocol (3.0)
// for user on database postgres, which trust authentication accepts without
// a password, and returns the server_version the server reports once it is
// ready for queries. A server still starting, shutting down or in recovery
// answers with an error, which is returned.
func postgresHello(c net.Conn, user string) (string, error) {
	params := "user\x00" + user + "\x00database\x00postgres\x00\x00"
	msg := make([]byte, 8, 8+len(params))
	binary.BigEndian.PutUint32(msg[0:4], uint32(8+len(params)))
	binary.BigEndian.PutUint32(msg[4:8], 3<<16) // protocol 3.0
	msg = append(msg, params...)
	if _, err := c.Write(msg); err != nil {
		return "", err
	}
	r := bufio.NewReader(c)
	version := ""
	for {
		typ, body, err := readPostgresMessage(r)
		if err != nil {
			return "", err
		}
		switch typ {
		case 'R': // authentication request: 0 means done
			if len(body) < 4 || binary.BigEndian.Uint32(body) != 0 {
				return "", errors.New("server asks for a password: the example expects trust authentication")
			}
		case 'S': // parameter status: name NUL value NUL
			if name, value, ok := strings.Cut(strings.TrimRight(string(body), "\x00"), "\x00"); ok && name == "server_version" {
				version = value
			}
		case 'E':
			return "", fmt.Errorf("server error: %s", postgresErrorText(body))
		case 'Z': // ready for query
			_, _ = c.Write([]byte{'X', 0, 0, 0, 4}) // terminate
			return "server_version " + version, nil
		}
	}
}

// maxPostgresMessage bounds the size of one message the handshake reads.
const maxPostgresMessage = 1 << 16

// readPostgresMessage reads one backend message: a type byte, a 4-byte
// length that counts itself, and the body.
func readPostgresMessage(r *bufio.Reader) (byte, []byte, error) {
	var head [5]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(head[1:])
	if n < 4 || n > maxPostgresMessage {
		return 0, nil, fmt.Errorf("message %q of length %d", head[0], n)
	}
	body := make([]byte, n-4)
	if _, err := io.ReadFull(r, body); err != nil {
		return 0, nil, err
	}
	return head[0], body, nil
}

// postgresErrorText returns the message field ('M') of an error response,
// or its raw fields when it has none.
func postgresErrorText(body []byte) string {
	for _, f := range strings.Split(string(body), "\x00") {
		if msg, ok := strings.CutPrefix(f, "M"); ok {
			return msg
		}
	}
	return strings.ReplaceAll(strings.TrimRight(string(body), "\x00"), "\x00", " ")
}
