package reconciler

import (
	"bytes"
	"io"
	"math"
	"net/http/httptest"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/procfleet/procfleet/actuate"
	"github.com/procfleet/procfleet/observe"
)

// scrape serves m's /metrics and parses the text strictly (expfmt's
// parser: names, escaping, TYPE before samples, histogram shape); it fails
// the test on a bad status, media type or parse error.
func scrape(t *testing.T, m *Metrics) (string, map[string]*dto.MetricFamily) {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	res := rec.Result()
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != 200 {
		t.Fatalf("GET /metrics: %s", res.Status)
	}
	if ct, want := res.Header.Get("Content-Type"), "text/plain; version=0.0.4; charset=utf-8"; ct != want {
		t.Errorf("Content-Type %q, want %q", ct, want)
	}
	if got := expfmt.ResponseFormat(res.Header); got.FormatType() != expfmt.TypeTextPlain {
		t.Errorf("Content-Type %q is not the text format to expfmt (%v)", res.Header.Get("Content-Type"), got)
	}
	p := expfmt.NewTextParser(model.LegacyValidation)
	mfs, err := p.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("parse /metrics: %v\n%s", err, body)
	}
	for name, mf := range mfs {
		if mf.GetHelp() == "" {
			t.Errorf("%s has no HELP", name)
		}
	}
	return string(body), mfs
}

// value returns the value of the series of family name whose labels
// include want, and whether there is one.
func value(mfs map[string]*dto.MetricFamily, name string, want map[string]string) (float64, bool) {
	mf := mfs[name]
	if mf == nil {
		return 0, false
	}
next:
	for _, m := range mf.GetMetric() {
		got := map[string]string{}
		for _, lp := range m.GetLabel() {
			got[lp.GetName()] = lp.GetValue()
		}
		for k, v := range want {
			if got[k] != v {
				continue next
			}
		}
		switch {
		case m.Gauge != nil:
			return m.GetGauge().GetValue(), true
		case m.Counter != nil:
			return m.GetCounter().GetValue(), true
		case m.Histogram != nil:
			return float64(m.GetHistogram().GetSampleCount()), true
		}
	}
	return 0, false
}

// TestMetricsFromStatus: the per-server series are read from Status at
// scrape time, for each phase; durations are recorded through the hooks. The
// reconciler's memory is set directly (no processes): this checks the
// mapping, the end-to-end scrape during up is in cmd/procfleet.
func TestMetricsFromStatus(t *testing.T) {
	sd, err := actuate.OpenStateDir(filepath.Join(t.TempDir(), ".procfleet"))
	if err != nil {
		t.Fatal(err)
	}
	m := NewMetrics()
	r, err := New(Config{StateDir: sd, Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	r.mu.Lock()
	web := r.serverLocked("web")
	web.st.phase, web.st.isReady, web.st.restarts = PhaseRunning, true, 2
	web.st.lastExit = &LastExit{Code: 3, Reason: "exited with code 3", At: time.Unix(0, 0)}
	db := r.serverLocked("db")
	db.st.phase = PhaseCrashLoopBackOff
	db.st.lastExit = &LastExit{Code: -1, Signal: "SIGKILL", Reason: "killed by signal 9 (SIGKILL)"}
	r.serverLocked("new") // Pending, never exited
	r.mu.Unlock()

	m.observeReconcile(time.Now().Add(-time.Millisecond))
	m.observeProbe("web", false, observe.ProbeResult{OK: true, Duration: time.Millisecond})
	m.observeProbe("web", true, observe.ProbeResult{OK: false, Duration: 2 * time.Millisecond})
	m.observeProbe("web", true, observe.ProbeResult{OK: false, Duration: 100 * time.Microsecond}) // on a bound: counted in it
	m.observeProbe("web", true, observe.ProbeResult{OK: false, Duration: 5 * time.Second})        // above the last bound: +Inf only
	m.setQueue(newQueue(r.clock))

	body, mfs := scrape(t, m)
	tests := []struct {
		name   string
		labels map[string]string
		want   float64
		absent bool
	}{
		{"procfleet_server_up", map[string]string{"server": "web"}, 1, false},
		{"procfleet_server_up", map[string]string{"server": "db"}, 0, false},
		{"procfleet_server_up", map[string]string{"server": "new"}, 0, false},
		{"procfleet_server_ready", map[string]string{"server": "web"}, 1, false},
		{"procfleet_server_ready", map[string]string{"server": "db"}, 0, false},
		{"procfleet_server_restarts_total", map[string]string{"server": "web"}, 2, false},
		{"procfleet_server_last_exit_code", map[string]string{"server": "web"}, 3, false},
		{"procfleet_server_last_exit_code", map[string]string{"server": "db"}, -1, false},
		{"procfleet_server_last_exit_code", map[string]string{"server": "new"}, 0, true},
		{"procfleet_server_phase", map[string]string{"server": "db", "phase": "CrashLoopBackOff"}, 1, false},
		{"procfleet_server_phase", map[string]string{"server": "db", "phase": "Running"}, 0, false},
		{"procfleet_server_phase", map[string]string{"server": "new", "phase": "Pending"}, 1, false},
		{"procfleet_fleet_file_errors", nil, 0, false},
		{"procfleet_workqueue_depth", nil, 0, false},
		{"procfleet_reconcile_duration_seconds", nil, 1, false},
		{"procfleet_probe_duration_seconds", map[string]string{"server": "web", "probe": "readiness", "result": "success"}, 1, false},
		{"procfleet_probe_duration_seconds", map[string]string{"server": "web", "probe": "liveness", "result": "failure"}, 3, false},
	}
	for _, tt := range tests {
		got, ok := value(mfs, tt.name, tt.labels)
		switch {
		case tt.absent && ok:
			t.Errorf("%s%v = %v, want no series", tt.name, tt.labels, got)
		case !tt.absent && !ok:
			t.Errorf("%s%v missing", tt.name, tt.labels)
		case !tt.absent && got != tt.want:
			t.Errorf("%s%v = %v, want %v", tt.name, tt.labels, got, tt.want)
		}
	}
	if !strings.Contains(body, `procfleet_server_ready{server="web"} 1`+"\n") {
		t.Errorf("/metrics lacks web's ready series:\n%.2000s", body)
	}
	for name, typ := range runtimeFamilies {
		mf := mfs[name]
		if mf == nil {
			t.Errorf("%s missing", name)
			continue
		}
		if mf.GetType() != typ || len(mf.GetMetric()) != 1 {
			t.Errorf("%s: type %v with %d series, want %v with 1", name, mf.GetType(), len(mf.GetMetric()), typ)
		}
	}
	if v, _ := value(mfs, "go_goroutines", nil); v < 1 {
		t.Errorf("go_goroutines = %v, want at least 1", v)
	}
	if v, _ := value(mfs, "go_info", map[string]string{"version": runtime.Version()}); v != 1 {
		t.Errorf("go_info{version=%q} = %v, want 1", runtime.Version(), v)
	}
	checkHistogram(t, mfs, "procfleet_probe_duration_seconds", map[string]string{"probe": "liveness", "result": "failure", "server": "web"}, []float64{0.002, 0.0001, 5})
	checkHistogram(t, mfs, "procfleet_probe_duration_seconds", map[string]string{"probe": "readiness", "result": "success", "server": "web"}, []float64{0.001})
}

// checkHistogram: the series of family name with labels has the 16 buckets
// 100 µs doubling to 3.2768 s and +Inf, cumulative counts of obs, and their sum and
// count.
func checkHistogram(t *testing.T, mfs map[string]*dto.MetricFamily, name string, labels map[string]string, obs []float64) {
	t.Helper()
	mf := mfs[name]
	if mf == nil || mf.GetType() != dto.MetricType_HISTOGRAM {
		t.Errorf("%s: not a histogram family", name)
		return
	}
	var h *dto.Histogram
next:
	for _, m := range mf.GetMetric() {
		if len(m.GetLabel()) != len(labels) {
			continue
		}
		for _, lp := range m.GetLabel() {
			if labels[lp.GetName()] != lp.GetValue() {
				continue next
			}
		}
		h = m.GetHistogram()
	}
	if h == nil {
		t.Errorf("%s%v: no series", name, labels)
		return
	}
	// The parser keeps the +Inf bucket the text must end with.
	if len(h.GetBucket()) != 17 || !math.IsInf(h.GetBucket()[16].GetUpperBound(), 1) || h.GetBucket()[16].GetCumulativeCount() != uint64(len(obs)) {
		t.Fatalf("%s%v: buckets %v, want 16 and +Inf counting all %d", name, labels, h.GetBucket(), len(obs))
	}
	bound, sum := 0.0001, 0.0
	for _, v := range obs {
		sum += v
	}
	for i, b := range h.GetBucket()[:16] {
		if math.Abs(b.GetUpperBound()-bound) > 1e-12 {
			t.Errorf("%s%v: bucket %d le=%v, want %v", name, labels, i, b.GetUpperBound(), bound)
		}
		var want uint64
		for _, v := range obs {
			if v <= b.GetUpperBound() {
				want++
			}
		}
		if b.GetCumulativeCount() != want {
			t.Errorf("%s%v: bucket le=%v counts %d, want %d", name, labels, b.GetUpperBound(), b.GetCumulativeCount(), want)
		}
		bound *= 2
	}
	if h.GetSampleCount() != uint64(len(obs)) || math.Abs(h.GetSampleSum()-sum) > 1e-4 {
		t.Errorf("%s%v: count %d sum %v, want %d and about %v", name, labels, h.GetSampleCount(), h.GetSampleSum(), len(obs), sum)
	}
}

// runtimeFamilies are the go_* and process_* families every platform has,
// with their type; metrics_linux_test.go adds Linux's.
var runtimeFamilies = map[string]dto.MetricType{
	"go_gc_gomemlimit_bytes":       dto.MetricType_GAUGE,
	"go_goroutines":                dto.MetricType_GAUGE,
	"go_info":                      dto.MetricType_GAUGE,
	"go_memstats_heap_alloc_bytes": dto.MetricType_GAUGE,
	"go_threads":                   dto.MetricType_GAUGE,
	"process_cpu_seconds_total":    dto.MetricType_COUNTER,
	"process_max_fds":              dto.MetricType_GAUGE,
}

// TestMetricsNil: a nil *Metrics records nothing and does not panic.
func TestMetricsNil(t *testing.T) {
	var m *Metrics
	m.attach(nil)
	m.setQueue(nil)
	m.observeReconcile(time.Now())
	m.observeProbe("x", false, observe.ProbeResult{})
}

// TestMetricsOwnSeries: two reconcilers' metrics never collide.
func TestMetricsOwnSeries(t *testing.T) {
	a, b := NewMetrics(), NewMetrics()
	a.observeReconcile(time.Now())
	a.observeProbe("web", false, observe.ProbeResult{OK: true})
	_, mfs := scrape(t, b)
	if v, _ := value(mfs, "procfleet_reconcile_duration_seconds", nil); v != 0 {
		t.Errorf("b saw a's reconcile pass: count %v", v)
	}
	if _, ok := mfs["procfleet_probe_duration_seconds"]; ok {
		t.Errorf("b saw a's probe")
	}
	if v, _ := value(scrapeFamilies(t, a), "procfleet_reconcile_duration_seconds", nil); v != 1 {
		t.Errorf("a's reconcile count %v, want 1", v)
	}
}

func scrapeFamilies(t *testing.T, m *Metrics) map[string]*dto.MetricFamily {
	t.Helper()
	_, mfs := scrape(t, m)
	return mfs
}

// TestExpoEscapes: label values and HELP text with a backslash, a quote
// and a line break are escaped so that a strict parser reads them back as
// written; values keep full precision and the infinities. Server names
// (DNS labels) never need it; the writer must not rely on that.
func TestExpoEscapes(t *testing.T) {
	const odd = "a\\b\"c\nd"
	var w expo
	w.family("x_odd", "help with \\ and\na line break", "gauge")
	w.sample("x_odd", 0.1+0.2, "server", odd, "zone", "")
	w.sample("x_odd", math.Inf(1), "server", "inf")
	w.sample("x_odd", math.Inf(-1), "server", "-inf")
	w.sample("x_odd", -1, "server", "neg")
	p := expfmt.NewTextParser(model.LegacyValidation)
	mfs, err := p.TextToMetricFamilies(bytes.NewReader(w.b))
	if err != nil {
		t.Fatalf("parse: %v\n%s", err, w.b)
	}
	if got := mfs["x_odd"].GetHelp(); got != "help with \\ and\na line break" {
		t.Errorf("HELP read back as %q", got)
	}
	for _, tt := range []struct {
		server string
		want   float64
	}{{odd, 0.1 + 0.2}, {"inf", math.Inf(1)}, {"-inf", math.Inf(-1)}, {"neg", -1}} {
		if got, ok := value(mfs, "x_odd", map[string]string{"server": tt.server}); !ok || got != tt.want {
			t.Errorf("x_odd{server=%q} = %v (found %v), want %v\n%s", tt.server, got, ok, tt.want, w.b)
		}
	}
}

// TestMetricsHandlerMethods: HEAD has the headers and no body; other
// methods are refused.
func TestMetricsHandlerMethods(t *testing.T) {
	m := NewMetrics()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("HEAD", "/metrics", nil))
	if rec.Code != 200 || rec.Body.Len() != 0 || rec.Header().Get("Content-Length") == "0" {
		t.Errorf("HEAD: %d, body %d bytes, Content-Length %q", rec.Code, rec.Body.Len(), rec.Header().Get("Content-Length"))
	}
	rec = httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("POST", "/metrics", nil))
	if rec.Code != 405 {
		t.Errorf("POST: %d, want 405", rec.Code)
	}
}
