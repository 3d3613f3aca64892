package reconciler

import (
	"net/http"
	"runtime"
	"runtime/debug"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/procfleet/procfleet/observe"
)

// Metrics exposes a reconciler in the Prometheus text exposition format
// (version 0.0.4), written here rather than through the Prometheus client:
// its registry, collectors and their dependencies weighed on every command
// of the binary, for the few series below. Each Metrics is its own set of
// series: two reconcilers in one process never share one.
//
// Per-server series are read from the reconciler's state at scrape time, the
// same fields Status renders, so they can never disagree with `procfleet
// status`; only durations (reconcile passes, probes) are recorded as they
// happen. A nil *Metrics records nothing: the reconciler calls its hooks
// unconditionally.
//
// Series:
//
//	procfleet_server_up{server}                    1 while a process of the server runs (Starting, Running, Stopping)
//	procfleet_server_ready{server}                 1 when the server is Ready
//	procfleet_server_phase{phase,server}           1 for the server's current phase, 0 for the others
//	procfleet_server_restarts_total{server}        restarts since the count last reset
//	procfleet_server_last_exit_code{server}        exit code of the last exit (-1: killed by a signal or unknown); absent before any exit
//	procfleet_fleet_file_errors                    errors of the fleet files keeping the last good fleet in force
//	procfleet_workqueue_depth                      servers waiting in the work queue
//	procfleet_reconcile_duration_seconds           histogram of one reconcile pass over one server
//	procfleet_probe_duration_seconds{probe,result,server}  histogram of probe latency (probe: readiness|liveness; result: success|failure)
//
// plus the Go runtime's go_goroutines, go_threads, go_info,
// go_memstats_heap_alloc_bytes and go_gc_gomemlimit_bytes, and the process's process_cpu_seconds_total and
// process_max_fds, with, on Linux, process_resident_memory_bytes,
// process_virtual_memory_bytes, process_start_time_seconds and
// process_open_fds (the names and meanings the Prometheus client gives
// them). A family without a series is left out, as the client does.
type Metrics struct {
	mu        sync.Mutex
	reconcile histogram
	probes    map[probeKey]*histogram
	r         *Reconciler
	depth     func() int
}

type probeKey struct{ probe, result, server string }

// NewMetrics builds the metrics. Pass it in Config.Metrics; serve Handler.
func NewMetrics() *Metrics {
	return &Metrics{probes: map[probeKey]*histogram{}}
}

// contentType is the text exposition format's media type.
const contentType = "text/plain; version=0.0.4; charset=utf-8"

// Handler serves the metrics in the text exposition format to GET and HEAD.
func (m *Metrics) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method != http.MethodGet && req.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		body := m.appendText(nil)
		w.Header().Set("Content-Type", contentType)
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		if req.Method == http.MethodGet {
			_, _ = w.Write(body)
		}
	})
}

// attach makes r the source of the per-server series.
func (m *Metrics) attach(r *Reconciler) {
	if m == nil {
		return
	}
	m.mu.Lock()
	m.r = r
	m.mu.Unlock()
}

// setQueue makes q the source of procfleet_workqueue_depth.
func (m *Metrics) setQueue(q *queue) {
	if m == nil || q == nil {
		return
	}
	m.mu.Lock()
	m.depth = q.Len
	m.mu.Unlock()
}

// observeReconcile records one reconcile pass that began at start. Use as
// `defer m.observeReconcile(time.Now())`.
func (m *Metrics) observeReconcile(start time.Time) {
	if m == nil {
		return
	}
	d := time.Since(start).Seconds()
	m.mu.Lock()
	m.reconcile.observe(d)
	m.mu.Unlock()
}

// observeProbe records one probe's latency.
func (m *Metrics) observeProbe(server string, liveness bool, res observe.ProbeResult) {
	if m == nil {
		return
	}
	k := probeKey{probe: "readiness", result: "success", server: server}
	if liveness {
		k.probe = "liveness"
	}
	if !res.OK {
		k.result = "failure"
	}
	m.mu.Lock()
	h := m.probes[k]
	if h == nil {
		h = new(histogram)
		m.probes[k] = h
	}
	h.observe(res.Duration.Seconds())
	m.mu.Unlock()
}

// durationBuckets are the upper bounds of both duration histograms: 100 µs
// doubling to 3.2768 s, 16 buckets (a pass that finds nothing to do takes
// tens of µs, a probe that times out takes seconds).
var durationBuckets = func() []float64 {
	b := make([]float64, 16)
	v := 0.0001
	for i := range b {
		b[i] = v
		v *= 2
	}
	return b
}()

// histogram counts observations per bucket of durationBuckets (not
// cumulative: the exposition sums them), over +Inf in count.
type histogram struct {
	buckets [16]uint64
	count   uint64
	sum     float64
}

func (h *histogram) observe(v float64) {
	if i := sort.SearchFloat64s(durationBuckets, v); i < len(h.buckets) {
		h.buckets[i]++
	}
	h.count++
	h.sum += v
}

// serverSample is what the per-server series need of one server.
type serverSample struct {
	name     string
	phase    Phase
	ready    bool
	restarts int
	lastExit *LastExit
}

// sortedPhases are the phase names in the order the series are written.
var sortedPhases = func() []string {
	p := slices.Clone(phaseNames[:])
	slices.Sort(p)
	return p
}()

// appendText appends every family to b, sorted by name.
func (m *Metrics) appendText(b []byte) []byte {
	m.mu.Lock()
	r, depth := m.r, m.depth
	reconcile := m.reconcile
	keys := make([]probeKey, 0, len(m.probes))
	for k := range m.probes {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b probeKey) int {
		return strings.Compare(a.probe+"\x00"+a.result+"\x00"+a.server, b.probe+"\x00"+b.result+"\x00"+b.server)
	})
	probes := make([]histogram, len(keys))
	for i, k := range keys {
		probes[i] = *m.probes[k]
	}
	m.mu.Unlock()

	var servers []serverSample
	fileErrors := 0
	if r != nil {
		r.mu.Lock()
		servers = make([]serverSample, 0, len(r.servers))
		for _, s := range r.servers {
			servers = append(servers, serverSample{s.name, s.st.phase, s.st.isReady, s.st.restarts, s.st.lastExit})
		}
		fileErrors = len(statusErrors(r.errs))
		r.mu.Unlock()
		slices.SortFunc(servers, func(a, b serverSample) int { return strings.Compare(a.name, b.name) })
	}

	w := expo{b: b}
	w.goRuntime()
	w.process()
	if r != nil {
		w.family("procfleet_fleet_file_errors", "Errors in the fleet files; while non-zero the last good fleet stays in force.", "gauge")
		w.sample("procfleet_fleet_file_errors", float64(fileErrors))
	}
	if len(keys) > 0 {
		w.family("procfleet_probe_duration_seconds", "Latency of readiness and liveness probes run by the reconciler.", "histogram")
		for i, k := range keys {
			w.histogram("procfleet_probe_duration_seconds", &probes[i], "probe", k.probe, "result", k.result, "server", k.server)
		}
	}
	w.family("procfleet_reconcile_duration_seconds", "Duration of one reconcile pass over one server (observe, plan, apply; a start only spawns).", "histogram")
	w.histogram("procfleet_reconcile_duration_seconds", &reconcile)
	if r != nil {
		exited := slices.ContainsFunc(servers, func(s serverSample) bool { return s.lastExit != nil })
		if exited {
			w.family("procfleet_server_last_exit_code", "Exit code of the server's last exit; -1 when killed by a signal or unknown.", "gauge")
			for _, s := range servers {
				if s.lastExit != nil {
					w.sample("procfleet_server_last_exit_code", float64(s.lastExit.Code), "server", s.name)
				}
			}
		}
		if len(servers) > 0 {
			w.family("procfleet_server_phase", "1 for the server's current phase, 0 for the others.", "gauge")
			for _, s := range servers {
				for _, p := range sortedPhases {
					w.sample("procfleet_server_phase", boolFloat(p == s.phase.String()), "phase", p, "server", s.name)
				}
			}
			w.family("procfleet_server_ready", "1 when the server is Ready, else 0.", "gauge")
			for _, s := range servers {
				w.sample("procfleet_server_ready", boolFloat(s.ready), "server", s.name)
			}
			w.family("procfleet_server_restarts_total", "Restarts of the server since its count last reset (after 10 min Ready, or a new spec).", "counter")
			for _, s := range servers {
				w.sample("procfleet_server_restarts_total", float64(s.restarts), "server", s.name)
			}
			w.family("procfleet_server_up", "1 while a process of the server runs (phase Starting, Running or Stopping), else 0.", "gauge")
			for _, s := range servers {
				up := s.phase == PhaseStarting || s.phase == PhaseRunning || s.phase == PhaseStopping
				w.sample("procfleet_server_up", boolFloat(up), "server", s.name)
			}
		}
	}
	if depth != nil {
		w.family("procfleet_workqueue_depth", "Servers waiting in the reconciler's work queue.", "gauge")
		w.sample("procfleet_workqueue_depth", float64(depth()))
	}
	return w.b
}

// goRuntime appends the go_* families. It reads the runtime through
// runtime and runtime/debug, not runtime/metrics, whose package init
// every command of the binary would pay (95 allocations).
func (w *expo) goRuntime() {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms) // stops the world for microseconds, per scrape
	threads, _ := runtime.ThreadCreateProfile(nil)
	w.family("go_gc_gomemlimit_bytes", "GOMEMLIMIT: the Go runtime's soft memory limit in bytes.", "gauge")
	w.sample("go_gc_gomemlimit_bytes", float64(debug.SetMemoryLimit(-1))) // -1 reads it
	w.family("go_goroutines", "Goroutines that exist now.", "gauge")
	w.sample("go_goroutines", float64(runtime.NumGoroutine()))
	w.family("go_info", "The Go version the binary was built with.", "gauge")
	w.sample("go_info", 1, "version", runtime.Version())
	w.family("go_memstats_heap_alloc_bytes", "Bytes of heap objects allocated and not yet freed.", "gauge")
	w.sample("go_memstats_heap_alloc_bytes", float64(ms.HeapAlloc))
	w.family("go_threads", "OS threads the Go runtime has created.", "gauge")
	w.sample("go_threads", float64(threads))
}

// expo appends families in the text exposition format, version 0.0.4.
type expo struct{ b []byte }

// family appends a family's HELP and TYPE lines.
func (w *expo) family(name, help, typ string) {
	w.b = append(w.b, "# HELP "...)
	w.b = append(w.b, name...)
	w.b = append(w.b, ' ')
	for i := 0; i < len(help); i++ {
		switch c := help[i]; c {
		case '\\':
			w.b = append(w.b, `\\`...)
		case '\n':
			w.b = append(w.b, `\n`...)
		default:
			w.b = append(w.b, c)
		}
	}
	w.b = append(w.b, "\n# TYPE "...)
	w.b = append(w.b, name...)
	w.b = append(w.b, ' ')
	w.b = append(w.b, typ...)
	w.b = append(w.b, '\n')
}

// sample appends one series: name, labels as name/value pairs, value.
func (w *expo) sample(name string, v float64, labels ...string) {
	w.b = append(w.b, name...)
	w.labels(labels, "")
	w.b = append(w.b, ' ')
	w.b = appendFloat(w.b, v)
	w.b = append(w.b, '\n')
}

// labels appends {k="v",...}, with le="..." last when le is set, and nothing
// when there is no label.
func (w *expo) labels(kv []string, le string) {
	if len(kv) == 0 && le == "" {
		return
	}
	w.b = append(w.b, '{')
	for i := 0; i+1 < len(kv); i += 2 {
		if i > 0 {
			w.b = append(w.b, ',')
		}
		w.label(kv[i], kv[i+1])
	}
	if le != "" {
		if len(kv) > 0 {
			w.b = append(w.b, ',')
		}
		w.label("le", le)
	}
	w.b = append(w.b, '}')
}

func (w *expo) label(k, v string) {
	w.b = append(w.b, k...)
	w.b = append(w.b, `="`...)
	for i := 0; i < len(v); i++ {
		switch c := v[i]; c {
		case '\\':
			w.b = append(w.b, `\\`...)
		case '"':
			w.b = append(w.b, `\"`...)
		case '\n':
			w.b = append(w.b, `\n`...)
		default:
			w.b = append(w.b, c)
		}
	}
	w.b = append(w.b, '"')
}

// histogram appends a histogram's cumulative buckets, sum and count.
func (w *expo) histogram(name string, h *histogram, labels ...string) {
	var cum uint64
	var le []byte
	for i, bound := range durationBuckets {
		cum += h.buckets[i]
		le = strconv.AppendFloat(le[:0], bound, 'g', -1, 64)
		w.bucket(name, labels, string(le), cum)
	}
	w.bucket(name, labels, "+Inf", h.count)
	w.b = append(w.b, name...)
	w.b = append(w.b, "_sum"...)
	w.labels(labels, "")
	w.b = append(w.b, ' ')
	w.b = appendFloat(w.b, h.sum)
	w.b = append(w.b, '\n')
	w.b = append(w.b, name...)
	w.b = append(w.b, "_count"...)
	w.labels(labels, "")
	w.b = append(w.b, ' ')
	w.b = strconv.AppendUint(w.b, h.count, 10)
	w.b = append(w.b, '\n')
}

func (w *expo) bucket(name string, labels []string, le string, n uint64) {
	w.b = append(w.b, name...)
	w.b = append(w.b, "_bucket"...)
	w.labels(labels, le)
	w.b = append(w.b, ' ')
	w.b = strconv.AppendUint(w.b, n, 10)
	w.b = append(w.b, '\n')
}

// appendFloat writes v as the format wants it: shortest decimal, +Inf,
// -Inf, NaN.
func appendFloat(b []byte, v float64) []byte {
	return strconv.AppendFloat(b, v, 'g', -1, 64)
}

func boolFloat(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
