package reconciler

import (
	"io"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/procfleet/procfleet/actuate"
	"github.com/procfleet/procfleet/observe"
)

// gather returns the metric families of m by name.
func gather(t *testing.T, m *Metrics) map[string]*dto.MetricFamily {
	t.Helper()
	mfs, err := m.Registry().Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	out := map[string]*dto.MetricFamily{}
	for _, mf := range mfs {
		out[mf.GetName()] = mf
	}
	return out
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
	m.setQueue(newQueue(r.clock))

	mfs := gather(t, m)
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
		{"procfleet_probe_duration_seconds", map[string]string{"server": "web", "probe": "liveness", "result": "failure"}, 1, false},
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
	if _, ok := mfs["go_goroutines"]; !ok {
		t.Errorf("go runtime collector missing")
	}

	// The handler serves the text format.
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Result().Body)
	if !strings.Contains(string(body), `procfleet_server_ready{server="web"} 1`) {
		t.Errorf("/metrics lacks web's ready series:\n%.2000s", body)
	}
}

// TestMetricsNil: a nil *Metrics records nothing and does not panic.
func TestMetricsNil(t *testing.T) {
	var m *Metrics
	m.attach(nil)
	m.setQueue(nil)
	m.observeReconcile(time.Now())
	m.observeProbe("x", false, observe.ProbeResult{})
}

// TestMetricsOwnRegistry: two reconcilers' metrics never collide (each has
// its own registry, none uses the global default one).
func TestMetricsOwnRegistry(t *testing.T) {
	a, b := NewMetrics(), NewMetrics()
	if a.Registry() == b.Registry() {
		t.Fatal("two Metrics share a registry")
	}
	a.observeReconcile(time.Now())
	if v, _ := value(gather(t, b), "procfleet_reconcile_duration_seconds", nil); v != 0 {
		t.Errorf("b saw a's reconcile pass: count %v", v)
	}
}
