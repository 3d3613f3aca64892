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
	"testing"
	"time"

	"github.com/go-logr/logr/testr"

	"github.com/procfleet/procfleet/internal/testutil"
)

// lineLen is the length of a writer line ("%08d the quick brown fox jumps\n").
const lineLen = 35

// followTo runs Follow on path into w until the test ends.
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
	w := startWriter(t, path, batch*count, batch, true)
	return &batches{t: t, stdin: w.stdin, ack: w.ack, batch: batch}
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
		got, written := stallAcross(t, filepath.Join(dir, "api.log"), 2)
		if want := numbered(0, written); got != want {
			t.Errorf("after a stall across two rotations Follow printed %d bytes, want %d: lines lost, repeated, torn or out of order", len(got), len(want))
		}
	})
}

// stallAcross starts a writer process on the log at path and Follow with
// a stalled output; once Follow holds the first 64 KiB of a first batch of
// 3,000 lines (105,000 bytes), it has a batch written and the log rotated
// (3 copies kept) rotations times, a last batch written, and the output let
// go. It returns Follow's output once the last line is in it, and how many
// lines were written.
func stallAcross(t *testing.T, path string, rotations int) (string, int) {
	t.Helper()
	const batch = 3000
	w := startBatches(t, path, batch, rotations+2)
	out := testutil.NewSyncBuffer()
	st := stalledFollow(t, path, out)
	w.next()
	st.WaitBlocked(t)
	for i := 0; i < rotations; i++ {
		w.next()
		if err := Rotate(path, Options{Keep: 3}); err != nil {
			t.Fatal(err)
		}
	}
	w.next()
	st.Resume()
	out.WaitFor(t, numberedLine(w.written-1))
	return out.String(), w.written
}

var skipMarkerRE = regexp.MustCompile(`^--- procfleet: (\d+) bytes skipped: rotated away before they were read ---$`)

// TestFollowStalledReaderBeyondKept: the reader stalls across six
// rotations while 3 copies are kept, so the output of the copies removed
// meanwhile is gone. Follow prints one marker line that says how many
// bytes it skipped, exactly the bytes of the lines missing around it; every
// other line comes once, in order, none torn.
func TestFollowStalledReaderBeyondKept(t *testing.T) {
	inEachRotationMode(t, func(t *testing.T, dir string, _ bool) {
		got, written := stallAcross(t, filepath.Join(dir, "api.log"), 6)
		var nums []int
		markers, skipped, gapAt := 0, int64(0), -1
		for i, line := range strings.SplitAfter(got, "\n") {
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
		if nums[0] != 0 || nums[len(nums)-1] != written-1 || missing <= 0 {
			t.Fatalf("lines %d..%d with %d missing at the marker; want 0..%d with a gap", nums[0], nums[len(nums)-1], missing, written-1)
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
	w := startWriter(t, path, total, 0, false)

	out := testutil.NewSyncBuffer()
	st := testutil.NewStallWriter(out)
	followTo(t, path, st, FollowOptions{Lines: -1, Keep: 3})
	t.Cleanup(st.Resume)

	stalls := 0
	for running := true; running; {
		st.Stall()
		select {
		case <-st.Blocked():
		case <-w.exited: // the follower may have nothing more to write
		case <-time.After(30 * time.Second):
			t.Fatal("the follower never wrote to its output")
		}
		for i := 0; i < 2; i++ {
			if _, err := RotateIfLarger(path, Options{MaxBytes: 64 << 10, Keep: 3}); err != nil {
				t.Fatal(err)
			}
		}
		st.Resume()
		stalls++
		// Before the next stall, let the follower catch up with the
		// copies (so it is never more than two rotations behind): wait
		// for the last whole line of the newest one.
		if last := lastWholeLine(t, RotatedPath(path, 1)); last != "" {
			out.WaitFor(t, last)
		}
		select {
		case <-w.exited:
			if w.err != nil {
				t.Fatalf("writer: %v", w.err)
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

// stalledFollow runs Follow on path into out through a StallWriter that
// is stalled from the start (and let go at cleanup, so Follow can return).
func stalledFollow(t *testing.T, path string, out io.Writer) *testutil.StallWriter {
	t.Helper()
	st := testutil.NewStallWriter(out)
	st.Stall()
	followTo(t, path, st, FollowOptions{Lines: -1, Keep: 3})
	t.Cleanup(st.Resume)
	return st
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
