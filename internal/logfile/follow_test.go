package logfile

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/testr"

	"github.com/procfleet/procfleet/internal/testutil"
)

// follow runs Follow on path into a new buffer until the test ends.
func follow(t *testing.T, path string, opts FollowOptions) *testutil.SyncBuffer {
	t.Helper()
	out := testutil.NewSyncBuffer()
	opts.Log = testr.New(t)
	testutil.RunUntilCleanup(t, "Follow", func(ctx context.Context) error { return Follow(ctx, path, out, opts) })
	return out
}

// appender writes numbered lines through its own O_APPEND descriptor.
type appender struct {
	t    *testing.T
	f    *os.File
	next int
}

func newAppender(t *testing.T, path string) *appender {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return &appender{t: t, f: f}
}

// write appends n lines and returns the last one.
func (a *appender) write(n int) string {
	var last string
	for i := 0; i < n; i++ {
		last = fmt.Sprintf("%08d the quick brown fox jumps\n", a.next)
		if _, err := a.f.WriteString(last); err != nil {
			a.t.Fatal(err)
		}
		a.next++
	}
	return last
}

// numbered is what lines from..to-1 of an appender look like.
func numbered(from, to int) string {
	var b strings.Builder
	for i := from; i < to; i++ {
		fmt.Fprintf(&b, "%08d the quick brown fox jumps\n", i)
	}
	return b.String()
}

func TestFollowNewLines(t *testing.T) {
	path := writeFile(t, "old 1\nold 2\n")
	out := follow(t, path, FollowOptions{Lines: 1})
	out.WaitFor(t, "old 2\n")
	a := newAppender(t, path)
	last := a.write(3)
	out.WaitFor(t, last)
	if got, want := out.String(), "old 2\n"+numbered(0, 3); got != want {
		t.Errorf("Follow printed %q, want %q", got, want)
	}
}

func TestFollowWholeFile(t *testing.T) {
	path := writeFile(t, "a\nb\n")
	out := follow(t, path, FollowOptions{Lines: -1})
	out.WaitFor(t, "a\nb\n")
	if got := out.String(); got != "a\nb\n" {
		t.Errorf("Follow printed %q, want the whole file", got)
	}
}

func TestFollowMissing(t *testing.T) {
	err := Follow(context.Background(), filepath.Join(t.TempDir(), "none.log"), &bytes.Buffer{}, FollowOptions{})
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Follow of a missing log: %v, want a not-exist error", err)
	}
}

// TestFollowAcrossRotation: lines written before the follower read them and
// then rotated away, and lines written after the rotation, are all printed
// once, in order.
func TestFollowAcrossRotation(t *testing.T) {
	inEachRotationMode(t, func(t *testing.T, dir string, _ bool) {
		path := filepath.Join(dir, "api.log")
		a := newAppender(t, path)
		out := follow(t, path, FollowOptions{Lines: -1})
		for round := 0; round < 4; round++ {
			out.WaitFor(t, a.write(300))
			a.write(150) // not yet seen, maybe, when the rotation cuts them
			if err := Rotate(path, Options{}); err != nil {
				t.Fatal(err)
			}
			out.WaitFor(t, a.write(150))
		}
		if got, want := out.String(), numbered(0, a.next); got != want {
			t.Errorf("Follow printed %d bytes, want %d: lines lost, repeated or out of order", len(got), len(want))
		}
	})
}

// TestFollowResumeNearStartOfLive: a cut that leaves the follower's place
// less than a fingerprint (256 bytes) into the live file. Its fingerprint
// then reaches back into the copy, which the live file never held; it was
// compared whole against the live file, failed, and Follow waited 2 s and
// printed the live file again from its start (seen as 91-202 repeated
// bytes in TestFollowAcrossRotation under load).
func TestFollowResumeNearStartOfLive(t *testing.T) {
	dir := t.TempDir()
	if !collapseWorks(t, dir) {
		t.Skipf("fallocate COLLAPSE_RANGE is not supported in %s", dir)
	}
	path := filepath.Join(dir, "api.log")
	a := newAppender(t, path)
	out := follow(t, path, FollowOptions{Lines: -1})
	// 118 lines of 35 bytes: 4,130 bytes, so a cut at the 4,096-byte block
	// boundary leaves the follower 34 bytes into the live file.
	out.WaitFor(t, a.write(118))
	if err := Rotate(path, Options{}); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() != 4130%4096 {
		t.Skipf("the cut left %d bytes, not %d: the file system's block is not 4,096 bytes", fi.Size(), 4130%4096)
	}
	out.WaitFor(t, a.write(10))
	if got, want := out.String(), numbered(0, 128); got != want {
		t.Errorf("Follow printed %d bytes, want %d: lines lost or repeated after the cut", len(got), len(want))
	}
}

// TestFollowRenameRotation: a rotator that renames the log and creates a new
// one (logrotate's default) is followed too.
func TestFollowRenameRotation(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "api.log")
	old := newAppender(t, path)
	out := follow(t, path, FollowOptions{Lines: -1}) // from 0: the writes may come before Follow opens
	out.WaitFor(t, old.write(5))
	if err := os.Rename(path, RotatedPath(path, 1)); err != nil {
		t.Fatal(err)
	}
	old.write(5) // still to the renamed file, as the server's descriptor does
	fresh := newAppender(t, path)
	fresh.next = old.next
	out.WaitFor(t, fresh.write(5))
	if got, want := out.String(), numbered(0, 15); got != want {
		t.Errorf("Follow printed %q, want %q", got, want)
	}
}

// TestFollowWriterProcess: a separate process writes through its O_APPEND
// stdout, as a server does, in batches; the log is rotated between batches;
// the follower prints every line once, in order.
func TestFollowWriterProcess(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "api.log")
	const batch, batches = 2000, 6
	stdin := startWriter(t, path, batch*batches, batch, false).stdin
	out := follow(t, path, FollowOptions{Lines: -1})
	for i := 0; i < batches; i++ {
		if _, err := stdin.Write([]byte{'x'}); err != nil {
			t.Fatal(err)
		}
		out.WaitFor(t, numbered((i+1)*batch-1, (i+1)*batch))
		if err := Rotate(path, Options{}); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := out.String(), numbered(0, batch*batches); got != want {
		t.Errorf("Follow printed %d bytes, want %d: lines lost, repeated or out of order", len(got), len(want))
	}
}

// TestFollowForeignCopy: a <path>.1 that appears without a cut (someone
// copied the log by hand) costs a short wait, not a repeat of the log.
func TestFollowForeignCopy(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "api.log")
	a := newAppender(t, path)
	out := follow(t, path, FollowOptions{Lines: -1})
	out.WaitFor(t, a.write(10))
	if err := os.WriteFile(RotatedPath(path, 1), []byte("not a copy\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out.WaitFor(t, a.write(10))
	if got, want := out.String(), numbered(0, 20); got != want {
		t.Errorf("Follow printed %q, want %q", got, want)
	}
}

// TestIntegrateTwoCutsAtOnce: the reader has read the live file to its end,
// past where the first of two rotations cut it (collapse cuts at a block
// boundary); both rotations are taken in at once. The bytes before the
// read position were moved by the second cut into the second copy: found
// there, the position goes into that copy, where reading on gives exactly
// what follows. (Looked for in the live file, they were not found, the
// first copy was taken for a stranger's, and the reader started the live
// file over: 2,000 lines lost without a marker, 1 run in 20 under load.)
func TestIntegrateTwoCutsAtOnce(t *testing.T) {
	dir := t.TempDir()
	if !collapseWorks(t, dir) {
		t.Skipf("fallocate COLLAPSE_RANGE is not supported in %s", dir)
	}
	path := filepath.Join(dir, "api.log")
	a := newAppender(t, path)
	a.write(3000) // 105,000 bytes: not a multiple of the block size

	s := newStream(dir, "api")
	s.setup(-1, 3, logr.Discard())
	t.Cleanup(s.close)
	live := s.liveSeg()
	read := int64(3000 * 35) // the reader is at the end
	live.pos = read
	s.fp, _ = lastBytes(live.file.f, read, fingerprintLen)

	// The first cut is at 102,400 (the last block boundary before the
	// end), before the reader's place; the second takes the rest of what
	// the reader read, and more.
	if err := Rotate(path, Options{Keep: 3}); err != nil {
		t.Fatal(err)
	}
	a.write(3000)
	if err := Rotate(path, Options{Keep: 3}); err != nil {
		t.Fatal(err)
	}
	if !s.integrate(3, logr.Discard()) {
		t.Fatal("integrate moved nothing after two rotations")
	}
	// What the reader reads from its new place on is what follows line 2999.
	var got bytes.Buffer
	for _, seg := range s.segs {
		if _, err := io.Copy(&got, io.NewSectionReader(seg.file.f, seg.pos, 1<<30)); err != nil {
			t.Fatal(err)
		}
	}
	if want := numbered(3000, a.next); got.String() != want {
		t.Errorf("after two cuts taken in at once the reader would print %d bytes starting %q, want %d starting %q",
			got.Len(), got.String()[:min(got.Len(), 40)], len(want), want[:40])
	}
}
