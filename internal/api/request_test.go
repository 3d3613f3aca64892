package api

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
)

// rawClient sends hand-made requests to the socket, bypassing Client's
// well-formed bodies.
func rawClient(path string) *http.Client {
	return &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return dialUnix(ctx, path)
		},
	}}
}

func TestRequestsRejected(t *testing.T) {
	b := &fakeBackend{}
	l := serve(t, t.TempDir(), b)
	hc := rawClient(l.Path())

	tests := []struct {
		name     string
		method   string
		path     string
		body     string
		wantCode int
		wantErr  string // part of the JSON error
	}{
		{"oversized body", "POST", "/v1/down", `{"names":["` + strings.Repeat("a", DefaultMaxBodyBytes) + `"]}`, 413, "too large"},
		{"unknown field", "POST", "/v1/down", `{"names":["api"],"command":["sh","-c","id"]}`, 400, `unknown field "command"`},
		{"unknown reload field", "POST", "/v1/reload", `{"wait":true,"spec":{}}`, 400, `unknown field "spec"`},
		{"trailing data", "POST", "/v1/down", `{"names":["api"]} {"all":true}`, 400, "data after"},
		{"not an object", "POST", "/v1/down", `["api"]`, 400, "not a JSON object"},
		{"null body", "POST", "/v1/reload", `null`, 400, "not a JSON object"},
		{"empty body", "POST", "/v1/reload", ``, 400, "not a JSON object"},
		{"down without names", "POST", "/v1/down", `{}`, 400, `{"all": true}`},
		{"down names and all", "POST", "/v1/down", `{"names":["api"],"all":true}`, 400, "exclusive"},
		{"down escaping name", "POST", "/v1/down", `{"names":["../x"]}`, 400, "not a DNS label"},
		{"down absolute name", "POST", "/v1/down", `{"names":["/etc/passwd"]}`, 400, "not a DNS label"},
		{"down long name", "POST", "/v1/down", `{"names":["` + strings.Repeat("a", 64) + `"]}`, 400, "longer than 63"},
		{"down duplicate", "POST", "/v1/down", `{"names":["api","api"]}`, 400, "twice"},
		{"reload bad timeout", "POST", "/v1/reload", `{"wait":true,"timeout":"soon"}`, 400, "timeout"},
		{"reload negative timeout", "POST", "/v1/reload", `{"wait":true,"timeout":"-1s"}`, 400, "outside"},
		{"reload huge timeout", "POST", "/v1/reload", `{"wait":true,"timeout":"25h"}`, 400, "outside"},
		{"reload query", "POST", "/v1/reload?cmd=x", `{}`, 400, "unexpected query"},
		{"status bad name", "GET", "/v1/status?name=..%2Fx", ``, 400, "not a DNS label"},
		{"status unknown parameter", "GET", "/v1/status?exec=id", ``, 400, "unknown query parameter"},
		{"events bad name", "GET", "/v1/events/A_B", ``, 400, "not a DNS label"},
		{"events escaping name", "GET", "/v1/events/..%2F..%2Fetc", ``, 400, "not a DNS label"},
		{"GET with body", "GET", "/v1/status", `{"x":1}`, 400, "GET with a body"},
		{"wrong method", "GET", "/v1/down", ``, 405, "not allowed"},
		{"unknown route", "POST", "/v1/exec", `{"command":["id"]}`, 404, "no route"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequestWithContext(testContext(t), tt.method, "http://procfleet"+tt.path, strings.NewReader(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			resp, err := hc.Do(req)
			if err != nil {
				t.Fatalf("%s %s: %v", tt.method, tt.path, err)
			}
			defer resp.Body.Close()
			data, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tt.wantCode {
				t.Errorf("status %d, want %d (body %s)", resp.StatusCode, tt.wantCode, data)
			}
			if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q, want application/json", ct)
			}
			var eb errorBody
			if err := json.Unmarshal(data, &eb); err != nil {
				t.Fatalf("error body %q is not JSON: %v", data, err)
			}
			if !strings.Contains(eb.Error, tt.wantErr) {
				t.Errorf("error %q, want it to contain %q", eb.Error, tt.wantErr)
			}
		})
	}
	if calls := b.Calls(); len(calls) != 0 {
		t.Errorf("the backend was called for rejected requests: %+v", calls)
	}
}
