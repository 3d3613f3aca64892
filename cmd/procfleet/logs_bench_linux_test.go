package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// Parameters of BenchmarkLogsFollowCPU.
const (
	// benchRate is the stream's rate, lines per second, each line one
	// write(2) as a server's logger does it.
	benchRate = 100_000
	// benchStream is how long the stream runs.
	benchStream = 5 * time.Second
	// benchTick paces the writer: every tick it writes the lines due by
	// then, so the rate holds when a tick comes late.
	benchTick = time.Millisecond
)

// clockTick is the unit of utime and stime in /proc/PID/stat (USER_HZ,
// 100 on Linux for every architecture Go supports).
const clockTick = 10 * time.Millisecond

// cpuTime is the CPU time (user and system, every thread, exited ones
// included) a process has used so far, from /proc/PID/stat.
func cpuTime(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// Fields after the command name, which is in parentheses and may hold
	// spaces: state is field 3, utime 14, stime 15.
	i := bytes.LastIndexByte(b, ')')
	f := strings.Fields(string(b[i+1:]))
	if i < 0 || len(f) < 13 {
		return 0, fmt.Errorf("stat of %d: %q", pid, b)
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("stat of %d: %q", pid, b)
	}
	return time.Duration(utime+stime) * clockTick, nil
}

// cpuTimes reads cpuTime of the two commands' processes.
func cpuTimes(b *testing.B, c1, c2 *exec.Cmd) (time.Duration, time.Duration) {
	b.Helper()
	t1, err := cpuTime(c1.Process.Pid)
	if err != nil {
		b.Fatal(err)
	}
	t2, err := cpuTime(c2.Process.Pid)
	if err != nil {
		b.Fatal(err)
	}
	return t1, t2
}

// threadsCPU is the CPU time of the live threads of a process, to the
// nanosecond: the sum of /proc/PID/task/*/schedstat (time on CPU). Threads
// that exited are not counted: for a process whose threads live on (a Go
// program keeps its threads), over a window where it does little.
func threadsCPU(pid int) (time.Duration, error) {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return 0, err
	}
	var sum time.Duration
	for _, task := range tasks {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/schedstat", pid, task.Name()))
		if err != nil {
			continue // exited meanwhile
		}
		f := strings.Fields(string(b))
		if len(f) == 0 {
			return 0, fmt.Errorf("schedstat of %d/%s: %q", pid, task.Name(), b)
		}
		ns, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, err
		}
		sum += time.Duration(ns)
	}
	return sum, nil
}

// countingSink drains a follower's output pipe and counts the bytes.
type countingSink struct {
	n      atomic.Int64
	notify chan struct{} // signalled after each read
}

func drain(r io.Reader) *countingSink {
	s := &countingSink{notify: make(chan struct{}, 1)}
	go func() {
		buf := make([]byte, 256<<10)
		for {
			n, err := r.Read(buf)
			s.n.Add(int64(n))
			select {
			case s.notify <- struct{}{}:
			default:
			}
			if err != nil {
				return
			}
		}
	}()
	return s
}

// waitBytes waits, for at most a minute, until the sink has seen n bytes.
func (s *countingSink) waitBytes(tb testing.TB, what string, n int64) {
	tb.Helper()
	deadline := time.After(time.Minute)
	for s.n.Load() < n {
		select {
		case <-s.notify:
		case <-deadline:
			tb.Fatalf("%s printed %d bytes of %d", what, s.n.Load(), n)
		}
	}
}

// benchBin builds procfleet for a benchmark (procfleetBin takes a
// *testing.T).
func benchBin(b *testing.B) string {
	b.Helper()
	path := filepath.Join(b.TempDir(), "procfleet")
	if out, err := exec.Command("go", "build", "-o", path, ".").CombinedOutput(); err != nil {
		b.Fatalf("build procfleet: %v: %s", err, out)
	}
	return path
}

// startFollower starts a follower command with its stdout on a counted
// pipe; it is killed when the benchmark ends.
func startFollower(b *testing.B, name string, args ...string) (*exec.Cmd, *countingSink) {
	b.Helper()
	c := exec.Command(name, args...)
	r, w, err := os.Pipe()
	if err != nil {
		b.Fatal(err)
	}
	c.Stdout, c.Stderr = w, os.Stderr
	if err := c.Start(); err != nil {
		b.Fatal(err)
	}
	w.Close()
	b.Cleanup(func() {
		_ = c.Process.Kill()
		_ = c.Wait()
		r.Close()
	})
	return c, drain(r)
}

// BenchmarkLogsFollowCPU: `procfleet logs -f` and `tail -F` follow the same
// log side by side while a writer appends ~100k lines/s to it for 5 s;
// the CPU each follower used meanwhile is compared (issue 20: within 2x of
// tail -F). Both print to a pipe that the benchmark drains. Run with
// -benchtime=1x; each iteration is one 5 s stream.
func BenchmarkLogsFollowCPU(b *testing.B) {
	tailBin, err := exec.LookPath("tail")
	if err != nil {
		b.Skip("tail is not installed")
	}
	pf := benchBin(b)
	var pfCPU, tailCPU time.Duration
	var streamed time.Duration
	for i := 0; i < b.N; i++ {
		state := b.TempDir()
		path := filepath.Join(stateFolder(b, state), "api.log")
		log, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
		if err != nil {
			b.Fatal(err)
		}
		ready := []byte("ready\n")
		if _, err := log.Write(ready); err != nil {
			b.Fatal(err)
		}
		pfCmd, pfOut := startFollower(b, pf, "logs", "-f", "api", "--state-dir", state)
		tailCmd, tailOut := startFollower(b, tailBin, "-F", "-n", "+1", path)
		pfOut.waitBytes(b, "procfleet logs -f", int64(len(ready)))
		tailOut.waitBytes(b, "tail -F", int64(len(ready)))

		pf0, tail0 := cpuTimes(b, pfCmd, tailCmd)
		written := int64(len(ready))
		line := []byte("00000000 2026-12-01T10:00:00.000Z INFO request served path=/api/items status=200\n")
		start := time.Now()
		tick := time.NewTicker(benchTick)
		seq := 0
		for time.Since(start) < benchStream {
			<-tick.C
			due := int(time.Since(start) * benchRate / time.Second)
			for ; seq < due; seq++ {
				copy(line, fmt.Appendf(nil, "%08d", seq%100_000_000))
				if _, err := log.Write(line); err != nil {
					b.Fatal(err)
				}
				written += int64(len(line))
			}
		}
		tick.Stop()
		elapsed := time.Since(start)
		pfOut.waitBytes(b, "procfleet logs -f", written)
		tailOut.waitBytes(b, "tail -F", written)
		pf1, tail1 := cpuTimes(b, pfCmd, tailCmd)
		log.Close()
		_ = pfCmd.Process.Signal(syscall.SIGTERM)
		_ = tailCmd.Process.Signal(syscall.SIGTERM)
		pfCPU += pf1 - pf0
		tailCPU += tail1 - tail0
		streamed += elapsed
		b.Logf("stream of %d lines in %v: procfleet logs -f %v CPU, tail -F %v CPU", seq, elapsed.Round(time.Millisecond), (pf1 - pf0).Round(time.Millisecond), (tail1 - tail0).Round(time.Millisecond))
	}
	b.ReportMetric(float64(pfCPU)/float64(streamed)*100, "%cpu-logs-f")
	b.ReportMetric(float64(tailCPU)/float64(streamed)*100, "%cpu-tail-F")
	b.ReportMetric(float64(pfCPU)/float64(tailCPU), "ratio")
}

// idleWindow is how long BenchmarkLogsFollowIdle watches an idle fleet.
const idleWindow = 10 * time.Second

// BenchmarkLogsFollowIdle: `procfleet logs -f` of a fleet of 100 servers
// whose logs nobody writes; the CPU it uses over 10 s of that (issue 15:
// none between writes, inotify, not polling). Before and after the idle
// window one line is written to the logs and must come out, so the
// follower is known to be following. Run with -benchtime=1x.
func BenchmarkLogsFollowIdle(b *testing.B) {
	pf := benchBin(b)
	const servers = 100
	var idleCPU time.Duration
	for i := 0; i < b.N; i++ {
		dir := b.TempDir()
		state := filepath.Join(dir, ".procfleet")
		logs := stateFolder(b, state)
		var fleet strings.Builder
		var names []string
		for s := 0; s < servers; s++ {
			name := fmt.Sprintf("s%03d", s)
			names = append(names, name)
			fmt.Fprintf(&fleet, "---\napiVersion: procfleet.dev/v1alpha1\nkind: Server\nmetadata: {name: %s}\nspec:\n  command: [/bin/true]\n", name)
			if err := os.WriteFile(filepath.Join(logs, name+".log"), []byte("hello\n"), 0o600); err != nil {
				b.Fatal(err)
			}
		}
		file := filepath.Join(dir, "procfleet.yaml")
		if err := os.WriteFile(file, []byte(fleet.String()), 0o644); err != nil {
			b.Fatal(err)
		}
		cmd, out := startFollower(b, pf, "logs", "-f", "--file", file, "--state-dir", state)
		lineLen := int64(len("s000 | hello\n"))
		out.waitBytes(b, "the fleet's history", servers*lineLen)
		appendLine := func(name string) {
			f, err := os.OpenFile(filepath.Join(logs, name+".log"), os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			if _, err := f.WriteString("hello\n"); err != nil {
				b.Fatal(err)
			}
		}
		appendLine(names[servers/2])
		out.waitBytes(b, "a line before the idle window", (servers+1)*lineLen)

		// The window starts a second after that line, past the follower's
		// handling of it (its 5 ms batch window, the runtime's work after
		// the start): it measures the idle fleet, not the last write.
		time.Sleep(time.Second)
		cpu0, err := threadsCPU(cmd.Process.Pid)
		if err != nil {
			b.Fatal(err)
		}
		time.Sleep(idleWindow) // the measurement itself: nothing is awaited
		cpu1, err := threadsCPU(cmd.Process.Pid)
		if err != nil {
			b.Fatal(err)
		}
		idleCPU += cpu1 - cpu0

		for _, n := range names {
			appendLine(n)
		}
		out.waitBytes(b, "a line of every server after the idle window", (2*servers+1)*lineLen)
		b.Logf("%d idle servers followed for %v: %v CPU", servers, idleWindow, cpu1-cpu0)
	}
	b.ReportMetric(float64(idleCPU.Microseconds())/float64(b.N), "cpu-µs/10s-idle")
}
