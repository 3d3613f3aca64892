package reconciler

import (
	"bytes"
	"sort"
	"time"
)

// This file is the fleet watcher's confirmation rule: whether a read of the
// fleet files may be applied, as a pure function of the file events seen
// and the reads made. It does no I/O and reads no clock (times are
// arguments), so every rule is table-tested without a file system
// (files_confirm_test.go).

// quietPeriod is how long the content of a file whose writer cannot be
// known to have finished must stay unchanged before it is applied (DESIGN
// "Reconciling": 1 s), and how often a read waiting for a writer's close is
// repeated in case the close is never reported.
const quietPeriod = time.Second

// eventOp is what a file event says happened to a name, reduced to what
// confirmation needs.
type eventOp uint8

const (
	// opPlaced: a whole file was renamed or linked into place
	// (IN_MOVED_TO).
	opPlaced eventOp = iota + 1
	// opCreated: the file was created in place by open(O_CREAT)
	// (IN_CREATE); its writer may still have it open.
	opCreated
	// opAppeared: created or renamed into place, the two not told apart
	// (fsnotify's Create).
	opAppeared
	// opWritten: content written or truncated (IN_MODIFY, fsnotify's
	// Write).
	opWritten
	// opClosed: a writer closed the file (IN_CLOSE_WRITE).
	opClosed
	// opRemoved: removed or renamed away (IN_DELETE, IN_MOVED_FROM,
	// fsnotify's Remove and Rename); it may be back a moment later.
	opRemoved
	// opAttrib: metadata changed (IN_ATTRIB, fsnotify's Chmod): no new
	// content, but the file may have become unreadable.
	opAttrib
	// opLost: events were lost (an inotify queue overflow), or a watched
	// folder itself was removed or moved: nothing is known of any file.
	opLost
)

var opNames = [...]string{"", "placed", "created", "appeared", "written", "closed", "removed", "attrib", "lost"}

func (o eventOp) String() string {
	if int(o) < len(opNames) {
		return opNames[o]
	}
	return "unknown"
}

// fileState is what the events since the last settled read say about one
// file, from least to most in doubt.
type fileState uint8

const (
	// stateNone: no event since the last settled read.
	stateNone fileState = iota
	// stateProbed: the writer probe found nobody with the file open for
	// writing (a read-time fact, never left by an event).
	stateProbed
	// stateClosed: put into place whole, or closed by its writer after
	// its last write.
	stateClosed
	// stateAppeared: created or renamed into place, the two not told
	// apart.
	stateAppeared
	// stateUnknown: whether it is whole cannot be told from the events:
	// written where closes are not reported, created in place with its
	// close possibly missed (the content watch is added on the create),
	// removed, or events lost.
	stateUnknown
	// stateWriting: written, and its writer has not closed it since.
	stateWriting
)

var stateNames = [...]string{"none", "probed", "closed", "appeared", "unknown", "writing"}

func (s fileState) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return "invalid"
}

// next is the state a file is in after op, where closes says whether the
// platform reports writers' closes.
func (s fileState) next(op eventOp, closes bool) fileState {
	switch op {
	case opPlaced:
		return stateClosed
	case opCreated, opRemoved, opLost:
		return stateUnknown
	case opAppeared:
		return stateAppeared
	case opWritten:
		if closes {
			return stateWriting
		}
		return stateUnknown
	case opClosed:
		return stateClosed
	case opAttrib:
		return max(s, stateClosed)
	}
	return s
}

// probeResult is what the writer probe found for a file.
type probeResult uint8

const (
	// probeUnavailable: there is no probe here, or it could not be used
	// on this file (not its owner, a file system without leases, no
	// content watch to report its close).
	probeUnavailable probeResult = iota
	// probeNoWriter: nobody had the file open for writing.
	probeNoWriter
	// probeWriter: someone had it open for writing.
	probeWriter
)

// readFile is one file as a read found it.
type readFile struct {
	// keys name the file: its path, and its symlink target's when it is a
	// link (events arrive under either).
	keys []string
	// changed: the servers it declares differ from those it declared in
	// force, or it is new or gone, or that cannot be told (errors).
	changed bool
	// declares: it was read and declares at least one server.
	declares bool
	// probe is what the writer probe found after the read.
	probe probeResult
}

// readFacts is one read of the fleet files, with what was learnt around it.
type readFacts struct {
	// sig identifies the content read (servers, or errors).
	sig []byte
	// inForce: the read gives the fleet and errors in force.
	inForce bool
	// arrived: a file event that counts arrived during the read or its
	// probes (they are already given to the confirmer).
	arrived bool
	// explicit: Reload asked for this read; its caller has finished
	// saving.
	explicit bool
	// files are the files of this read and of the fleet in force.
	files []readFile
}

// verdictKind is what to do with a read.
type verdictKind uint8

const (
	// verdictSettled: the read is the fleet in force; nothing to apply.
	verdictSettled verdictKind = iota + 1
	// verdictApply: apply the read.
	verdictApply
	// verdictReread: read again after verdict.after (0: at once).
	verdictReread
	// verdictWriter: a changed file is open for writing: read again on
	// its close (an event), or after verdict.after in case the close is
	// never reported.
	verdictWriter
)

var verdictNames = [...]string{"", "settled", "apply", "reread", "writer"}

func (k verdictKind) String() string {
	if int(k) < len(verdictNames) {
		return verdictNames[k]
	}
	return "invalid"
}

// verdict is the confirmer's decision on a read.
type verdict struct {
	kind  verdictKind
	after time.Duration
	// why says why, for the log.
	why string
	// files are the keys of the changed files in doubt, sorted.
	files []string
}

// confirmer decides when a read of the fleet files may be applied, so that
// a file caught half-written never stops, replaces or starts a server:
//
//   - a read equal to the fleet in force is settled: nothing to do, and
//     what the events said is forgotten;
//   - a read asked for by Reload is applied once a second read at once
//     gives the same content, whatever the events (its caller has
//     finished saving);
//   - a read during which a file event counted is read again after the
//     debounce;
//   - otherwise only the files whose servers changed (or that are new or
//     gone) are judged, by the most doubtful of them:
//     a writer has it open (probe, or a write seen and no close): wait for
//     the close; nothing known of its writer (removed, events lost, a
//     write where closes are not reported, created with its close
//     possibly missed): apply once the content has been unchanged for
//     quietPeriod; appeared by a create that may be a rename: apply when
//     every changed file declares a server and a second read one debounce
//     later agrees, else as unknown; put into place whole or closed after
//     its writes, or no event at all: apply when a second read at once
//     agrees; the probe found no writer: apply.
//
// Why a probe alone suffices: a writer that had the file open during the
// read either still has it open at the probe, or closed it before; its
// close event is queued before the kernel stops counting it as a writer,
// and events are drained after the probes, so the read counts as one
// during which an event arrived.
type confirmer struct {
	// closes: the platform reports writers' closes (Linux inotify).
	closes bool
	// debounce is the quiet time after the last event before a read.
	debounce time.Duration

	files map[string]fileState // by key, since the last settled read
	lost  bool                 // events lost since the last settled read

	pending []byte    // the last read that differed from the fleet in force
	since   time.Time // when pending's content was first read
	quiet   bool      // no event counted since pending was last read
}

func newConfirmer(closes bool, debounce time.Duration) *confirmer {
	return &confirmer{closes: closes, debounce: debounce, files: map[string]fileState{}}
}

// event notes one file event that counts, on key (ignored for opLost).
func (c *confirmer) event(key string, op eventOp) {
	c.quiet = false
	if op == opLost {
		c.lost = true
		return
	}
	c.files[key] = c.files[key].next(op, c.closes)
}

// state is what the events say of key now.
func (c *confirmer) state(key string) fileState { return c.files[key] }

// settle forgets the events and the pending read: the files are as in
// force.
func (c *confirmer) settle() {
	clear(c.files)
	c.lost = false
	c.pending, c.quiet = nil, false
}

// judge decides what to do with the read r made at now. A read it applies
// settles the files, as one equal to the fleet in force does.
func (c *confirmer) judge(r readFacts, now time.Time) verdict {
	v := c.decide(r, now)
	if v.kind == verdictApply {
		c.settle()
	}
	return v
}

func (c *confirmer) decide(r readFacts, now time.Time) verdict {
	if r.explicit {
		return c.decideExplicit(r, now)
	}
	if r.arrived {
		// The read may have caught a file between two events: it is no
		// basis for a second read to agree with.
		c.pending, c.quiet = nil, false
		return verdict{kind: verdictReread, after: c.debounce, why: "files changed while being read"}
	}
	if r.inForce {
		c.settle()
		return verdict{kind: verdictSettled, why: "as in force"}
	}
	again := bytes.Equal(c.pending, r.sig) && c.quiet // a second read agrees, no event between
	if !bytes.Equal(c.pending, r.sig) {
		c.pending, c.since = r.sig, now
	}
	c.quiet = true

	worst, doubt := stateNone, map[fileState][]string{}
	allDeclare := true
	for _, f := range r.files {
		if !f.changed {
			continue
		}
		st := stateNone
		for _, k := range f.keys {
			st = max(st, c.files[k])
		}
		if c.lost {
			st = stateUnknown
		}
		switch {
		case f.probe == probeWriter:
			st = stateWriting
		case f.probe == probeNoWriter && !c.lost:
			st = stateProbed
		}
		if !f.declares {
			allDeclare = false
		}
		if len(f.keys) > 0 {
			doubt[st] = append(doubt[st], f.keys[0])
		}
		worst = max(worst, st)
	}
	if c.lost {
		worst = max(worst, stateUnknown) // a file gone with the lost events is in no list
	}
	if worst == stateAppeared && !allDeclare {
		// Created empty and not yet written, or an intended empty file:
		// no way to tell but to wait.
		worst = stateUnknown
		doubt[stateUnknown] = append(doubt[stateUnknown], doubt[stateAppeared]...)
	}
	files := doubt[worst]
	sort.Strings(files)

	switch worst {
	case stateWriting:
		return verdict{kind: verdictWriter, after: quietPeriod, why: "a changed file is open for writing", files: files}
	case stateUnknown:
		if waited := now.Sub(c.since); waited < quietPeriod {
			return verdict{kind: verdictReread, after: quietPeriod - waited, why: "whether a changed file is whole is unknown; waiting for its content to stay unchanged", files: files}
		}
		return verdict{kind: verdictApply, why: "content unchanged for the quiet period", files: files}
	case stateProbed:
		return verdict{kind: verdictApply, why: "no writer has a changed file open"}
	}
	// stateNone, stateClosed, stateAppeared: whole as far as events tell,
	// confirmed by a second read with no event between.
	if again {
		return verdict{kind: verdictApply, why: "confirmed by a second read"}
	}
	if worst == stateAppeared {
		// The backend that cannot tell a create from a rename (fsnotify)
		// also passes events on from a goroutine of its own: a write
		// that followed the create may not have been taken yet. The
		// debounce gives it time to arrive.
		return verdict{kind: verdictReread, after: c.debounce, why: "a second read after the debounce confirms", files: files}
	}
	return verdict{kind: verdictReread, why: "a second read confirms", files: files}
}

// decideExplicit judges a read Reload asked for: its caller has finished
// saving, so events (its own save's, arriving late) do not count; two
// reads in a row that agree do.
func (c *confirmer) decideExplicit(r readFacts, now time.Time) verdict {
	if r.inForce {
		c.settle()
		return verdict{kind: verdictSettled, why: "as in force"}
	}
	if bytes.Equal(c.pending, r.sig) {
		return verdict{kind: verdictApply, why: "reload asked for, confirmed by a second read"}
	}
	c.pending, c.since, c.quiet = r.sig, now, true
	return verdict{kind: verdictReread, why: "reload asked for; a second read confirms"}
}
