// Command web is the quick start's front end: GET / serves a static page that
// loads /api/data, which web proxies to the api.
package main

import (
	"flag"
	"io"
	"log"
	"net/http"
	"net/http/httputil"
	"net/url"

	"github.com/procfleet/procfleet/examples/quickstart/internal/serve"
)

const page = `<!doctype html>
<html><head><meta charset="utf-8"><title>procfleet quick start</title></head>
<body>
<h1>procfleet quick start</h1>
<p>web &rarr; api &rarr; backend, each a process kept running by procfleet.</p>
<pre id="data">loading /api/data ...</pre>
<script>
fetch("/api/data").then(r => r.text()).then(t => document.getElementById("data").textContent = t);
</script>
</body></html>
`

func main() {
	api := flag.String("api", "http://127.0.0.1:18082", "base URL of the api")
	serve.Main("web", 18083, func(mux *http.ServeMux) {
		target, err := url.Parse(*api)
		if err != nil {
			log.Fatalf("bad -api %q: %v", *api, err)
		}
		proxy := httputil.NewSingleHostReverseProxy(target)
		mux.Handle("GET /api/", http.StripPrefix("/api", proxy))
		mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			_, _ = io.WriteString(w, page)
		})
	})
}
