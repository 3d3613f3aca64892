package logfile

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"

	"github.com/procfleet/procfleet/internal/testutil"
)

// lineLen is the length of a writer line ("%08d the quick brown fox jumps\n").
const lineLen = 35

// gate is an io.Writer whose Writes wait while it is shut: a reader of
// Follow's output that stalls (a pipe to a pager, a slow terminal). Each
// Write that has to wait is reported on blocked.
type gate struct {
	out     *testutil.SyncBuffer
	mu      sync.Mutex
	shut    bool
	opened  chan struct{}
	blocked chan struct{}
}

func newGate() *gate {
	return &gate{out: testutil.NewSyncBuffer(), shut: true, opened: make(chan struct{}), blocked: make(chan struct{}, 1)}
}

func (g *gate) Write(p []byte) (int, error) {
	g.mu.Lock()
	shut, opened := g.shut, g.opened
	g.mu.Unlock()
	if shut {
		select {
		case g.blocked <- struct{}{}:
		default:
		}
		<-opened
	}
	return g.out.Write(p)
}

func (g *gate) open() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.shut {
		g.shut = false
		close(g.opened)
	}
}

// waitBlocked waits until a Write waits at the shut gate.
func (g *gate) waitBlocked(t *testing.T) {
	t.Helper()
	select {
	case <-g.blocked:
	case <-time.After(30 * time.Second):
		t.Fatal("the follower never wrote to its output")
	}
}

// followTo runs Follow on path into w until the test ends; the gate is
// opened first at cleanup, so Follow can return.
func followTo(t *testing.T, path string, w io.Writer, opts FollowOptions) {
	t.Helper()
	opts.Log = testr.New(t)
	testutil.RunUntilCleanup(t, "Follow", func(ctx context.Context) error { return Follow(ctx, path, w, opts) })
}

// batches drives a writer process that writes batch lines per call of next
// and returns once they are written.
type batches struct {
	t          *testing.T
	stdin, ack *os.File
	written    int
	batch      int
}

func startBatches(t *testing.T, path string, batch, count int) *batches {
	_, stdin, ack := startWriterAck(t, path, batch*count, batch, true)
	return &batches{t: t, stdin: stdin, ack: ack, batch: batch}
}

// next makes the writer write one more batch and waits until it has.
func (b *batches) next() {
	b.t.Helper()
	if _, err := b.stdin.Write([]byte{'x'}); err != nil {
		b.t.Fatal(err)
	}
	if err := b.ack.SetReadDeadline(time.Now().Add(30 * time.Second)); err != nil {
		b.t.Fatal(err)
	}
	var one [1]byte
	if _, err := io.ReadFull(b.ack, one[:]); err != nil {
		b.t.Fatalf("the writer did not finish batch %d: %v", b.written/b.batch, err)
	}
	b.written += b.batch
}

// TestFollowStalledReaderAcrossRotations: the reader of Follow's output
// stalls while Follow holds a first part of the log; the log is rotated
// twice (fewer than the 3 copies kept) while it stalls; once it reads again
// every line comes exactly once, in order. (Issue 20: a stall across a
// rotation used to lose millions of lines and tear one.)
func TestFollowStalledReaderAcrossRotations(t *testing.T) {
	inEachRotationMode(t, func(t *testing.T, dir string, _ bool) {
		path := filepath.Join(dir, "api.log")
		const batch = 3000 // 105,000 bytes: more than Follow reads at once
		w := startBatches(t, path, batch, 4)
		g := newGate()
		followTo(t, path, g, FollowOptions{Lines: -1, Keep: 3})
		t.Cleanup(g.open)

		w.next()
		g.waitBlocked(t) // Follow holds the first 64 KiB, the rest unread
		for i := 0; i < 2; i++ {
			w.next()
			if err := Rotate(path, Options{Keep: 3}); err != nil {
				t.Fatal(err)
			}
		}
		w.next()
		g.open()
		g.out.WaitFor(t, numbered(w.written-1, w.written))
		if got, want := g.out.String(), numbered(0, w.written); got != want {
			t.Errorf("after a stall across two rotations Follow printed %d bytes, want %d: lines lost, repeated, torn or out of order", len(got), len(want))
		}
	})
}

var skipMarkerRE = regexp.MustCompile(`^--- procfleet: (\d+) bytes skipped: rotated away before they were read ---$`)

// TestFollowStalledReaderBeyondKept: the reader stalls across six
// rotations while 3 copies are kept, so the output of the copies removed
// meanwhile is gone. Follow prints one marker line that says how many
// bytes it skipped, exactly the bytes of the lines missing around it; every
// other line comes once, in order, none torn.
func TestFollowStalledReaderBeyondKept(t *testing.T) {
	inEachRotationMode(t, func(t *testing.T, dir string, _ bool) {
		path := filepath.Join(dir, "api.log")
		const batch = 3000
		w := startBatches(t, path, batch, 8)
		g := newGate()
		followTo(t, path, g, FollowOptions{Lines: -1, Keep: 3})
		t.Cleanup(g.open)

		w.next()
		g.waitBlocked(t)
		for i := 0; i < 6; i++ {
			w.next()
			if err := Rotate(path, Options{Keep: 3}); err != nil {
				t.Fatal(err)
			}
		}
		w.next()
		g.open()
		g.out.WaitFor(t, numbered(w.written-1, w.written))

		var nums []int
		markers, skipped, gapAt := 0, int64(0), -1
		for i, line := range strings.SplitAfter(g.out.String(), "\n") {
			if line == "" {
				continue
			}
			if m := skipMarkerRE.FindStringSubmatch(strings.TrimSuffix(line, "\n")); m != nil {
				markers++
				skipped, _ = strconv.ParseInt(m[1], 10, 64)
				gapAt = len(nums)
				continue
			}
			n, err := strconv.Atoi(strings.TrimSuffix(line, " the quick brown fox jumps\n"))
			if err != nil || len(line) != lineLen {
				t.Fatalf("line %d is torn or foreign: %q", i+1, line)
			}
			nums = append(nums, n)
		}
		if markers != 1 || gapAt <= 0 || gapAt >= len(nums) {
			t.Fatalf("%d skip markers (at line %d of %d), want one between lines", markers, gapAt, len(nums))
		}
		for i := 1; i < len(nums); i++ {
			if i != gapAt && nums[i] != nums[i-1]+1 {
				t.Fatalf("line %d follows line %d away from the marker: lost, repeated or out of order", nums[i], nums[i-1])
			}
		}
		missing := nums[gapAt] - nums[gapAt-1] - 1
		if nums[0] != 0 || nums[len(nums)-1] != w.written-1 || missing <= 0 {
			t.Fatalf("lines %d..%d with %d missing at the marker; want 0..%d with a gap", nums[0], nums[len(nums)-1], missing, w.written-1)
		}
		if want := int64(missing * lineLen); skipped != want {
			t.Errorf("the marker says %d bytes skipped; the %d lines missing hold %d", skipped, missing, want)
		}
		t.Logf("%d lines (%d bytes) skipped after 6 rotations with 3 kept", missing, skipped)
	})
}

// TestFollowStallsUnderContinuousWriter: a writer process writes without
// pause while the log is rotated and the reader of Follow's output stalls
// and resumes again and again (never more than two rotations per stall).
// With collapse (nothing lost by the rotation) the output is exactly what
// was written.
func TestFollowStallsUnderContinuousWriter(t *testing.T) {
	dir := t.TempDir()
	if !collapseWorks(t, dir) {
		t.Skipf("fallocate COLLAPSE_RANGE is not supported in %s", dir)
	}
	path := filepath.Join(dir, "api.log")
	const total = 120_000
	cmd, _ := startWriter(t, path, total, 0)
	done := make(chan struct{}) // closed when the writer has exited
	var werr error
	go func() { werr = cmd.Wait(); close(done) }()

	out := testutil.NewSyncBuffer()
	st := &stallable{out: out, blocked: make(chan struct{}, 1)}
	followTo(t, path, st, FollowOptions{Lines: -1, Keep: 3})
	t.Cleanup(st.resume)

	stalls := 0
	for running := true; running; {
		st.stall()
		st.waitBlocked(t, done)
		for i := 0; i < 2; i++ {
			if _, err := RotateIfLarger(path, Options{MaxBytes: 64 << 10, Keep: 3}); err != nil {
				t.Fatal(err)
			}
		}
		st.resume()
		stalls++
		// Before the next stall, let the follower catch up with the
		// copies (so it is never more than two rotations behind): wait
		// for the last whole line of the newest one.
		if last := lastWholeLine(t, RotatedPath(path, 1)); last != "" {
			out.WaitFor(t, last)
		}
		select {
		case <-done:
			if werr != nil {
				t.Fatalf("writer: %v", werr)
			}
			running = false
		default:
		}
	}
	out.WaitFor(t, numberedLine(total-1))
	if got, want := out.String(), numbered(0, total); got != want {
		t.Errorf("Follow printed %d bytes, want %d: lines lost, repeated, torn or out of order", len(got), len(want))
	}
	t.Logf("%d stalls, each across up to two rotations, under a writer of %d lines", stalls, total)
}

// stallable is a writer that can be made to hold Writes (stall) and let
// them through again (resume); blocked reports a Write held.
type stallable struct {
	out     io.Writer
	mu      sync.Mutex
	gate    chan struct{} // non-nil while stalled; closed on resume
	blocked chan struct{}
}

func (s *stallable) Write(p []byte) (int, error) {
	s.mu.Lock()
	g := s.gate
	s.mu.Unlock()
	if g != nil {
		select {
		case s.blocked <- struct{}{}:
		default:
		}
		<-g
	}
	return s.out.Write(p)
}

func (s *stallable) stall() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gate == nil {
		s.gate = make(chan struct{})
	}
}

// waitBlocked waits until a Write is held, or the writer process ended
// (then the follower may have nothing more to write).
func (s *stallable) waitBlocked(t *testing.T, writerDone <-chan struct{}) {
	t.Helper()
	select {
	case <-s.blocked:
	case <-writerDone:
	case <-time.After(30 * time.Second):
		t.Fatal("the follower never wrote to its output")
	}
}

func (s *stallable) resume() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gate != nil {
		close(s.gate)
		s.gate = nil
	}
}

// lastWholeLine returns the last line of the file at path that ends with
// a line feed ("" when none, or no file).
func lastWholeLine(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	end := strings.LastIndexByte(string(b), '\n')
	if end < 0 {
		return ""
	}
	start := strings.LastIndexByte(string(b[:end]), '\n') + 1
	return string(b[start : end+1])
}

// numberedLine is line n of a writer.
func numberedLine(n int) string { return fmt.Sprintf("%08d the quick brown fox jumps\n", n) }
