package reconciler

import (
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/procfleet/procfleet/observe"
)

// Metrics exposes a reconciler as Prometheus metrics, on a registry of its
// own (never the global default one, so that two reconcilers in one process
// do not collide and a library's metrics never leak in).
//
// Per-server series are read from Status at scrape time, so they can never
// disagree with `procfleet status`; only durations (reconcile passes,
// probes) are recorded as they happen. A nil *Metrics records nothing: the
// reconciler calls its hooks unconditionally.
//
// Series:
//
//	procfleet_server_up{server}                    1 while a process of the server runs (Starting, Running, Stopping)
//	procfleet_server_ready{server}                 1 when the server is Ready
//	procfleet_server_phase{server,phase}           1 for the server's current phase, 0 for the others
//	procfleet_server_restarts_total{server}        restarts since the count last reset
//	procfleet_server_last_exit_code{server}        exit code of the last exit (-1: killed by a signal or unknown); absent before any exit
//	procfleet_fleet_file_errors                    errors of the fleet files keeping the last good fleet in force
//	procfleet_workqueue_depth                      servers waiting in the work queue
//	procfleet_reconcile_duration_seconds           histogram of one reconcile pass over one server
//	procfleet_probe_duration_seconds{server,probe,result}  histogram of probe latency (probe: readiness|liveness; result: success|failure)
//
// plus the Go runtime and process collectors (go_*, process_*).
type Metrics struct {
	reg       *prometheus.Registry
	reconcile prometheus.Histogram
	probes    *prometheus.HistogramVec

	mu    sync.Mutex
	r     *Reconciler
	depth func() int
}

// NewMetrics builds the metrics and their registry. Pass it in Config.Metrics;
// serve Handler.
func NewMetrics() *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry()}
	m.reconcile = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "procfleet_reconcile_duration_seconds",
		Help: "Duration of one reconcile pass over one server (observe, plan, apply; a start only spawns).",
		// 100 µs to ~3 s.
		Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16),
	})
	m.probes = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "procfleet_probe_duration_seconds",
		Help:    "Latency of readiness and liveness probes run by the reconciler.",
		Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16),
	}, []string{"server", "probe", "result"})
	m.reg.MustRegister(m.reconcile, m.probes, fleetCollector{m},
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Registry is the registry the metrics are on, for a caller that adds its
// own.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the metrics in the Prometheus exposition formats.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
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
func (m *Metrics) setQueue(q queue) {
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
	m.reconcile.Observe(time.Since(start).Seconds())
}

// observeProbe records one probe's latency.
func (m *Metrics) observeProbe(server string, liveness bool, res observe.ProbeResult) {
	if m == nil {
		return
	}
	probe, result := "readiness", "success"
	if liveness {
		probe = "liveness"
	}
	if !res.OK {
		result = "failure"
	}
	m.probes.WithLabelValues(server, probe, result).Observe(res.Duration.Seconds())
}

var (
	descUp = prometheus.NewDesc("procfleet_server_up",
		"1 while a process of the server runs (phase Starting, Running or Stopping), else 0.", []string{"server"}, nil)
	descReady = prometheus.NewDesc("procfleet_server_ready",
		"1 when the server is Ready, else 0.", []string{"server"}, nil)
	descPhase = prometheus.NewDesc("procfleet_server_phase",
		"1 for the server's current phase, 0 for the others.", []string{"server", "phase"}, nil)
	descRestarts = prometheus.NewDesc("procfleet_server_restarts_total",
		"Restarts of the server since its count last reset (after 10 min Ready, or a new spec).", []string{"server"}, nil)
	descLastExit = prometheus.NewDesc("procfleet_server_last_exit_code",
		"Exit code of the server's last exit; -1 when killed by a signal or unknown.", []string{"server"}, nil)
	descFileErrors = prometheus.NewDesc("procfleet_fleet_file_errors",
		"Errors in the fleet files; while non-zero the last good fleet stays in force.", nil, nil)
	descDepth = prometheus.NewDesc("procfleet_workqueue_depth",
		"Servers waiting in the reconciler's work queue.", nil, nil)
)

// fleetCollector reads the per-server series from the reconciler's Status
// at scrape time.
type fleetCollector struct{ m *Metrics }

func (c fleetCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descUp, descReady, descPhase, descRestarts, descLastExit, descFileErrors, descDepth} {
		ch <- d
	}
}

func (c fleetCollector) Collect(ch chan<- prometheus.Metric) {
	c.m.mu.Lock()
	r, depth := c.m.r, c.m.depth
	c.m.mu.Unlock()
	if depth != nil {
		ch <- prometheus.MustNewConstMetric(descDepth, prometheus.GaugeValue, float64(depth()))
	}
	if r == nil {
		return
	}
	st := r.Status()
	ch <- prometheus.MustNewConstMetric(descFileErrors, prometheus.GaugeValue, float64(len(st.Errors)))
	for _, s := range st.Servers {
		up := s.Phase == PhaseStarting || s.Phase == PhaseRunning || s.Phase == PhaseStopping
		ch <- prometheus.MustNewConstMetric(descUp, prometheus.GaugeValue, boolFloat(up), s.Name)
		ch <- prometheus.MustNewConstMetric(descReady, prometheus.GaugeValue, boolFloat(s.Ready), s.Name)
		for _, p := range phaseNames {
			ch <- prometheus.MustNewConstMetric(descPhase, prometheus.GaugeValue, boolFloat(p == s.Phase.String()), s.Name, p)
		}
		ch <- prometheus.MustNewConstMetric(descRestarts, prometheus.CounterValue, float64(s.Restarts), s.Name)
		if s.LastExit != nil {
			ch <- prometheus.MustNewConstMetric(descLastExit, prometheus.GaugeValue, float64(s.LastExit.Code), s.Name)
		}
	}
}

func boolFloat(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
