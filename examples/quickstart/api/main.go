// Command api is the quick start's API: GET /data is proxied to the backend
// given by -backend, so the api is useful only once the backend is Ready
// (procfleet.yaml says so with dependsOn).
package main

import (
	"flag"
	"log"
	"net/http"
	"net/http/httputil"
	"net/url"

	"github.com/procfleet/procfleet/examples/quickstart/internal/serve"
)

func main() {
	backend := flag.String("backend", "http://127.0.0.1:18081", "base URL of the backend")
	serve.Main("api", 18082, func(mux *http.ServeMux) {
		target, err := url.Parse(*backend)
		if err != nil {
			log.Fatalf("bad -backend %q: %v", *backend, err)
		}
		mux.Handle("GET /data", httputil.NewSingleHostReverseProxy(target))
	})
}
