// Command check is the real-servers example's smoke test: through nginx it
// asks the app for its health (200 only while the app reaches postgres,
// redis and memcached) and for what each of the three said, and prints
// one line per request. It exits 1 when a request fails.
//
// Usage: go run ./examples/real-servers/check [-nginx 127.0.0.1:22080]
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"
)

func main() {
	nginx := flag.String("nginx", "127.0.0.1:22080", "nginx's address")
	flag.Parse()
	failed := false
	for _, path := range []string{"/health", "/app/health", "/app/"} {
		url := "http://" + *nginx + path
		body, err := get(url)
		if err != nil {
			fmt.Printf("FAIL GET %s: %v\n", url, err)
			failed = true
			continue
		}
		fmt.Printf("ok   GET %s\n", url)
		for _, line := range strings.Split(strings.TrimSpace(body), "\n") {
			fmt.Printf("       %s\n", line)
		}
	}
	if failed {
		os.Exit(1)
	}
}

// get returns the body of GET url, or an error unless it answers 200
// within 5 s.
func get(url string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s: %s", resp.Status, strings.TrimSpace(string(b)))
	}
	return string(b), nil
}
