package reconciler

import (
	"fmt"
	"testing"
	"time"
)

func TestFileStateNext(t *testing.T) {
	for _, tc := range []struct {
		from   fileState
		op     eventOp
		closes bool
		want   fileState
	}{
		{stateNone, opPlaced, true, stateClosed},
		{stateNone, opPlaced, false, stateClosed},
		{stateWriting, opPlaced, true, stateClosed}, // a new inode in place of the written one
		{stateNone, opCreated, true, stateUnknown},  // its close may come before its watch
		{stateClosed, opCreated, true, stateUnknown},
		{stateNone, opAppeared, false, stateAppeared},
		{stateNone, opWritten, true, stateWriting},
		{stateNone, opWritten, false, stateUnknown}, // no close will say it is done
		{stateClosed, opWritten, true, stateWriting},
		{stateUnknown, opWritten, true, stateWriting},
		{stateWriting, opClosed, true, stateClosed},
		{stateUnknown, opClosed, true, stateClosed}, // created, then closed: whole
		{stateNone, opRemoved, true, stateUnknown},
		{stateClosed, opRemoved, false, stateUnknown},
		{stateNone, opAttrib, true, stateClosed},
		{stateWriting, opAttrib, true, stateWriting}, // a chmod is no close
		{stateUnknown, opAttrib, false, stateUnknown},
		{stateClosed, opLost, true, stateUnknown},
	} {
		t.Run(fmt.Sprintf("%s %s closes=%v", tc.from, tc.op, tc.closes), func(t *testing.T) {
			if got := tc.from.next(tc.op, tc.closes); got != tc.want {
				t.Errorf("%s.next(%s) = %s, want %s", tc.from, tc.op, got, tc.want)
			}
		})
	}
}

// TestConfirmerJudge drives the confirmer through sequences of events and
// reads, as the watcher would, and checks every verdict: each row of the
// confirmation rule (see confirmer) is a case here.
func TestConfirmerJudge(t *testing.T) {
	const debounce = 30 * time.Millisecond
	type ev struct {
		key string
		op  eventOp
	}
	// file builds a readFile of one key.
	file := func(key string, changed, declares bool, probe probeResult) readFile {
		return readFile{keys: []string{key}, changed: changed, declares: declares, probe: probe}
	}
	changedA := file("/f/a.yaml", true, true, probeUnavailable)
	unchangedB := file("/f/b.yaml", false, true, probeUnavailable)
	read := func(sig string, files ...readFile) readFacts {
		return readFacts{sig: []byte(sig), files: files}
	}
	type step struct {
		events    []ev
		at        time.Duration // since the start
		read      readFacts
		want      verdictKind
		wantAfter time.Duration
		wantFiles []string // checked when not nil
	}
	for _, tc := range []struct {
		name   string
		closes bool
		steps  []step
	}{
		{"as in force: settled, events forgotten", true, []step{
			{events: []ev{{"/f/a.yaml", opWritten}}, read: readFacts{sig: []byte("x"), inForce: true}, want: verdictSettled},
			// a.yaml's write was forgotten: no writer is assumed now.
			{at: debounce, read: read("y", changedA), want: verdictReread},
		}},
		{"events during the read: again after the debounce", true, []step{
			{read: readFacts{sig: []byte("y"), arrived: true, files: []readFile{changedA}}, want: verdictReread, wantAfter: debounce},
			// That read is no basis: the next one needs its own second read.
			{at: debounce, read: read("y", changedA), want: verdictReread},
			{at: debounce, read: read("y", changedA), want: verdictApply},
		}},
		{"events during a read that matches the fleet in force", true, []step{
			{events: []ev{{"/f/a.yaml", opWritten}}, read: readFacts{sig: []byte("x"), inForce: true, arrived: true}, want: verdictReread, wantAfter: debounce},
			// Not settled: the write is still known.
			{at: debounce, read: read("y", changedA), want: verdictWriter, wantAfter: quietPeriod},
		}},
		{"reload: a second read at once confirms", true, []step{
			{events: []ev{{"/f/a.yaml", opWritten}}, read: readFacts{sig: []byte("y"), explicit: true, files: []readFile{changedA}}, want: verdictReread},
			{read: readFacts{sig: []byte("y"), explicit: true, files: []readFile{changedA}}, want: verdictApply},
		}},
		{"reload: events during its reads do not count", true, []step{
			{events: []ev{{"/f/a.yaml", opWritten}}, read: readFacts{sig: []byte("y"), explicit: true, arrived: true, files: []readFile{changedA}}, want: verdictReread},
			{events: []ev{{"/f/a.yaml", opClosed}}, read: readFacts{sig: []byte("y"), explicit: true, arrived: true, files: []readFile{changedA}}, want: verdictApply},
		}},
		{"reload: as in force", true, []step{
			{events: []ev{{"/f/a.yaml", opWritten}}, read: readFacts{sig: []byte("x"), explicit: true, inForce: true}, want: verdictSettled},
			{read: read("y", changedA), want: verdictReread}, // the write was forgotten
		}},
		{"reload: reads that differ are read again", true, []step{
			{read: readFacts{sig: []byte("y"), explicit: true}, want: verdictReread},
			{read: readFacts{sig: []byte("z"), explicit: true}, want: verdictReread},
			{read: readFacts{sig: []byte("z"), explicit: true}, want: verdictApply},
		}},
		{"in-place save: waits for the writer's close, however long", true, []step{
			{events: []ev{{"/f/a.yaml", opWritten}}, at: debounce, read: read("half", changedA), want: verdictWriter, wantAfter: quietPeriod, wantFiles: []string{"/f/a.yaml"}},
			{at: debounce + quietPeriod, read: read("half", changedA), want: verdictWriter, wantAfter: quietPeriod},
			{at: 10 * quietPeriod, read: read("half", changedA), want: verdictWriter, wantAfter: quietPeriod},
			{events: []ev{{"/f/a.yaml", opWritten}, {"/f/a.yaml", opClosed}}, at: 11 * quietPeriod, read: read("whole", changedA), want: verdictReread},
			{at: 11 * quietPeriod, read: read("whole", changedA), want: verdictApply},
		}},
		{"probe: a writer has the file open", true, []step{
			{events: []ev{{"/f/a.yaml", opPlaced}}, read: read("y", file("/f/a.yaml", true, true, probeWriter)), want: verdictWriter, wantAfter: quietPeriod},
		}},
		{"probe: no writer, applied at once", true, []step{
			{events: []ev{{"/f/a.yaml", opWritten}}, read: read("y", file("/f/a.yaml", true, true, probeNoWriter)), want: verdictApply},
		}},
		{"probe: created in place, its close missed, no writer now", true, []step{
			{events: []ev{{"/f/a.yaml", opCreated}}, read: read("y", file("/f/a.yaml", true, true, probeNoWriter)), want: verdictApply},
		}},
		{"no probe, created in place: 1 s of unchanged content", true, []step{
			{events: []ev{{"/f/a.yaml", opCreated}}, at: debounce, read: read("y", changedA), want: verdictReread, wantAfter: quietPeriod},
			{at: debounce + 400*time.Millisecond, read: read("y", changedA), want: verdictReread, wantAfter: 600 * time.Millisecond},
			{at: debounce + quietPeriod, read: read("y", changedA), want: verdictApply},
		}},
		{"no closes (elsewhere): a write waits for 1 s of unchanged content", false, []step{
			{events: []ev{{"/f/a.yaml", opWritten}}, at: debounce, read: read("half", changedA), want: verdictReread, wantAfter: quietPeriod},
			// More written: the quiet period starts again from this content.
			{events: []ev{{"/f/a.yaml", opWritten}}, at: 600 * time.Millisecond, read: read("whole", changedA), want: verdictReread, wantAfter: quietPeriod},
			// A chmod changes no content and does not restart it.
			{events: []ev{{"/f/a.yaml", opAttrib}}, at: 1200 * time.Millisecond, read: read("whole", changedA), want: verdictReread, wantAfter: 400 * time.Millisecond},
			{at: 1600 * time.Millisecond, read: read("whole", changedA), want: verdictApply},
		}},
		{"a removed file: 1 s, then its servers go", true, []step{
			{events: []ev{{"/f/a.yaml", opRemoved}}, read: read("gone", file("/f/a.yaml", true, false, probeUnavailable)), want: verdictReread, wantAfter: quietPeriod},
			{at: quietPeriod, read: read("gone", file("/f/a.yaml", true, false, probeUnavailable)), want: verdictApply},
		}},
		{"vim-style save read between rename and create: nothing applied", true, []step{
			{events: []ev{{"/f/a.yaml", opRemoved}}, read: read("gone", file("/f/a.yaml", true, false, probeUnavailable)), want: verdictReread, wantAfter: quietPeriod},
			{events: []ev{{"/f/a.yaml", opCreated}, {"/f/a.yaml", opWritten}, {"/f/a.yaml", opClosed}}, at: 50 * time.Millisecond, read: read("new", file("/f/a.yaml", true, true, probeNoWriter)), want: verdictApply},
		}},
		{"events lost: 1 s even when the probe finds no writer", true, []step{
			{events: []ev{{"", opLost}}, read: read("y", file("/f/a.yaml", true, true, probeNoWriter)), want: verdictReread, wantAfter: quietPeriod},
			{at: quietPeriod, read: read("y", file("/f/a.yaml", true, true, probeNoWriter)), want: verdictApply},
		}},
		{"events lost and a writer open: waits for the close", true, []step{
			{events: []ev{{"", opLost}}, read: read("y", file("/f/a.yaml", true, true, probeWriter)), want: verdictWriter, wantAfter: quietPeriod},
		}},
		{"events lost with no changed file read (a folder file gone): 1 s", true, []step{
			{events: []ev{{"", opLost}}, read: read("y"), want: verdictReread, wantAfter: quietPeriod},
		}},
		{"atomic save without a probe: a second read confirms", false, []step{
			{events: []ev{{"/f/a.yaml", opPlaced}}, read: read("y", changedA, unchangedB), want: verdictReread},
			{read: read("y", changedA, unchangedB), want: verdictApply},
		}},
		{"a second read that differs, or an event between, is no confirmation", false, []step{
			{events: []ev{{"/f/a.yaml", opPlaced}}, read: read("y", changedA), want: verdictReread},
			{read: read("z", changedA), want: verdictReread},
			{events: []ev{{"/f/a.yaml", opPlaced}}, read: read("z", changedA), want: verdictReread},
			{read: read("z", changedA), want: verdictApply},
		}},
		{"appeared (fsnotify Create), declaring servers: a second read one debounce later confirms", false, []step{
			{events: []ev{{"/f/a.yaml", opAppeared}}, read: read("y", changedA), want: verdictReread, wantAfter: debounce},
			{at: debounce, read: read("y", changedA), want: verdictApply},
		}},
		{"appeared, then a write arrives late: 1 s", false, []step{
			{events: []ev{{"/f/a.yaml", opAppeared}}, read: read("half", changedA), want: verdictReread, wantAfter: debounce},
			{events: []ev{{"/f/a.yaml", opWritten}}, at: debounce, read: read("whole", changedA), want: verdictReread, wantAfter: quietPeriod},
		}},
		{"appeared, declaring no server: 1 s", false, []step{
			{events: []ev{{"/f/a.yaml", opAppeared}}, read: read("y", file("/f/a.yaml", true, false, probeUnavailable)), want: verdictReread, wantAfter: quietPeriod, wantFiles: []string{"/f/a.yaml"}},
			{at: quietPeriod, read: read("y", file("/f/a.yaml", true, false, probeUnavailable)), want: verdictApply},
		}},
		{"an unchanged file's writer holds nothing back", true, []step{
			{events: []ev{{"/f/a.yaml", opPlaced}, {"/f/b.yaml", opWritten}}, read: read("y",
				file("/f/a.yaml", true, true, probeNoWriter), file("/f/b.yaml", false, true, probeWriter)), want: verdictApply},
		}},
		{"the most doubtful changed file decides", true, []step{
			{events: []ev{{"/f/a.yaml", opPlaced}, {"/f/b.yaml", opWritten}, {"/f/c.yaml", opRemoved}}, read: read("y",
				file("/f/a.yaml", true, true, probeNoWriter), file("/f/b.yaml", true, true, probeUnavailable), file("/f/c.yaml", true, false, probeUnavailable)),
				want: verdictWriter, wantAfter: quietPeriod, wantFiles: []string{"/f/b.yaml"}},
		}},
		{"a symlinked file: events on its target count", true, []step{
			{events: []ev{{"/elsewhere/real.yaml", opWritten}}, read: read("y",
				readFile{keys: []string{"/f/procfleet.yaml", "/elsewhere/real.yaml"}, changed: true, declares: true}),
				want: verdictWriter, wantAfter: quietPeriod, wantFiles: []string{"/f/procfleet.yaml"}},
		}},
		{"events on a name that is no file (a ConfigMap's ..data): a second read confirms", true, []step{
			{events: []ev{{"/f/..data", opPlaced}}, read: read("y", changedA), want: verdictReread},
			{read: read("y", changedA), want: verdictApply},
		}},
		{"a writer's stale state on a file not changed now does not count", true, []step{
			{events: []ev{{"/f/b.yaml", opWritten}, {"/f/a.yaml", opPlaced}}, read: read("y", changedA, unchangedB), want: verdictReread},
			{read: read("y", changedA, unchangedB), want: verdictApply},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newConfirmer(tc.closes, debounce)
			t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
			for i, s := range tc.steps {
				for _, e := range s.events {
					c.event(e.key, e.op)
				}
				v := c.judge(s.read, t0.Add(s.at))
				if v.kind != s.want || v.after != s.wantAfter {
					t.Fatalf("step %d: verdict %s after %v (%s), want %s after %v", i, v.kind, v.after, v.why, s.want, s.wantAfter)
				}
				if s.wantFiles != nil && fmt.Sprint(v.files) != fmt.Sprint(s.wantFiles) {
					t.Errorf("step %d: files in doubt %v, want %v", i, v.files, s.wantFiles)
				}
				if v.why == "" {
					t.Errorf("step %d: verdict %s gives no reason", i, v.kind)
				}
			}
		})
	}
}
