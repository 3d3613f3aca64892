package main

import (
	"context"
	"io"
	"log"
	"net"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestWatchExit kills a real workload and checks that its pidfd's
// readability is seen after the kill and before the wait returns, and that
// a watch stopped before any exit ends without a time.
func TestWatchExit(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("pidfds are Linux's")
	}
	bin := buildWorkload(t)
	dir := t.TempDir()
	start := func() (*exec.Cmd, chan struct{}) {
		cmd, _ := startWorkload(t, bin, dir)
		waited := make(chan struct{})
		go func() { _ = cmd.Wait(); close(waited) }()
		t.Cleanup(func() { _ = cmd.Process.Kill(); <-waited })
		return cmd, waited
	}

	cmd, waited := start()
	seen, stop, err := watchExit(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	select {
	case at := <-seen:
		if at.Before(t0) {
			t.Errorf("exit seen at %v, before the kill at %v", at, t0)
		}
	case <-ctx.Done():
		t.Fatal("the exit of a killed workload was not seen")
	}
	stop()
	<-waited

	cmd2, _ := start()
	seen2, stop2, err := watchExit(cmd2.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	stop2() // returns once the poll is left: the pidfd is closed
	select {
	case at := <-seen2:
		t.Errorf("a live workload's exit seen at %v", at)
	default:
	}

	if _, _, err := watchExit(1 << 30); err == nil {
		t.Error("watchExit of a pid that cannot exist: no error")
	}
}

// TestSetExitStamp checks the exit-to-stamp rows: median and p90 with their
// samples, the floor's spawn samples in the same rows, and a note for a
// peer whose exits could not be watched.
func TestSetExitStamp(t *testing.T) {
	rs := newRows(settings{sizes: []int{100}, idle: 30 * time.Second, window: 10 * time.Second})
	r := &runner{res: NewResults(), log: log.New(io.Discard, "", 0)}
	for _, spec := range rs.forScenario(scCrash) {
		r.res.Declare(spec)
	}
	r.setExitStamp(rs.crash[0], peerProcfleet, []float64{5, 1, 3, 2, 4, 6, 7, 8, 9, 10})
	r.setExitStamp(rs.crash[0], peerFloor, []float64{2, 2, 2})
	r.setExitStamp(rs.crash[1], peerPM2, nil)
	rows, notes := r.res.Finish()
	byKey := map[string]*Row{}
	for _, row := range rows {
		byKey[row.Key] = row
	}
	med, p90 := byKey["crash.first.exit-stamp.median"], byKey["crash.first.exit-stamp.p90"]
	if got := med.Values[peerProcfleet]; got != 5.5 {
		t.Errorf("procfleet median = %v, want 5.5", got)
	}
	if got := p90.Values[peerProcfleet]; got != Summarize([]float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}).P90 {
		t.Errorf("procfleet p90 = %v", got)
	}
	if got := med.Values[peerFloor]; got != 2 {
		t.Errorf("floor median = %v, want 2", got)
	}
	if _, ok := byKey["crash.second.exit-stamp.median"].Values[peerPM2]; ok {
		t.Error("a peer without watched exits got a value")
	}
	found := false
	for _, n := range notes {
		found = found || (strings.Contains(n, "pm2") && strings.Contains(n, "crash.second.exit-stamp.median"))
	}
	if !found {
		t.Errorf("notes %q name no unwatched exits of pm2", notes)
	}
}

// TestPinnedSetAndListeners pins a real workload, sees its port through
// listeningOf and the procfs reading alike, kills it, and checks that the
// set counts it gone while it is still an unreaped zombie, and that
// waitStopped then returns.
func TestPinnedSetAndListeners(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("pidfds and sock_diag are Linux's")
	}
	cmd, port := startWorkload(t, buildWorkload(t), t.TempDir())
	reaped := false
	t.Cleanup(func() {
		if !reaped {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := waitHealth(ctx, newHealthClient(), port, healthFrom(cmd.Process.Pid, ""), noCheck); err != nil {
		t.Fatalf("wait for /health: %v", err)
	}
	diag, err := listeningOf([]int{port, port + 1})
	if err != nil {
		t.Fatal(err)
	}
	procfs, err := listeningPorts()
	if err != nil {
		t.Fatal(err)
	}
	if !diag[port] || !procfs[port] || diag[port+1] != procfs[port+1] {
		t.Errorf("listening on %d: sock_diag says %v, procfs %v; on %d: %v, %v", port, diag[port], procfs[port], port+1, diag[port+1], procfs[port+1])
	}

	set := pinAll([]int{cmd.Process.Pid})
	defer set.close()
	if n, err := set.alive(); n != 1 || err != nil {
		t.Fatalf("alive = %d, %v before the kill; want 1", n, err)
	}
	seen, stop, err := watchExit(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case <-seen:
	case <-ctx.Done():
		t.Fatal("the exit of a killed workload was not seen")
	}
	if !processGone(cmd.Process.Pid) {
		t.Fatal("the killed workload still runs after its pidfd said it exited")
	}
	if n, err := set.alive(); n != 0 || err != nil {
		t.Errorf("alive = %d, %v for an unreaped zombie; want 0", n, err)
	}
	_ = cmd.Wait()
	reaped = true
	if _, err := waitStopped(ctx, []int{cmd.Process.Pid}, []int{port}); err != nil {
		t.Errorf("waitStopped after the exit: %v", err)
	}
}

// startWorkload starts the workload on a free loopback port, stamping into
// dir, and returns it with its port. The caller kills and reaps it.
func startWorkload(t *testing.T, bin, dir string) (*exec.Cmd, int) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	f := newFleet(bin, dir, []int{port})
	cmd := exec.Command(bin, f.Servers[0].Args()...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd, port
}
