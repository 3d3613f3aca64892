package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite golden files")

var (
	workloadOnce sync.Once
	workloadBin  string
	workloadErr  error
)

// buildWorkload builds ./workload once per test binary.
func buildWorkload(t *testing.T) string {
	t.Helper()
	workloadOnce.Do(func() {
		dir, err := os.MkdirTemp("", "bench-workload-")
		if err != nil {
			workloadErr = err
			return
		}
		workloadBin = filepath.Join(dir, "workload")
		out, err := exec.Command("go", "build", "-o", workloadBin, "./workload").CombinedOutput()
		if err != nil {
			workloadErr = fmt.Errorf("build workload: %w\n%s", err, out)
		}
	})
	if workloadErr != nil {
		t.Fatal(workloadErr)
	}
	return workloadBin
}

func TestMain(m *testing.M) {
	code := m.Run()
	if workloadBin != "" {
		_ = os.RemoveAll(filepath.Dir(workloadBin))
	}
	os.Exit(code)
}

func TestPercentile(t *testing.T) {
	tests := []struct {
		name    string
		samples []float64
		p       float64
		want    float64
	}{
		{"single", []float64{7}, 50, 7},
		{"odd median", []float64{3, 1, 2}, 50, 2},
		{"even median interpolates", []float64{4, 1, 3, 2}, 50, 2.5},
		{"p90 of 1..10", []float64{10, 9, 8, 7, 6, 5, 4, 3, 2, 1}, 90, 9.1},
		{"p0 is min", []float64{5, 2, 9}, 0, 2},
		{"p100 is max", []float64{5, 2, 9}, 100, 9},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := append([]float64(nil), tt.samples...)
			got := Percentile(tt.samples, tt.p)
			if math.Abs(got-tt.want) > 1e-9 {
				t.Errorf("Percentile(%v, %v) = %v, want %v", tt.samples, tt.p, got, tt.want)
			}
			for i := range in {
				if in[i] != tt.samples[i] {
					t.Fatalf("Percentile modified its input: %v, was %v", tt.samples, in)
				}
			}
		})
	}
	if got := Percentile(nil, 50); !math.IsNaN(got) {
		t.Errorf("Percentile(nil) = %v, want NaN", got)
	}
}

func TestSummarize(t *testing.T) {
	got := Summarize([]float64{20, 10, 40, 30, 50})
	want := Summary{N: 5, Min: 10, Median: 30, P90: 46, Max: 50}
	if got != want {
		t.Errorf("Summarize = %+v, want %+v", got, want)
	}
	if s := Summarize(nil); s.N != 0 || !math.IsNaN(s.Median) {
		t.Errorf("Summarize(nil) = %+v, want N 0 and NaN figures", s)
	}
}

func TestParseStamps(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    []Stamp
		wantErr string
	}{
		{"empty", "", nil, ""},
		{"two lines", "1700000000000000001 42\n1700000000000000002 43\n",
			[]Stamp{{time.Unix(0, 1700000000000000001), 42}, {time.Unix(0, 1700000000000000002), 43}}, ""},
		{"partial last line ignored", "1700000000000000001 42\n17000000", []Stamp{{time.Unix(0, 1700000000000000001), 42}}, ""},
		{"extra spaces", "  1700000000000000001   42 \n", []Stamp{{time.Unix(0, 1700000000000000001), 42}}, ""},
		{"bad pid", "1700000000000000001 x\n", nil, "stamp line 1: bad pid"},
		{"negative time", "-5 42\n", nil, "stamp line 1: bad time"},
		{"three fields", "1 2 3\n", nil, "stamp line 1: want"},
		{"error names the line", "1700000000000000001 42\n\n", nil, "stamp line 2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseStamps([]byte(tt.in))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParseStamps(%q) error = %v, want one containing %q", tt.in, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseStamps(%q): %v", tt.in, err)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("ParseStamps(%q) = %v, want %v", tt.in, got, tt.want)
			}
			for i := range got {
				if !got[i].Time.Equal(tt.want[i].Time) || got[i].PID != tt.want[i].PID {
					t.Errorf("stamp %d = %v, want %v", i, got[i], tt.want[i])
				}
			}
		})
	}
}

func TestParseStat(t *testing.T) {
	// A hostile command name: spaces and a ")" inside.
	line := "1234 (a) b (c) S 1 1234 1234 0 -1 4194560 100 0 0 0 57 31 0 0 20 0 5 0 123456 1000 100\n"
	st, err := parseStat([]byte(line))
	if err != nil {
		t.Fatal(err)
	}
	if st.State != 'S' || st.PPID != 1 || st.UTime != 57 || st.STime != 31 {
		t.Errorf("parseStat = %+v, want state S, ppid 1, utime 57, stime 31", st)
	}
	for _, bad := range []string{"", "1234 (x", "1234 (x) S 1 2"} {
		if _, err := parseStat([]byte(bad)); err == nil {
			t.Errorf("parseStat(%q) succeeded, want an error", bad)
		}
	}
}

func TestParseProcFiles(t *testing.T) {
	status := "Name:\tx\nVmPeak:\t  10000 kB\nVmHWM:\t    2048 kB\nVmRSS:\t 1024 kB\n"
	if kb, err := parseStatusKB([]byte(status), "VmHWM"); err != nil || kb != 2048 {
		t.Errorf("parseStatusKB(VmHWM) = %d, %v; want 2048", kb, err)
	}
	if _, err := parseStatusKB([]byte(status), "VmSwap"); err == nil {
		t.Error("parseStatusKB(VmSwap) succeeded on a status without it")
	}
	if ns, err := parseSchedstat([]byte("123456789 1000 42\n")); err != nil || ns != 123456789 {
		t.Errorf("parseSchedstat = %d, %v; want 123456789", ns, err)
	}

	tcp := `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:4E20 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1 1 0 100 0 0 10 0
   1: 0100007F:4E21 0100007F:D431 01 00000000:00000000 00:00000000 00000000     0        0 2 1 0 20 4 30 10 -1
   2: 00000000:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 3 1 0 100 0 0 10 0
`
	ports := map[int]bool{}
	if err := parseListenPorts([]byte(tcp), ports); err != nil {
		t.Fatal(err)
	}
	if !ports[20000] || !ports[8080] || ports[20001] || len(ports) != 2 {
		t.Errorf("parseListenPorts = %v, want {20000, 8080} (20001 is ESTABLISHED)", ports)
	}
}

func TestParseBenchNsPerOp(t *testing.T) {
	out := "goos: linux\nBenchmarkReconcilePass100-2 \t 500\t 1234 ns/op\n" +
		"BenchmarkReconcilePass1000-2   \t     100\t  12345678 ns/op\t  2048 B/op\t 10 allocs/op\nPASS\n"
	ns, err := parseBenchNsPerOp([]byte(out), "BenchmarkReconcilePass1000")
	if err != nil || ns != 12345678 {
		t.Errorf("parseBenchNsPerOp = %v, %v; want 12345678", ns, err)
	}
	if _, err := parseBenchNsPerOp([]byte("PASS\n"), "BenchmarkReconcilePass1000"); err == nil {
		t.Error("parseBenchNsPerOp found a figure in output without one")
	}
}

func TestHealthFrom(t *testing.T) {
	body := "pid 42 gen 2\n"
	tests := []struct {
		pid  int
		gen  string
		want bool
	}{
		{0, "", true}, {42, "", true}, {43, "", false}, {0, "2", true}, {0, "1", false}, {42, "2", true},
	}
	for _, tt := range tests {
		if got := healthFrom(tt.pid, tt.gen)(body); got != tt.want {
			t.Errorf("healthFrom(%d, %q)(%q) = %v, want %v", tt.pid, tt.gen, body, got, tt.want)
		}
	}
	if healthFrom(0, "")("ok") {
		t.Error("healthFrom accepted a body that is not the workload's")
	}
}

func TestJudge(t *testing.T) {
	tests := []struct {
		name      string
		unit      string
		target    Target
		values    map[string]float64
		limits    map[string]float64
		want      string
		wantRatio map[string]string // peer → rendered ratio
	}{
		{"max met", "s", Target{Kind: TargetMax, Value: 0.5}, map[string]float64{peerProcfleet: 0.3}, nil, "met", nil},
		{"max missed", "s", Target{Kind: TargetMax, Value: 0.5}, map[string]float64{peerProcfleet: 0.75}, nil, "missed by 0.25 s (+50%)", nil},
		{"floor factor met", "s", Target{Kind: TargetFloorFactor, Value: 1.2}, map[string]float64{peerProcfleet: 1.1, peerFloor: 1}, nil, "met",
			map[string]string{peerFloor: "1.10x"}},
		{"floor factor missed", "s", Target{Kind: TargetFloorFactor, Value: 1.2}, map[string]float64{peerProcfleet: 1.5, peerFloor: 1}, nil, "missed by 0.30 s (+25%)",
			map[string]string{peerFloor: "1.50x"}},
		{"floor plus", "s", Target{Kind: TargetFloorPlus, Value: 0.1}, map[string]float64{peerProcfleet: 0.2, peerFloor: 0.15}, nil, "met", nil},
		{"no floor", "s", Target{Kind: TargetFloorFactor, Value: 1.2}, map[string]float64{peerProcfleet: 1}, nil, "no floor measured", nil},
		{"zero target missed", "count", Target{Kind: TargetMax, Value: 0}, map[string]float64{peerProcfleet: 3}, nil, "missed by 3", nil},
		{"peer over its limit: ratio is an upper bound", "s", Target{Kind: TargetFloorFactor, Value: 1.5},
			map[string]float64{peerProcfleet: 4, peerFloor: 2}, map[string]float64{peerPM2: 130}, "missed by 1.00 s (+33%)",
			map[string]string{peerFloor: "2.00x", peerPM2: "<0.03x"}},
		{"procfleet over its limit: ratio is a lower bound", "s", Target{Kind: TargetFloorFactor, Value: 1},
			map[string]float64{peerSupervisord: 50, peerFloor: 20}, map[string]float64{peerProcfleet: 210}, "missed: did not finish within 210 s",
			map[string]string{peerFloor: ">10.50x", peerSupervisord: ">4.20x"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			row := &Row{Unit: tt.unit, Values: tt.values, Limits: tt.limits, Target: &tt.target}
			judge(row)
			if row.Verdict != tt.want {
				t.Errorf("verdict = %q, want %q", row.Verdict, tt.want)
			}
			got := map[string]string{}
			for peer, v := range row.Ratios {
				got[peer] = fmt.Sprintf("%s%.2fx", row.RatioBounds[peer], v)
			}
			if len(tt.wantRatio) > 0 && fmt.Sprint(got) != fmt.Sprint(tt.wantRatio) {
				t.Errorf("ratios = %v, want %v", got, tt.wantRatio)
			}
		})
	}
	row := &Row{Unit: "s", Values: map[string]float64{peerFloor: 1}, Unsupported: map[string]string{peerProcfleet: "spec.replicas"}, Target: &Target{Kind: TargetMax, Value: 1}}
	judge(row)
	if row.Verdict != "not supported by this binary" || len(row.Ratios) != 0 {
		t.Errorf("unsupported: verdict %q, ratios %v; want the verdict to say so and no ratios", row.Verdict, row.Ratios)
	}
}

// TestOutcomeOrder: the first outcome recorded for a peer stands (a figure
// measured before a later failure is kept).
func TestOutcomeOrder(t *testing.T) {
	spec := RowSpec{Key: "k", Title: "t", Unit: "s"}
	res := NewResults()
	res.Set(spec, peerPM2, 2)
	res.Fail(spec, peerPM2, errString("late failure"))
	res.Limit(spec, peerSupervisord, 90)
	res.Fail(spec, peerSupervisord, errString("not run"))
	res.Unsupported(spec, peerProcfleet, "x")
	res.Limit(spec, peerProcfleet, 1)
	rows, _ := res.Finish()
	row := rows[0]
	if row.Values[peerPM2] != 2 || row.Errors[peerPM2] != "" {
		t.Errorf("pm2: value %v, error %q; want the value kept", row.Values[peerPM2], row.Errors[peerPM2])
	}
	if row.Limits[peerSupervisord] != 90 || row.Errors[peerSupervisord] != "" {
		t.Errorf("supervisord: limit %v, error %q; want the limit kept", row.Limits[peerSupervisord], row.Errors[peerSupervisord])
	}
	if row.Unsupported[peerProcfleet] != "x" || row.Limits[peerProcfleet] != 0 {
		t.Errorf("procfleet: unsupported %q, limit %v; want unsupported kept", row.Unsupported[peerProcfleet], row.Limits[peerProcfleet])
	}

	// Over rounds: the median, the range; a limit in any round wins.
	res = NewResults()
	for _, v := range []float64{3, 1, 2} {
		res.Set(spec, peerPM2, v)
	}
	res.Set(spec, peerSupervisord, 5)
	res.Limit(spec, peerSupervisord, 90)
	rows, _ = res.Finish()
	row = rows[0]
	if row.Values[peerPM2] != 2 || row.Spread[peerPM2] != [2]float64{1, 3} {
		t.Errorf("pm2 over 3 rounds: %v, spread %v; want 2, [1 3]", row.Values[peerPM2], row.Spread[peerPM2])
	}
	if _, ok := row.Values[peerSupervisord]; ok || row.Limits[peerSupervisord] != 90 {
		t.Errorf("supervisord, a round over its limit: value %v, limit %v; want the limit alone", row.Values, row.Limits)
	}
}

// TestRecord: a passed limit, from the error or from the context's cause,
// becomes a limit in the row's unit; an unsupported feature is marked so;
// anything else is a failure.
func TestRecord(t *testing.T) {
	s := RowSpec{Key: "s", Title: "s", Unit: "s"}
	m := RowSpec{Key: "m", Title: "m", Unit: "ms"}
	r := &runner{res: NewResults()}
	c := RowSpec{Key: "c", Title: "c", Unit: "count"}
	r.record([]RowSpec{s, m, c}, peerPM2, nil, fmt.Errorf("pm2: %w", &limitError{what: "x", limit: 90 * time.Second}))

	lctx, cancel := withLimit(context.Background(), time.Nanosecond, "y")
	defer cancel()
	<-lctx.Done()
	r.record([]RowSpec{s}, peerSupervisord, lctx, errString("supervisorctl: signal: killed"))
	r.record([]RowSpec{s}, peerProcfleet, nil, fmt.Errorf("start: %w", &unsupportedError{what: "`up --ui`"}))
	r.record([]RowSpec{m}, peerProcfleet, nil, errString("boom"))

	rows, _ := r.res.Finish()
	if rows[0].Limits[peerPM2] != 90 || rows[1].Limits[peerPM2] != 90000 {
		t.Errorf("pm2 limits = %v, %v; want 90 s and 90000 ms", rows[0].Limits, rows[1].Limits)
	}
	if _, ok := rows[2].Limits[peerPM2]; ok || !strings.Contains(rows[2].Errors[peerPM2], "limit of 1m30s") {
		t.Errorf("pm2 count row: limits %v, errors %v; want a failure naming the limit, no limit", rows[2].Limits, rows[2].Errors)
	}
	if rows[0].Limits[peerSupervisord] != 1e-9 {
		t.Errorf("supervisord limit = %v; want the context's (1 ns)", rows[0].Limits[peerSupervisord])
	}
	if rows[0].Unsupported[peerProcfleet] != "`up --ui`" {
		t.Errorf("procfleet unsupported = %q", rows[0].Unsupported[peerProcfleet])
	}
	if rows[1].Errors[peerProcfleet] != "boom" {
		t.Errorf("procfleet error = %q", rows[1].Errors[peerProcfleet])
	}
}

// sampleResults is a small, fixed result set for the golden table: two
// sizes, a failure, a peer over its limit, a binary without a feature.
func sampleResults() *Results {
	rs := newRows(settings{sizes: []int{100, 1000}, idle: 30 * time.Second, window: 10 * time.Second,
		scale: [2]int{10, 100}, logsRate: 100000, neighbourN: neighbourServers})
	res := NewResults()
	for _, sc := range allScenarios {
		for _, spec := range rs.forScenario(sc) {
			res.Declare(spec)
		}
	}
	first, second := rs.crash[0], rs.crash[1]
	res.Set(first.stamp[0], peerProcfleet, 18.2)
	res.Set(first.stamp[0], peerSupervisord, 1003)
	res.Set(first.stamp[0], peerPM2, 34.5)
	res.Set(first.stamp[0], peerFloor, 16.1)
	res.Set(second.stamp[0], peerProcfleet, 1012)
	res.Set(second.stamp[0], peerFloor, 16.1)
	s100, s1000 := rs.size[100], rs.size[1000]
	res.Set(s100.cold, peerProcfleet, 1.9)
	res.Set(s100.cold, peerSupervisord, 6.7)
	res.Set(s100.cold, peerFloor, 1.4)
	res.Fail(s100.cold, peerPM2, errString("pm2: start: exit status 1\n\x1b[31mboom\x1b[39m"))
	res.Fail(s100.stop, peerPM2, errString("pm2: start: exit status 1\n\x1b[31mboom\x1b[39m"))
	res.Set(s1000.cold, peerProcfleet, 14.5)
	res.Set(s1000.cold, peerFloor, 16.0)
	res.Limit(s1000.cold, peerSupervisord, 210)
	res.Set(s1000.stop, peerProcfleet, 4.2)
	res.Set(s1000.stop, peerFloor, 1.5)
	res.Set(s100.editOthers, peerProcfleet, 0)
	res.Set(s100.editOthers, peerPM2, 99)
	res.Set(s100.idleRSS, peerProcfleet, 24.25)
	res.Set(s1000.idleRSS, peerProcfleet, 65)
	res.Unsupported(s100.uiPage, peerProcfleet, "`up --ui`")
	res.Unsupported(s1000.uiPage, peerProcfleet, "`up --ui`")
	res.Set(rs.scaleUp, peerSupervisord, 7.5)
	res.Set(rs.scaleUp, peerFloor, 1.1)
	res.Unsupported(rs.scaleUp, peerProcfleet, "spec.replicas (status lists \"w\" as one server, not its 10 instances)")
	res.Set(rs.logsCPU, peerProcfleet, 31)
	res.Set(rs.logsCPU, peerFloor, 20)
	res.Set(rs.neighbour, peerProcfleet, 38.2)
	res.Note("6. plan at scale skipped: BenchmarkReconcilePass1000 does not exist in ./reconciler yet")
	return res
}

type errString string

func (e errString) Error() string { return string(e) }

// checkGolden compares got with testdata/name, which -update rewrites.
func checkGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	golden := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test ./bench -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("table differs from %s (go test ./bench -update):\n%s", golden, got)
	}
}

func TestRenderTableGolden(t *testing.T) {
	rows, notes := sampleResults().Finish()
	var buf bytes.Buffer
	if err := RenderTable(&buf, rows, notes); err != nil {
		t.Fatal(err)
	}
	checkGolden(t, "table.golden", buf.Bytes())
}

// TestRenderTableABGolden: an A/B over rounds, with a baseline column, a
// difference beyond the spread and one within it.
func TestRenderTableABGolden(t *testing.T) {
	rs := newRows(settings{sizes: []int{1000}, idle: 30 * time.Second, window: 10 * time.Second,
		scale: [2]int{10, 100}, logsRate: 100000, neighbourN: neighbourServers})
	res := NewResults()
	s := rs.size[1000]
	for _, spec := range []RowSpec{s.stop, s.cold} {
		res.Declare(spec)
	}
	for i, v := range []float64{2.9, 3.1, 3.0} {
		res.Set(s.stop, peerProcfleet, v)
		res.Set(s.stop, peerBaseline, []float64{4.1, 4.3, 4.2}[i])
		res.Set(s.stop, peerFloor, []float64{1.5, 1.6, 1.4}[i])
		res.Set(s.cold, peerProcfleet, []float64{14.1, 15.0, 14.6}[i])
		res.Set(s.cold, peerBaseline, []float64{14.8, 14.3, 15.2}[i])
	}
	rows, notes := res.Finish()
	columnTitle[peerBaseline] = "procfleet@abc1234"
	t.Cleanup(func() { columnTitle[peerBaseline] = "baseline" })
	var buf bytes.Buffer
	if err := RenderTable(&buf, rows, notes); err != nil {
		t.Fatal(err)
	}
	checkGolden(t, "table-ab.golden", buf.Bytes())
	if !rows[0].Apart[peerBaseline] || rows[1].Apart[peerBaseline] {
		t.Errorf("apart: stop %v, cold %v; want the stop's ranges apart, the cold start's overlapping", rows[0].Apart, rows[1].Apart)
	}
}

func TestConfigsRender(t *testing.T) {
	f := newFleet("/opt/w", "/tmp/st", []int{20000, 20001})
	yaml := string(procfleetYAML(f))
	for _, want := range []string{"name: s000", "name: s001", "port: 20001", `command: ["/opt/w"]`, `"-stamp", "/tmp/st/s001.stamp"`, "---\n"} {
		if !strings.Contains(yaml, want) {
			t.Errorf("fleet file lacks %q:\n%s", want, yaml)
		}
	}
	conf := string(supervisordConf("/tmp/d", f))
	for _, want := range []string{"[program:s001]", "command=/opt/w -port 20001 -stamp /tmp/st/s001.stamp -gen 1", "startsecs=0", "autorestart=true", "stopasgroup=true", "killasgroup=true", "file=/tmp/d/supervisor.sock"} {
		if !strings.Contains(conf, want) {
			t.Errorf("supervisord.conf lacks %q", want)
		}
	}
	eco, err := pm2Ecosystem("/tmp/d", f)
	if err != nil {
		t.Fatal(err)
	}
	js, ok := bytes.CutPrefix(eco, []byte("module.exports = "))
	if !ok {
		t.Fatalf("ecosystem file does not start with module.exports: %s", eco)
	}
	var parsed struct{ Apps []map[string]any }
	if err := json.Unmarshal(bytes.TrimSuffix(bytes.TrimSpace(js), []byte(";")), &parsed); err != nil {
		t.Fatalf("ecosystem is not JSON: %v", err)
	}
	if len(parsed.Apps) != 2 || parsed.Apps[1]["restart_delay"] != float64(0) || parsed.Apps[1]["autorestart"] != true || parsed.Apps[1]["interpreter"] != "none" {
		t.Errorf("ecosystem apps = %v, want 2 with restart_delay 0, autorestart, interpreter none", parsed.Apps)
	}
}

func TestParseFlags(t *testing.T) {
	o, err := parseFlags([]string{"-peers", "pm2, procfleet,pm2", "-scenarios", "crash"}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(o.peers, ",") != "pm2,procfleet" || strings.Join(o.scenarios, ",") != "crash" || o.src != "head" {
		t.Errorf("parseFlags = %+v", o)
	}
	if fmt.Sprint(o.sizes) != "[100 1000]" || o.scale != [2]int{10, 100} || o.window != 10*time.Second {
		t.Errorf("defaults: sizes %v, scale %v, window %v; want [100 1000], [10 100], 10s", o.sizes, o.scale, o.window)
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"-fleet", "1000"}, "[1000]"},
		{[]string{"-fleet", "1000, 100,100"}, "[100 1000]"},
		{[]string{"-n", "5"}, "[5]"},
	} {
		o, err := parseFlags(tt.args, &bytes.Buffer{})
		if err != nil || fmt.Sprint(o.sizes) != tt.want {
			t.Errorf("parseFlags(%q): sizes %v, %v; want %s", tt.args, o.sizes, err, tt.want)
		}
	}
	if o, err := parseFlags([]string{"-scale", "100,5"}, &bytes.Buffer{}); err != nil || o.scale != [2]int{5, 100} {
		t.Errorf("parseFlags(-scale 100,5): %v, %v; want [5 100]", o.scale, err)
	}
	for _, bad := range [][]string{{"-peers", "systemd"}, {"-scenarios", "warp"}, {"-n", "1"}, {"-fleet", "100,x"},
		{"-fleet", "5000"}, {"-src", "tip"}, {"-scale", "10"}, {"-scale", "10,10"}, {"-window", "0s"}, {"-logs-rate", "0"}, {"extra"}} {
		if _, err := parseFlags(bad, &bytes.Buffer{}); err == nil {
			t.Errorf("parseFlags(%q) succeeded, want an error", bad)
		}
	}
}

func TestIdleTargets(t *testing.T) {
	for _, tt := range []struct {
		n        int
		cpu, rss float64
		ok       bool
	}{{5, 10, 30, true}, {100, 10, 30, true}, {101, 20, 40, true}, {1000, 20, 40, true}, {1001, 0, 0, false}} {
		cpu, rss, ok := idleTargets(tt.n)
		if cpu != tt.cpu || rss != tt.rss || ok != tt.ok {
			t.Errorf("idleTargets(%d) = %v, %v, %v; want %v, %v, %v", tt.n, cpu, rss, ok, tt.cpu, tt.rss, tt.ok)
		}
	}
}

func TestSweepEvery(t *testing.T) {
	for n, want := range map[int]time.Duration{1: 5 * time.Millisecond, 100: 5 * time.Millisecond, 400: 10 * time.Millisecond, 1000: 25 * time.Millisecond, 5000: 25 * time.Millisecond} {
		if got := sweepEvery(n); got != want {
			t.Errorf("sweepEvery(%d) = %v, want %v", n, got, want)
		}
	}
}

func TestNoisy(t *testing.T) {
	for _, tt := range []struct {
		load string
		want bool
	}{{"0.35 0.20 0.10", false}, {"1.00 0.5 0.1", false}, {"1.01 0.5 0.1", true}, {"18.29 17.76 14.73", true}, {"unknown", false}} {
		if got := noisy(tt.load, 2); got != tt.want {
			t.Errorf("noisy(%q, 2) = %v, want %v", tt.load, got, tt.want)
		}
	}
	if l := loadAverage(); len(strings.Fields(l)) != 3 && runtime.GOOS == "linux" {
		t.Errorf("loadAverage() = %q, want three figures", l)
	}
}

// TestWorkloadFloor runs the real workload through the bench's own waits:
// the stamp watcher sees its stamp, /health answers with its pid, and the
// cleanup finds and kills it by its stamp.
func TestWorkloadFloor(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the bench reads procfs")
	}
	dir := t.TempDir()
	bin := buildWorkload(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	stamps := filepath.Join(dir, "stamps")
	if err := os.Mkdir(stamps, 0o755); err != nil {
		t.Fatal(err)
	}
	f := newFleet(bin, stamps, []int{port})
	w, err := NewStampWatcher(stamps)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Close() })

	cmd := exec.Command(bin, f.Servers[0].Args()...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(waited) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-waited })

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, n, err := w.WaitNew(ctx, f.Servers[0].Stamp, 0, func(s Stamp) bool { return s.PID == cmd.Process.Pid }, noCheck)
	if err != nil {
		t.Fatalf("wait for stamp: %v", err)
	}
	if n != 1 || st.Time.After(time.Now()) {
		t.Errorf("stamp = %+v after %d lines, want one stamp in the past", st, n)
	}
	if _, err := waitHealth(ctx, newHealthClient(), port, healthFrom(cmd.Process.Pid, "1"), noCheck); err != nil {
		t.Fatalf("wait for /health: %v", err)
	}
	pids, err := f.currentPIDs()
	if err != nil || len(pids) != 1 || pids[0] != cmd.Process.Pid {
		t.Fatalf("currentPIDs = %v, %v; want [%d]", pids, err, cmd.Process.Pid)
	}
	killed, err := f.killWorkloads(ctx)
	if err != nil || killed != 1 {
		t.Fatalf("killWorkloads = %d, %v; want 1 killed", killed, err)
	}
	select {
	case <-waited:
	case <-ctx.Done():
		t.Fatal("workload still running after killWorkloads")
	}
	if !processGone(cmd.Process.Pid) {
		t.Error("processGone is false for a reaped process")
	}
	if _, err := waitStopped(ctx, nil, []int{port}); err != nil {
		t.Errorf("port still listening: %v", err)
	}
}

func TestParseStatusRestarts(t *testing.T) {
	out := `{"servers": [{"name": "s000", "phase": "Running", "restarts": 2}, {"name": "s001", "restarts": 1}], "errors": []}`
	if n, err := parseStatusRestarts([]byte(out)); err != nil || n != 3 {
		t.Errorf("parseStatusRestarts = %d, %v; want 3", n, err)
	}
	if _, err := parseStatusRestarts([]byte("NAME PHASE\n")); err == nil {
		t.Error("parseStatusRestarts accepted a table")
	}
}

// TestProcfleetSource: -src head builds from a copy of the commit HEAD names
// (exported with git archive), and its version says which; -src worktree
// uses the work tree itself.
func TestProcfleetSource(t *testing.T) {
	ctx := context.Background()
	root, err := moduleRoot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	r := &runner{root: root, tmp: t.TempDir()}
	v, err := r.procfleetSource(ctx, options{src: "head"})
	if err != nil {
		t.Fatal(err)
	}
	rev, _, _ := strings.Cut(v, " ")
	if !strings.HasSuffix(v, " (committed HEAD)") || rev == "" || r.src != filepath.Join(r.tmp, "src") {
		t.Fatalf("procfleetSource(head) = %q, src %q; want a revision and the export folder", v, r.src)
	}
	// The export is that commit's tree: it has the command to build.
	want, err := exec.CommandContext(ctx, "git", "-C", root, "show", rev+":cmd/procfleet/main.go").Output()
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(r.src, "cmd", "procfleet", "main.go"))
	if err != nil || !bytes.Equal(got, want) {
		t.Errorf("exported cmd/procfleet/main.go differs from %s's (%v)", rev, err)
	}
	if _, err := r.procfleetSource(ctx, options{src: "worktree"}); err != nil || r.src != root {
		t.Errorf("procfleetSource(worktree): src %q, %v; want the module root %q", r.src, err, root)
	}
}

func TestScaledConfigsRender(t *testing.T) {
	s := ScaledServer{Name: "w", Workload: "/opt/w", Base: 21000, StampDir: "/tmp/st", Replicas: 10}
	conf := string(supervisordScaledConf("/tmp/d", s))
	for _, want := range []string{"[program:w]", "command=/opt/w -port %(process_num)d -stamp-dir /tmp/st", "numprocs=10", "numprocs_start=21000",
		"process_name=%(program_name)s_%(process_num)d", "minfds=1024", "stdout_logfile=/tmp/d/logs/%(program_name)s_%(process_num)d.log"} {
		if !strings.Contains(conf, want) {
			t.Errorf("scaled supervisord.conf lacks %q:\n%s", want, conf)
		}
	}
	if big := string(supervisordConf("/tmp/d", newFleet("/opt/w", "/tmp/st", make([]int, 1000)))); !strings.Contains(big, "minfds=4064") {
		t.Errorf("supervisord.conf of 1,000 programs lacks minfds=4064 (three descriptors a process, and some)")
	}
	eco, err := pm2ScaledEcosystem("/tmp/d", s)
	if err != nil {
		t.Fatal(err)
	}
	js, _ := bytes.CutPrefix(eco, []byte("module.exports = "))
	var parsed struct{ Apps []map[string]any }
	if err := json.Unmarshal(bytes.TrimSuffix(bytes.TrimSpace(js), []byte(";")), &parsed); err != nil {
		t.Fatalf("ecosystem is not JSON: %v", err)
	}
	app := parsed.Apps[0]
	if len(parsed.Apps) != 1 || app["instances"] != float64(10) || app["increment_var"] != "PORT" || app["exec_mode"] != "fork" ||
		fmt.Sprint(app["env"]) != "map[PORT:21000]" || fmt.Sprint(app["args"]) != "[-port-env PORT -stamp-dir /tmp/st]" {
		t.Errorf("scaled ecosystem app = %v", app)
	}
	yaml := string(procfleetScaledYAML(s))
	for _, want := range []string{"name: w\n", "replicas: 10\n", "port: 21000\n", `args: ["-port", "$(PORT)", "-stamp-dir", "/tmp/st"]`} {
		if !strings.Contains(yaml, want) {
			t.Errorf("scaled fleet file lacks %q:\n%s", want, yaml)
		}
	}
}

func TestReplicasHonoured(t *testing.T) {
	parse := func(js string) map[string]string {
		t.Helper()
		m, err := replicaNames([]byte(js))
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	tests := []struct {
		name, status string
		want         bool
		why          string
	}{
		{"binary without replicas", `{"servers": [{"name": "w", "phase": "Stopped"}], "errors": []}`, false, `status lists "w" as one server`},
		{"instances listed", `{"servers": [{"name": "w-0", "replicaOf": "w", "index": 0}, {"name": "w-1", "replicaOf": "w", "index": 1}]}`, true, ""},
		{"an instance missing", `{"servers": [{"name": "w-0", "replicaOf": "w"}]}`, false, `does not list instance "w-1"`},
		{"names without replicaOf", `{"servers": [{"name": "w-0"}, {"name": "w-1"}]}`, false, `replicaOf ""`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ok, why := replicasHonoured(parse(tt.status), "w", 2)
			if ok != tt.want || !strings.Contains(why, tt.why) {
				t.Errorf("replicasHonoured = %v, %q; want %v, %q", ok, why, tt.want, tt.why)
			}
		})
	}
	if _, err := replicaNames([]byte("NAME PHASE")); err == nil {
		t.Error("replicaNames accepted a table")
	}
}

func TestParseStatusNotReady(t *testing.T) {
	if n, err := parseStatusNotReady([]byte(`{"servers": [{"name": "a", "ready": true}, {"name": "b", "ready": false}]}`)); err != nil || n != 1 {
		t.Errorf("parseStatusNotReady = %d, %v; want 1", n, err)
	}
	if _, err := parseStatusNotReady([]byte(`{"servers": []}`)); err == nil {
		t.Error("parseStatusNotReady accepted a status without servers")
	}
}

func TestSeqCounter(t *testing.T) {
	tests := []struct {
		name  string
		lines []string
		ready bool
		ended bool
		lost  int
	}{
		{"exact", []string{"ready", "seq 000000001 ....", "seq 000000002 ....", "end 2"}, true, true, 0},
		{"prefixed", []string{"spew | ready", "spew | seq 000000001 ..", "spew | end 1"}, true, true, 0},
		{"a gap", []string{"ready", "seq 000000001 ..", "seq 000000004 ..", "end 4"}, true, true, 2},
		{"a line twice", []string{"seq 000000001 ..", "seq 000000002 ..", "seq 000000002 ..", "end 2"}, false, true, 1},
		{"missing at the end", []string{"seq 000000001 ..", "end 3"}, false, true, 2},
		{"a torn line", []string{"seq 000000001 ..", "seq 0000", "seq 000000002 ..", "end 2"}, false, true, 1},
		{"not ended", []string{"ready", "seq 000000001 .."}, true, false, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newSeqCounter()
			for _, l := range tt.lines {
				c.line([]byte(l))
			}
			if c.isReady() != tt.ready || c.ended() != tt.ended || c.lost() != tt.lost {
				t.Errorf("ready %v, ended %v, lost %d; want %v, %v, %d", c.isReady(), c.ended(), c.lost(), tt.ready, tt.ended, tt.lost)
			}
		})
	}
}

func TestMarkerSet(t *testing.T) {
	m := newMarkerSet()
	for _, l := range []string{"s000 | bench-marker-old s000", "==> /x/s001.log <==", "bench-marker-old s001", "bench-marker-old s001", "bench-marker-new s000", "noise"} {
		m.line([]byte(l))
	}
	if m.count(markerWords[0]) != 2 || m.count(markerWords[1]) != 1 {
		t.Errorf("counts = %d, %d; want 2, 1", m.count(markerWords[0]), m.count(markerWords[1]))
	}
	select {
	case <-m.changed:
	default:
		t.Error("a marker line did not notify")
	}
}

func TestDashboardURL(t *testing.T) {
	out := []byte("up: serving 3 servers\nDashboard: http://127.0.0.1:7070/?token=abc_-1 (open it in a browser)\n")
	if got := dashboardURL(out, "127.0.0.1:7070"); got != "http://127.0.0.1:7070/?token=abc_-1" {
		t.Errorf("dashboardURL = %q", got)
	}
	if got := dashboardURL(out, "127.0.0.1:7071"); got != "" {
		t.Errorf("dashboardURL on another address = %q, want none", got)
	}
	if got := dashboardURL([]byte("see http://127.0.0.1:7070/ for help"), "127.0.0.1:7070"); got != "" {
		t.Errorf("dashboardURL without a token = %q, want none", got)
	}
}

// TestOpenPage drives openPage against a real HTTP server on loopback
// that gates as the dashboard does: the token in the URL is traded for a
// cookie, the page names its stream, the stream needs the cookie.
func TestOpenPage(t *testing.T) {
	const token = "t0k"
	streamed := make(chan struct{})
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("token") == token {
			http.SetCookie(w, &http.Cookie{Name: "c", Value: token, Path: "/"})
			http.Redirect(w, r, "/", http.StatusSeeOther)
			return
		}
		if c, err := r.Cookie("c"); err != nil || c.Value != token {
			http.Error(w, "no token", http.StatusForbidden)
			return
		}
		fmt.Fprint(w, `<body data-stream="/events" data-page="fleet">`)
	})
	mux.HandleFunc("GET /events", func(w http.ResponseWriter, r *http.Request) {
		if c, err := r.Cookie("c"); err != nil || c.Value != token {
			http.Error(w, "no token", http.StatusForbidden)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "event: patch\ndata: {}\n\n")
		w.(http.Flusher).Flush()
		close(streamed)
		<-r.Context().Done()
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pctx, closePage := context.WithCancel(ctx)
	n, err := openPage(pctx, srv.URL+"/?token="+token)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-streamed:
	case <-ctx.Done():
		t.Fatal("the stream was never opened")
	}
	closePage()
	select {
	case k := <-n:
		if k != int64(len("event: patch\ndata: {}\n\n")) {
			t.Errorf("streamed %d bytes, want the one event", k)
		}
	case <-ctx.Done():
		t.Fatal("the stream reader did not end with its context")
	}
	if _, err := openPage(ctx, srv.URL+"/?token=wrong"); err == nil || !strings.Contains(err.Error(), "403") {
		t.Errorf("openPage with a wrong token: %v, want a 403 error", err)
	}
}

func TestPickRange(t *testing.T) {
	// Hold one port in the middle of the first range that would be free.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	held := l.Addr().(*net.TCPAddr).Port
	ports, err := pickRange(held-2, 5)
	if err != nil {
		t.Skipf("no free range near port %d: %v", held, err)
	}
	for i, p := range ports {
		if p == held || (i > 0 && p != ports[i-1]+1) {
			t.Fatalf("pickRange = %v: want 5 consecutive ports without %d", ports, held)
		}
	}
	if ports[0] <= held {
		t.Errorf("pickRange = %v, want a range past the held port %d", ports, held)
	}
}

// TestWorkloadSpew runs the workload as a log writer into a file and a
// real `tail -F` on it through the bench's follower: the follower sees
// "ready", then, after SIGUSR1, every numbered line once and "end".
func TestWorkloadSpew(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the bench reads procfs")
	}
	if _, err := exec.LookPath("tail"); err != nil {
		t.Skip("no tail")
	}
	dir := t.TempDir()
	bin := buildWorkload(t)
	logPath := filepath.Join(dir, "spew.log")
	out, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-port", "0", "-spew", "2000", "-spew-for", "500ms", "-line", "40")
	cmd.Stdout = out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	out.Close()
	waited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(waited) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-waited })

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := waitFileHas(ctx, logPath, "ready\n", waited); err != nil {
		t.Fatal(err)
	}
	c := newSeqCounter()
	fl, err := startFollower("tail -F", dir, filepath.Join(dir, "tail.err"), c, "tail", "-n", "1", "-F", logPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fl.Stop() })
	if err := waitFor(ctx, c.changed, time.Minute, "tail to print ready", c.isReady); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Process.Signal(syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	if err := waitFor(ctx, c.changed, time.Minute, "tail to print end", c.ended); err != nil {
		t.Fatal(err)
	}
	c.mu.Lock()
	end, lines := c.end, c.lines
	c.mu.Unlock()
	if end != 1000 || lines != 1000 || c.lost() != 0 {
		t.Errorf("end %d, %d lines, %d lost; want 1000 lines (2000/s for 0.5 s), none lost", end, lines, c.lost())
	}
	if cpu, err := cpuTime(fl.PID()); err != nil || cpu <= 0 {
		t.Errorf("cpuTime(tail) = %v, %v; want some CPU", cpu, err)
	}
	if err := fl.Stop(); err != nil {
		t.Fatal(err)
	}
	if !processGone(fl.PID()) {
		t.Error("the follower runs on after Stop")
	}
	// The server part is still there: -port 0 means none, and SIGTERM ends it.
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-waited:
		if code := cmd.ProcessState.ExitCode(); code != 0 {
			t.Errorf("workload exit code %d after SIGTERM, want 0", code)
		}
	case <-ctx.Done():
		t.Fatal("workload still running after SIGTERM")
	}
}

// TestMarkersShowFollowing: the marker lines followIdle appends to every
// log show, through a real `tail -F` of several files, first that it read
// each file's tail, then that it follows each one.
func TestMarkersShowFollowing(t *testing.T) {
	if _, err := exec.LookPath("tail"); err != nil {
		t.Skip("no tail")
	}
	dir := t.TempDir()
	f := newFleet("/opt/w", dir, []int{1, 2, 3})
	logs := make([]string, len(f.Servers))
	for i, s := range f.Servers {
		logs[i] = filepath.Join(dir, s.Name+".log")
		if err := os.WriteFile(logs[i], []byte("earlier output\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := appendMarkers(f, logs, markerWords[0]); err != nil {
		t.Fatal(err)
	}
	m := newMarkerSet()
	fl, err := startFollower("tail -F", dir, filepath.Join(dir, "tail.err"), m, append([]string{"tail", "-n", "1", "-F"}, logs...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fl.Stop() })
	ctx := context.Background()
	if err := fl.waitFor(ctx, m.changed, time.Minute, "the tails", func() bool { return m.count(markerWords[0]) == 3 }); err != nil {
		t.Fatal(err)
	}
	if m.count(markerWords[1]) != 0 {
		t.Fatalf("new markers seen before they were written")
	}
	if err := appendMarkers(f, logs, markerWords[1]); err != nil {
		t.Fatal(err)
	}
	if err := fl.waitFor(ctx, m.changed, time.Minute, "the new lines", func() bool { return m.count(markerWords[1]) == 3 }); err != nil {
		t.Fatal(err)
	}
	if err := appendMarkers(f, []string{filepath.Join(dir, "missing.log"), "", ""}, "x"); err == nil {
		t.Error("appendMarkers to a missing log succeeded, want an error naming the server")
	}
}

// TestFollowerWaitEndsWithIt: a wait on a follower that exits ends at once
// with what it printed on stderr, not at the bound.
func TestFollowerWaitEndsWithIt(t *testing.T) {
	dir := t.TempDir()
	c := newSeqCounter()
	fl, err := startFollower("sh", dir, filepath.Join(dir, "err"), c, "sh", "-c", "echo 'accepts 1 arg(s)' >&2; exit 1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fl.Stop() })
	start := time.Now()
	err = fl.waitFor(context.Background(), c.changed, time.Hour, "ready", c.isReady)
	if err == nil || !strings.Contains(err.Error(), "accepts 1 arg(s)") {
		t.Errorf("waitFor = %v, want the follower's stderr in the error", err)
	}
	if time.Since(start) > time.Minute {
		t.Error("waitFor ran to its bound")
	}
}

func TestParseFlagsAB(t *testing.T) {
	o, err := parseFlags([]string{"-peers", "pm2,procfleet,supervisord", "-baseline", "abc1234", "-rounds", "3"}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(o.peers, ",") != "pm2,procfleet,baseline,supervisord" || o.rounds != 3 || o.baseline != "abc1234" {
		t.Errorf("parseFlags = peers %v, rounds %d, baseline %q; want the baseline after procfleet", o.peers, o.rounds, o.baseline)
	}
	for _, bad := range [][]string{{"-peers", "pm2", "-baseline", "abc"}, {"-rounds", "0"}} {
		if _, err := parseFlags(bad, &bytes.Buffer{}); err == nil {
			t.Errorf("parseFlags(%q) succeeded, want an error", bad)
		}
	}
}

// TestPrepareBaseline: an executable file is used as it is (once it
// answers `up --help` and `down --help`); a name that is neither a file
// nor a commit is an error that says so.
func TestPrepareBaseline(t *testing.T) {
	ctx := context.Background()
	root, err := moduleRoot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "procfleet-old")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\necho \"usage: procfleet $1\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	r := &runner{root: root, tmp: dir, planSrc: map[string]string{}}
	got, name, err := r.prepareBaseline(ctx, bin)
	if err != nil || got != bin || name != "procfleet-old" {
		t.Errorf("prepareBaseline(file) = %q, %q, %v; want the file itself", got, name, err)
	}
	if _, ok := r.planSrc[peerBaseline]; ok {
		t.Error("a prebuilt baseline got a source tree to benchmark")
	}
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	if _, _, err := r.prepareBaseline(ctx, "no-such-revision-or-file"); err == nil || !strings.Contains(err.Error(), "neither an executable file nor a commit") {
		t.Errorf("prepareBaseline(nonsense) = %v, want an error saying what it is not", err)
	}
}
