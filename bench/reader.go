package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// follower is a command that follows logs (procfleet logs -f, tail -F),
// started by the bench with its stdout read line by line into a lineSink.
type follower struct {
	name    string
	cmd     *exec.Cmd
	errPath string
	done    chan struct{} // closed once its output ended
}

// lineSink takes a follower's lines, in order, from one goroutine.
type lineSink interface {
	line(b []byte)
}

// startFollower starts argv in dir with its stdout read into sink and its
// stderr appended to errPath.
func startFollower(name, dir, errPath string, sink lineSink, argv ...string) (*follower, error) {
	ef, err := os.OpenFile(errPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	defer ef.Close() // the child has its own copy
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Stderr = ef
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	fl := &follower{name: name, cmd: cmd, errPath: errPath, done: make(chan struct{})}
	go func() {
		defer close(fl.done)
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			sink.line(sc.Bytes())
		}
	}()
	return fl, nil
}

func (fl *follower) PID() int { return fl.cmd.Process.Pid }

// Stop ends the follower with SIGTERM (SIGKILL after 10 s) and reaps it.
// Signals go through os.Process: never a reused pid before Wait.
func (fl *follower) Stop() error {
	if err := fl.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("stop %s: %w", fl.name, err)
	}
	t := time.NewTimer(10 * time.Second)
	defer t.Stop()
	select {
	case <-fl.done:
	case <-t.C:
		_ = fl.cmd.Process.Kill()
		<-fl.done
	}
	_ = fl.cmd.Wait() // exit status of a follower ended by a signal: not an error
	return nil
}

// notifier is a level that waiters re-check: Notify wakes one waiter.
type notifier chan struct{}

func newNotifier() notifier { return make(notifier, 1) }

func (s notifier) Notify() {
	select {
	case s <- struct{}{}:
	default:
	}
}

// waitFor waits until cond holds, re-checking it when s is notified, for
// at most bound.
func waitFor(ctx context.Context, s notifier, bound time.Duration, what string, cond func() bool) error {
	ctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	for !cond() {
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for %s: %w", what, context.Cause(ctx))
		case <-s:
		}
	}
	return nil
}

// waitFor is waitFor that also ends, saying why, when the follower's
// output ends first.
func (fl *follower) waitFor(ctx context.Context, s notifier, bound time.Duration, what string, cond func() bool) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	go func() {
		select {
		case <-fl.done:
			msg, _ := os.ReadFile(fl.errPath)
			cancel(fmt.Errorf("%s ended: %s", fl.name, oneLine(tail(msg, 400))))
		case <-ctx.Done():
		}
	}()
	return waitFor(ctx, s, bound, what, cond)
}

// seqCounter checks a follower's copy of the workload's -spew output: the
// "ready" line, "seq <n>" lines expected in order from 1, and "end <n>".
// Lines arrive from one goroutine; its figures are read under mu.
type seqCounter struct {
	changed notifier

	mu      sync.Mutex
	ready   bool
	end     int // count from the "end" line; -1 until seen
	next    int // the seq number expected next
	lines   int // seq lines seen
	missing int // seq numbers skipped
	dup     int // seq lines at or below one seen already
}

func newSeqCounter() *seqCounter { return &seqCounter{changed: newNotifier(), end: -1, next: 1} }

func (c *seqCounter) line(b []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case bytes.HasSuffix(b, []byte("ready")):
		c.ready = true
		c.changed.Notify()
	case bytes.Contains(b, []byte("seq ")):
		_, rest, _ := bytes.Cut(b, []byte("seq "))
		digits, _, _ := bytes.Cut(rest, []byte(" "))
		n, err := strconv.Atoi(string(digits))
		if err != nil {
			c.missing++ // a torn line: its number is lost
			return
		}
		c.lines++
		switch {
		case n >= c.next:
			c.missing += n - c.next
			c.next = n + 1
		default:
			c.dup++
		}
	case bytes.Contains(b, []byte("end ")):
		_, rest, _ := bytes.Cut(b, []byte("end "))
		if n, err := strconv.Atoi(string(bytes.TrimSpace(rest))); err == nil {
			c.end = n
			c.changed.Notify()
		}
	}
}

func (c *seqCounter) isReady() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ready
}

func (c *seqCounter) ended() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.end >= 0
}

// lost is how many lines of the stream the follower did not print exactly
// once: skipped, printed again, or missing at the end.
func (c *seqCounter) lost() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	tail := 0
	if c.end >= c.next {
		tail = c.end - c.next + 1
	}
	return c.missing + c.dup + tail
}

// markerSet collects, per marker word, the servers whose marker lines a
// follower printed ("<word> <server>" anywhere in the line, which may carry
// a "name | " prefix).
type markerSet struct {
	changed notifier

	mu   sync.Mutex
	seen map[string]map[string]bool
}

func newMarkerSet() *markerSet {
	return &markerSet{changed: newNotifier(), seen: map[string]map[string]bool{}}
}

// markerWords are the marker lines the bench appends to idle servers' logs.
var markerWords = []string{"bench-marker-old", "bench-marker-new"}

func (m *markerSet) line(b []byte) {
	for _, w := range markerWords {
		_, rest, ok := bytes.Cut(b, []byte(w+" "))
		if !ok {
			continue
		}
		m.mu.Lock()
		if m.seen[w] == nil {
			m.seen[w] = map[string]bool{}
		}
		m.seen[w][string(bytes.TrimSpace(rest))] = true
		m.mu.Unlock()
		m.changed.Notify()
	}
}

func (m *markerSet) count(word string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.seen[word])
}

// cpuTime is the CPU pid has used, from its threads' schedstat
// (nanoseconds; a window of a few seconds needs better than utime's 10 ms).
func cpuTime(pid int) (time.Duration, error) {
	u, err := readCPU(pid)
	if err != nil {
		return 0, err
	}
	return u.Sched, nil
}
