package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
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
		name   string
		target Target
		values map[string]float64
		want   string
	}{
		{"max met", Target{Kind: TargetMax, Value: 0.5}, map[string]float64{peerProcfleet: 0.3}, "met"},
		{"max missed", Target{Kind: TargetMax, Value: 0.5}, map[string]float64{peerProcfleet: 0.75}, "missed by 0.25 s (+50%)"},
		{"floor factor met", Target{Kind: TargetFloorFactor, Value: 1.2}, map[string]float64{peerProcfleet: 1.1, peerFloor: 1}, "met (1.10x floor)"},
		{"floor factor missed", Target{Kind: TargetFloorFactor, Value: 1.2}, map[string]float64{peerProcfleet: 1.5, peerFloor: 1}, "missed by 0.30 s (+25%), 1.50x floor"},
		{"floor plus", Target{Kind: TargetFloorPlus, Value: 0.1}, map[string]float64{peerProcfleet: 0.2, peerFloor: 0.15}, "met"},
		{"no floor", Target{Kind: TargetFloorFactor, Value: 1.2}, map[string]float64{peerProcfleet: 1}, "no floor measured"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			row := &Row{Unit: "s", Values: tt.values, Target: &tt.target}
			judge(row)
			if row.Verdict != tt.want {
				t.Errorf("verdict = %q, want %q", row.Verdict, tt.want)
			}
		})
	}
}

// sampleResults is a small, fixed result set for the golden table.
func sampleResults() *Results {
	rs := newRows(100, 30*time.Second)
	res := NewResults()
	for _, sc := range allScenarios {
		for _, spec := range rs.forScenario(sc) {
			res.Declare(spec)
		}
	}
	res.Set(rs.crashStamp[0], peerProcfleet, 18.2)
	res.Set(rs.crashStamp[0], peerSupervisord, 1003)
	res.Set(rs.crashStamp[0], peerPM2, 34.5)
	res.Set(rs.crashStamp[0], peerFloor, 16.1)
	res.Set(rs.cold, peerProcfleet, 1.9)
	res.Set(rs.cold, peerSupervisord, 6.7)
	res.Set(rs.cold, peerFloor, 1.4)
	res.Fail(rs.cold, peerPM2, errString("pm2: start: exit status 1\n\x1b[31mboom\x1b[39m"))
	res.Fail(rs.stop, peerPM2, errString("pm2: start: exit status 1\n\x1b[31mboom\x1b[39m"))
	res.Set(rs.editOthers, peerProcfleet, 0)
	res.Set(rs.editOthers, peerPM2, 99)
	res.Set(rs.idleRSS, peerProcfleet, 24.25)
	res.Note("6. plan at scale skipped: BenchmarkReconcilePass1000 does not exist in ./reconciler yet")
	return res
}

type errString string

func (e errString) Error() string { return string(e) }

func TestRenderTableGolden(t *testing.T) {
	rows, notes := sampleResults().Finish()
	var buf bytes.Buffer
	if err := RenderTable(&buf, rows, notes); err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "table.golden")
	if *update {
		if err := os.WriteFile(golden, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test ./bench -update to create it)", err)
	}
	if !bytes.Equal(buf.Bytes(), want) {
		t.Errorf("table differs from %s (go test ./bench -update):\n%s", golden, buf.String())
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
	o, err := parseFlags([]string{"-peers", "pm2, procfleet,pm2", "-scenarios", "crash", "-n", "5"}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(o.peers, ",") != "pm2,procfleet" || strings.Join(o.scenarios, ",") != "crash" || o.n != 5 || o.src != "head" {
		t.Errorf("parseFlags = %+v", o)
	}
	for _, bad := range [][]string{{"-peers", "systemd"}, {"-scenarios", "warp"}, {"-n", "1"}, {"-src", "tip"}} {
		if _, err := parseFlags(bad, &bytes.Buffer{}); err == nil {
			t.Errorf("parseFlags(%q) succeeded, want an error", bad)
		}
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
