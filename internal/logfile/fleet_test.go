package logfile

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/procfleet/procfleet/internal/testutil"
)

func writeTo(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// appendTo appends to the file at path through an O_APPEND descriptor, as a
// server writes.
func appendTo(t *testing.T, path, content string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(content); err != nil {
		t.Fatal(err)
	}
}

// runFleet starts a Fleet on dir for names, following, until the test ends.
func runFleet(t *testing.T, cfg FleetConfig, names ...string) (*Fleet, *testutil.SyncBuffer) {
	t.Helper()
	out := testutil.NewSyncBuffer()
	cfg.Out, cfg.Follow, cfg.Log = out, true, testr.New(t)
	fl, err := NewFleet(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := fl.Add(names...); err != nil {
		t.Fatal(err)
	}
	testutil.RunUntilCleanup(t, "Fleet.Run", fl.Run)
	return fl, out
}

// TestFleetPrefixesAndInterleaves: what the logs hold comes first, one
// server after the other, each line after its padded name; then new lines
// come in the order they are written, whichever server writes them.
func TestFleetPrefixesAndInterleaves(t *testing.T) {
	dir := t.TempDir()
	writeTo(t, filepath.Join(dir, "api.log"), "a1\na2\n")
	writeTo(t, filepath.Join(dir, "backend.log"), "b1\n")
	writeTo(t, filepath.Join(dir, "web.log"), "")
	_, out := runFleet(t, FleetConfig{Dir: dir, Lines: -1, Prefix: true}, "api", "backend", "web")
	history := "api     | a1\napi     | a2\nbackend | b1\n"
	out.WaitFor(t, history)

	want := history
	for _, w := range []struct{ name, line string }{
		{"web", "w1"}, {"api", "a3"}, {"web", "w2"}, {"backend", "b2"}, {"api", "a4"},
	} {
		appendTo(t, filepath.Join(dir, w.name+".log"), w.line+"\n")
		line := fmt.Sprintf("%-7s | %s\n", w.name, w.line)
		out.WaitFor(t, line)
		want += line
	}
	if got := out.String(); got != want {
		t.Errorf("output:\n%s\nwant:\n%s", got, want)
	}
}

func TestFleetColors(t *testing.T) {
	dir := t.TempDir()
	writeTo(t, filepath.Join(dir, "api.log"), "hello\n")
	_, out := runFleet(t, FleetConfig{Dir: dir, Lines: -1, Prefix: true, Color: true}, "api")
	want := "\x1b[" + colorOf("api") + "mapi | \x1b[0mhello\n"
	out.WaitFor(t, want)
}

// startEvent is a line of an events file as the reconciler writes it.
func startEvent(pid int, at time.Time) string {
	return fmt.Sprintf(`{"time":%q,"server":"api","type":"Normal","reason":"Started","message":"started pid %d (\"./api\"), start time 1"}`+"\n",
		at.UTC().Format(time.RFC3339Nano), pid)
}

// TestFleetStartMarkers: a start event appended to the server's events file
// shows as a marker line before the lines written after it; older events
// are not shown; the marker still comes after the events file is rotated
// (renamed to .1 and created again, as the reconciler does).
func TestFleetStartMarkers(t *testing.T) {
	dir := t.TempDir()
	log, events := filepath.Join(dir, "api.log"), filepath.Join(dir, EventsFile("api"))
	writeTo(t, log, "old\n")
	at := time.Date(2026, 12, 1, 10, 0, 5, 0, time.Local)
	writeTo(t, events, startEvent(100, at))
	_, out := runFleet(t, FleetConfig{Dir: dir, Lines: -1, Markers: true}, "api")
	out.WaitFor(t, "old\n")

	appendTo(t, events, `{"time":"2026-12-01T10:00:06Z","reason":"Exited","message":"exited with code 1"}`+"\n")
	appendTo(t, events, startEvent(200, at))
	appendTo(t, log, "new\n")
	out.WaitFor(t, "new\n")

	if err := os.Rename(events, events+".1"); err != nil {
		t.Fatal(err)
	}
	appendTo(t, events, startEvent(300, at))
	appendTo(t, log, "newer\n")
	out.WaitFor(t, "newer\n")

	want := "old\n" +
		"--- procfleet: started pid 200 at 2026-12-01 10:00:05 ---\nnew\n" +
		"--- procfleet: started pid 300 at 2026-12-01 10:00:05 ---\nnewer\n"
	if got := out.String(); got != want {
		t.Errorf("output:\n%s\nwant:\n%s", got, want)
	}
}

// TestFleetLateLogAndAdd: a server whose log does not exist yet is
// printed from its first line once the log appears; a server added while
// Run runs is followed too, and widens the prefixes.
func TestFleetLateLogAndAdd(t *testing.T) {
	dir := t.TempDir()
	fl, out := runFleet(t, FleetConfig{Dir: dir, Prefix: true}, "api")
	appendTo(t, filepath.Join(dir, "api.log"), "first\n")
	out.WaitFor(t, "api | first\n")

	writeTo(t, filepath.Join(dir, "backend.log"), "before\n") // Lines 0: not shown
	if err := fl.Add("backend"); err != nil {
		t.Fatal(err)
	}
	appendTo(t, filepath.Join(dir, "backend.log"), "after\n")
	out.WaitFor(t, "backend | after\n")
	appendTo(t, filepath.Join(dir, "api.log"), "second\n")
	out.WaitFor(t, "api     | second\n")
	if strings.Contains(out.String(), "before") {
		t.Errorf("a line written before Add was shown with Lines 0:\n%s", out.String())
	}
	if err := fl.Add("../x"); err == nil {
		t.Errorf("Add of a path was accepted")
	}
}

// TestFleetNoFollow: without Follow, Run prints what the logs hold and
// returns; a last line without its line feed is printed as it is without
// prefix, and completed with one after a prefix.
func TestFleetNoFollow(t *testing.T) {
	dir := t.TempDir()
	writeTo(t, filepath.Join(dir, "api.log"), "a1\na2")
	writeTo(t, RotatedPath(filepath.Join(dir, "api.log"), 1), "a0\n")
	writeTo(t, filepath.Join(dir, "db.log"), "d1\n")
	for _, tt := range []struct {
		prefix bool
		lines  int
		names  []string
		want   string
	}{
		{false, -1, []string{"api"}, "a0\na1\na2"},
		{false, 2, []string{"api"}, "a1\na2"},
		{true, -1, []string{"api", "db"}, "api | a0\napi | a1\napi | a2\ndb  | d1\n"},
		{true, 1, []string{"db", "api"}, "db  | d1\napi | a2\n"},
		{true, 0, []string{"db", "api"}, ""},
	} {
		var out bytes.Buffer
		fl, err := NewFleet(FleetConfig{Dir: dir, Out: &out, Lines: tt.lines, Prefix: tt.prefix})
		if err != nil {
			t.Fatal(err)
		}
		if err := fl.Add(tt.names...); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err = fl.Run(ctx)
		cancel()
		if err != nil || out.String() != tt.want {
			t.Errorf("prefix %v, lines %d, %v: %q, %v; want %q", tt.prefix, tt.lines, tt.names, out.String(), err, tt.want)
		}
	}
}

// TestFleetFIFONeverHangs: a FIFO at a log's path (which an ordinary open
// would wait on for a writer) is not read, and Run neither hangs nor
// fails; the other servers are printed.
func TestFleetFIFONeverHangs(t *testing.T) {
	dir := t.TempDir()
	if err := syscall.Mkfifo(filepath.Join(dir, "api.log"), 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	writeTo(t, filepath.Join(dir, "db.log"), "d1\n")
	var out bytes.Buffer
	fl, err := NewFleet(FleetConfig{Dir: dir, Out: &out, Lines: -1, Log: testr.New(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := fl.Add("api", "db"); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- fl.Run(context.Background()) }()
	select {
	case err := <-done:
		if err != nil || out.String() != "d1\n" {
			t.Errorf("Run = %v, output %q; want nil and db's line", err, out.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run hung on a FIFO at a log path")
	}
}

// timerClock is a fake clock that says when a timer is set on it, so a
// test steps it once the follower waits on it.
type timerClock struct {
	*clocktesting.FakeClock
	set chan struct{}
}

func (c *timerClock) AfterFunc(d time.Duration, f func()) clock.Timer {
	t := c.FakeClock.AfterFunc(d, f)
	select {
	case c.set <- struct{}{}:
	default:
	}
	return t
}

// TestFleetInterruptedRotation: a rotation that died leaves
// <log>.1.tmp behind. The follower waits for its copy (a rotation under
// way) until the tmp file has stood unchanged for staleTmpAfter, then goes
// on: from where it was when the rotation died before its cut; through the
// copy when it died after (the truncate mode's cut), so nothing is printed
// twice or lost.
func TestFleetInterruptedRotation(t *testing.T) {
	for _, cutDone := range []bool{false, true} {
		t.Run(fmt.Sprintf("cut done %v", cutDone), func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "api.log")
			writeTo(t, path, numbered(0, 10))
			clk := &timerClock{FakeClock: clocktesting.NewFakeClock(time.Now()), set: make(chan struct{}, 1)}
			_, out := runFleet(t, FleetConfig{Dir: dir, Lines: -1, Clock: clk}, "api")
			out.WaitFor(t, numbered(0, 10))

			// The rotation's copy, and (after the cut) a live file holding
			// only what was written since.
			writeTo(t, RotatedPath(path, 1)+tmpSuffix, numbered(0, 12))
			if cutDone {
				writeTo(t, path, numbered(12, 14))
			} else {
				appendTo(t, path, numbered(10, 14))
			}
			select {
			case <-clk.set:
			case <-time.After(30 * time.Second):
				t.Fatal("the follower never waited on the rotation's copy")
			}
			if got := out.String(); got != numbered(0, 10) {
				t.Fatalf("printed during a rotation under way: %q", got)
			}
			clk.Step(staleTmpAfter)
			out.WaitFor(t, numberedLine(13))
			if got, want := out.String(), numbered(0, 14); got != want {
				t.Errorf("after an interrupted rotation: %q, want %q", got, want)
			}
		})
	}
}

// TestFleetTruncatedByHand: a log cut without a rotated copy (truncate(1),
// a rotator that is not Rotate) is read again from its start, after a
// marker line: what was lost is not known, so it is said, not hidden.
func TestFleetTruncatedByHand(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "api.log")
	writeTo(t, path, "one\ntwo\n")
	_, out := runFleet(t, FleetConfig{Dir: dir, Lines: -1}, "api")
	out.WaitFor(t, "one\ntwo\n")
	if err := os.Truncate(path, 0); err != nil {
		t.Fatal(err)
	}
	appendTo(t, path, "3\n") // shorter than what was read: the cut shows
	out.WaitFor(t, "3\n")
	if got, want := out.String(), "one\ntwo\n"+truncatedMarker+"\n3\n"; got != want {
		t.Errorf("output %q, want %q", got, want)
	}
}

// TestFleetPrintsWhatWasWrittenBeforeTheEnd: lines written just before the
// context ends are printed before Run returns (up --attach stopping after
// its servers' last words).
func TestFleetPrintsWhatWasWrittenBeforeTheEnd(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "api.log")
	writeTo(t, path, "")
	out := testutil.NewSyncBuffer()
	fl, err := NewFleet(FleetConfig{Dir: dir, Out: out, Follow: true, Log: testr.New(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := fl.Add("api"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- fl.Run(ctx) }()
	appendTo(t, path, "first\n")
	out.WaitFor(t, "first\n")

	var want strings.Builder
	want.WriteString("first\n")
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for i := range 2000 {
		line := fmt.Sprintf("last words %d\n", i)
		if _, err := f.WriteString(line); err != nil {
			t.Fatal(err)
		}
		want.WriteString(line)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return 30 s after its context ended")
	}
	if got := out.String(); got != want.String() {
		t.Errorf("printed %d bytes, want %d: the lines written before the end are not all there", len(got), want.Len())
	}
}
