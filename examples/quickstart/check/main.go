// Command check verifies the running quick-start fleet without curl: every
// server answers /health, and a request to web's /api/data travels
// web -> api -> backend and comes back with the backend's data.
// It exits 0 when all checks pass and 1 otherwise.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"
)

func main() {
	backend := flag.String("backend", "http://127.0.0.1:18081", "backend base URL")
	api := flag.String("api", "http://127.0.0.1:18082", "api base URL")
	web := flag.String("web", "http://127.0.0.1:18083", "web base URL")
	flag.Parse()

	client := &http.Client{Timeout: 5 * time.Second}
	failed := false
	check := func(what string, err error) {
		if err != nil {
			failed = true
			fmt.Printf("FAIL %s: %v\n", what, err)
			return
		}
		fmt.Printf("ok   %s\n", what)
	}
	for _, base := range []string{*backend, *api, *web} {
		_, err := get(client, base+"/health")
		check("GET "+base+"/health", err)
	}
	body, err := get(client, *web+"/api/data")
	if err == nil {
		var data struct {
			Service string   `json:"service"`
			Items   []string `json:"items"`
		}
		if err = json.Unmarshal(body, &data); err == nil && (data.Service != "backend" || len(data.Items) == 0) {
			err = fmt.Errorf("unexpected answer %s", body)
		}
	}
	check("GET "+*web+"/api/data reaches the backend through the api", err)
	if failed {
		os.Exit(1)
	}
}

func get(client *http.Client, url string) ([]byte, error) {
	resp, err := client.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("status %s: %s", resp.Status, body)
	}
	return body, nil
}
