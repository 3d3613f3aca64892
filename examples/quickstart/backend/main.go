// Command backend is the quick start's data service: GET /data returns a
// small JSON document. It has no dependencies.
package main

import (
	"encoding/json"
	"net/http"
	"os"
	"time"

	"github.com/procfleet/procfleet/examples/quickstart/internal/serve"
)

func main() {
	started := time.Now().UTC()
	serve.Main("backend", 18081, func(mux *http.ServeMux) {
		mux.HandleFunc("GET /data", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(map[string]any{
				"service": "backend",
				"pid":     os.Getpid(),
				"since":   started.Format(time.RFC3339),
				"items":   []string{"alpha", "beta", "gamma"},
			})
		})
	})
}
