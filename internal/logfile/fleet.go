package logfile

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/utils/clock"
)

// Tuning of the fleet follower.
const (
	// logExt ends the name of a server's live log.
	logExt = ".log"
	// readChunk is the most read from a log at once.
	readChunk = 64 << 10
	// turnBytes is the most printed of one server before the others that
	// have output waiting get their turn.
	turnBytes = 256 << 10
	// DefaultPoll is how often the logs are looked at when the folder
	// cannot be watched (no inotify instance left, say).
	DefaultPoll = time.Second
	// waitPoll paces the wait, without a watcher, for a rotation under way
	// to put its copy in place.
	waitPoll = 10 * time.Millisecond
)

// FleetConfig configures a Fleet. Dir and Out are required; every other
// zero value means what its comment says.
type FleetConfig struct {
	// Dir is the folder of the logs (the state folder's logs/): each
	// server's log is <Dir>/<name>.log, its rotated copies <name>.log.1
	// (the newest) and up, its events <name>.events.jsonl.
	Dir string
	// Out receives the output: whole lines only, each server's lines in
	// order. It is written by one goroutine.
	Out io.Writer
	// Lines is how many of each log's last lines are printed first: 0
	// none, negative all of it (the rotated copies first).
	Lines int
	// Follow keeps printing what the servers write, as it arrives, until
	// the context ends; false prints what the logs hold and returns.
	Follow bool
	// Prefix starts each line with "name | ", the names padded to the
	// longest one followed.
	Prefix bool
	// Color colors each prefix (ANSI escapes), with a color chosen by the
	// server's name. Only with Prefix.
	Color bool
	// Markers, while following, prints a line where a server was started
	// (from its events file), with the time and its pid.
	Markers bool
	// Keep is how many rotated copies the rotator keeps (Options.Keep; 0
	// means DefaultKeep). A follower that falls further behind than that
	// gives up the oldest unread copy, and says how many bytes it skipped.
	Keep int
	// Log receives what cannot be followed, and why. The zero value
	// discards.
	Log logr.Logger
	// Clock times the wait for a rotation's copy that was left unfinished
	// (staleTmpAfter); nil means the real clock.
	Clock clock.WithDelayedExecution
}

// Fleet prints the logs of several servers: first what each already holds
// (as much as Lines says, one server after the other), then, while
// following, every line as it arrives, interleaved in arrival order.
//
// Guarantees:
//   - Each line is printed whole, exactly once, and a server's lines in the
//     order written, across rotations (copy-then-cut by Rotate, or a
//     rename) and restarts, however slowly Out takes them: a rotation while
//     Out blocks moves nothing that is not found again.
//   - When more rotations than Keep happen while Out blocks, the output of
//     the copies removed meanwhile is skipped, with one marker line that
//     says how many bytes; the lines around it are whole.
//   - A line whose line feed has not been written yet is held (up to 1 MiB)
//     until it is; it is let out when Run returns.
//   - Nothing runs while nothing is written: the folder is watched by the
//     kernel (inotify on Linux), without polling.
type Fleet struct {
	cfg FleetConfig

	mu      sync.Mutex // guards what follows, and the streams' shared fields
	streams []*stream
	files   map[string]fileRef // base name of each followed file -> its stream
	queue   []*stream          // streams with something to read, in arrival order
	width   int                // of the longest name
	w       watcher            // while Run follows
	started bool

	// The guard watches the folder while a write to Out blocks (see out).
	guard     *time.Timer
	guardMu   sync.Mutex
	guardStop bool
	guardDone chan error
}

// watcher is what Run needs of a folder watch (watch_linux.go,
// watch_other.go, pollWatch).
type watcher interface {
	// wait blocks until something changed and reports it, or until wake.
	wait(changed func(name []byte, renamed bool), overflow func()) error
	// wake makes the current or next wait return at once.
	wake()
	close() error
}

// fileRef says which file of which stream a name in Dir is.
type fileRef struct {
	s    *stream
	kind fileKind
}

type fileKind int

const (
	kindLive fileKind = iota
	kindCopy          // <log>.1 and <log>.1.tmp
	kindEvents
)

// NewFleet returns a Fleet that follows no server yet (see Add).
func NewFleet(cfg FleetConfig) (*Fleet, error) {
	if cfg.Dir == "" || cfg.Out == nil {
		return nil, errors.New("follow logs: FleetConfig needs Dir and Out")
	}
	abs, err := filepath.Abs(cfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("follow logs in %s: %w", cfg.Dir, err)
	}
	cfg.Dir = abs
	if cfg.Keep <= 0 {
		cfg.Keep = DefaultKeep
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	return &Fleet{cfg: cfg, files: map[string]fileRef{}, guardDone: make(chan error, 1)}, nil
}

// Add follows the logs of the named servers, in addition to those already
// followed. It may be called before and while Run runs; a server added
// while Run runs starts at the position Lines says, and a log that does not
// exist yet is printed from its start once it appears. A name must be a
// file name, not a path.
func (fl *Fleet) Add(names ...string) error {
	for _, n := range names {
		if n == "" || n == "." || n == ".." || strings.ContainsRune(n, os.PathSeparator) || strings.ContainsRune(n, 0) {
			return fmt.Errorf("follow logs: %q is not a server name", n)
		}
	}
	fl.mu.Lock()
	defer fl.mu.Unlock()
	for _, n := range names {
		if _, ok := fl.files[n+logExt]; ok {
			continue
		}
		s := newStream(fl.cfg.Dir, n)
		s.setup(fl.cfg.Lines, fl.cfg.Keep, fl.cfg.Log)
		if fl.cfg.Markers {
			s.events.open(s.evPath)
		}
		for name, kind := range map[string]fileKind{
			filepath.Base(s.path): kindLive, filepath.Base(s.rot): kindCopy,
			filepath.Base(s.tmp): kindCopy, filepath.Base(s.evPath): kindEvents,
		} {
			fl.files[name] = fileRef{s: s, kind: kind}
		}
		fl.streams = append(fl.streams, s)
		fl.width = max(fl.width, len(n))
		if fl.started {
			fl.markLocked(s)
			fl.w.wake()
		}
	}
	return nil
}

// Run prints the logs as FleetConfig says: without Follow it returns once
// it has printed what they hold; with Follow it returns nil when ctx ends,
// having printed what the logs held then (at most 256 KiB more of each) and
// let out the lines still held. It fails when writing to Out fails.
// Run may be called once.
//
// One goroutine waits for the folder's events, reads and writes, as tail
// does: no hand-over per write. When a write to Out blocks longer than
// guardAfter, a second goroutine takes over the watch until it returns, so
// rotations are taken in while the output stalls.
func (fl *Fleet) Run(ctx context.Context) error {
	if fl.cfg.Follow {
		// Watch before reading anything, so nothing written meanwhile is
		// missed.
		w, err := newDirWatch(fl.cfg.Dir)
		var wt watcher = w
		if err != nil {
			fl.cfg.Log.Info("Cannot watch the logs folder; looking every second instead", "error", err.Error())
			wt = newPollWatch(DefaultPoll)
		}
		fl.mu.Lock()
		fl.w = wt
		fl.mu.Unlock()
		fl.guard = time.AfterFunc(time.Hour, fl.runGuard)
		fl.guard.Stop()
		// What changed between Add and the watch (a log created) has no
		// event: look once now.
		fl.overflow()
		stop := context.AfterFunc(ctx, wt.wake)
		defer func() {
			stop()
			_ = wt.close()
		}()
	}
	defer fl.closeAll()

	r := &reader{fl: fl, rbuf: make([]byte, readChunk)}
	fl.mu.Lock()
	streams := append([]*stream(nil), fl.streams...)
	fl.mu.Unlock()
	// What the logs already hold, one server after the other. Bounded by
	// the size at setup, so a busy server does not hold up the others.
	for _, s := range streams {
		if err := r.history(s); err != nil {
			return err
		}
		if !fl.cfg.Follow {
			// The log ends here: its last line is complete as it is.
			if err := r.flushAll([]*stream{s}); err != nil {
				return err
			}
		}
	}
	if !fl.cfg.Follow {
		return nil
	}

	fl.mu.Lock()
	fl.started = true
	for _, s := range fl.streams {
		fl.markLocked(s)
	}
	fl.mu.Unlock()
	batch := time.NewTimer(batchWindow)
	defer batch.Stop()
	for {
		printed := false
		for s := fl.pop(); s != nil; s = fl.pop() {
			n, state, err := r.serve(s, turnBytes, fl.cfg.Markers)
			if err != nil {
				return err
			}
			printed = printed || n > 0
			if state == readData {
				fl.mu.Lock()
				fl.markLocked(s)
				fl.mu.Unlock()
			}
		}
		if printed {
			// Let more output gather (the kernel merges the events
			// meanwhile) before looking again.
			batch.Reset(batchWindow)
			select {
			case <-ctx.Done():
			case <-batch.C:
			}
		}
		if ctx.Err() != nil {
			// What was written before the end is printed: one more look
			// at every log, at most turnBytes each.
			fl.overflow()
			for s := fl.pop(); s != nil; s = fl.pop() {
				if _, _, err := r.serve(s, turnBytes, fl.cfg.Markers); err != nil {
					return err
				}
			}
			fl.mu.Lock()
			streams := append([]*stream(nil), fl.streams...)
			fl.mu.Unlock()
			return r.flushAll(streams)
		}
		if err := fl.w.wait(fl.changed, fl.overflow); err != nil {
			return fmt.Errorf("follow logs in %s: %w", fl.cfg.Dir, err)
		}
	}
}

// batchWindow is how long Run waits, after it printed something, before it
// looks for more: a server that writes without pause then costs one wake
// per window instead of one per write, for at most this much delay. After
// a look that found nothing new it waits for the kernel's next event, with
// no timer: an idle fleet costs nothing.
const batchWindow = 5 * time.Millisecond

// guardAfter is how long a write to Out may block before the guard takes
// over the folder's watch; a rotation within that time is taken in by the
// reader itself when it reads on (see reader.read).
const guardAfter = 20 * time.Millisecond

// out writes p to Out, with the guard watching the folder if the write
// blocks.
func (fl *Fleet) out(p []byte) error {
	if fl.guard != nil {
		fl.guard.Reset(guardAfter)
	}
	_, err := fl.cfg.Out.Write(p)
	if fl.guard != nil && !fl.guard.Stop() {
		// The guard started (or is starting): stop it before this
		// goroutine waits on the watch again.
		fl.guardMu.Lock()
		fl.guardStop = true
		fl.guardMu.Unlock()
		fl.w.wake()
		if gerr := <-fl.guardDone; gerr != nil && err == nil {
			return fmt.Errorf("follow logs in %s: %w", fl.cfg.Dir, gerr)
		}
	}
	if err != nil {
		return fmt.Errorf("follow logs: write: %w", err)
	}
	return nil
}

// runGuard watches the folder while out's write blocks, until out stops it.
func (fl *Fleet) runGuard() {
	for {
		fl.guardMu.Lock()
		stop := fl.guardStop
		fl.guardStop = false
		fl.guardMu.Unlock()
		if stop {
			fl.guardDone <- nil
			return
		}
		if err := fl.w.wait(fl.changed, fl.overflow); err != nil {
			fl.guardDone <- err // out collects it when its write returns
			return
		}
	}
}

// pop takes the next stream with something to read; nil when none.
func (fl *Fleet) pop() *stream {
	fl.mu.Lock()
	defer fl.mu.Unlock()
	if len(fl.queue) == 0 {
		return nil
	}
	s := fl.queue[0]
	fl.queue[0] = nil
	fl.queue = fl.queue[1:]
	s.queued = false
	return s
}

// history prints what s held at setup. A rotation under way holds it up
// until the rotation is done (bounded by staleTmpAfter, then the copy it
// left is taken as it is).
func (r *reader) history(s *stream) error {
	left := s.history
	for left > 0 {
		n, state, err := r.serve(s, left, false)
		if err != nil {
			return err
		}
		left -= n
		switch {
		case state == readWait:
			time.Sleep(waitPoll) // another process's rename, seconds at most
		case state != readData || n == 0:
			return nil
		}
	}
	return nil
}

// markLocked queues s for the reader. The caller holds mu; a caller other
// than Run's own goroutine (and the guard, which runs while it writes)
// wakes it after.
func (fl *Fleet) markLocked(s *stream) {
	if !s.queued {
		s.queued = true
		fl.queue = append(fl.queue, s)
	}
}

// changed is the watcher's report of one name in Dir.
func (fl *Fleet) changed(name []byte, renamed bool) {
	fl.mu.Lock()
	defer fl.mu.Unlock()
	ref, ok := fl.files[string(name)]
	if !ok {
		return
	}
	if renamed {
		switch ref.kind {
		case kindLive, kindCopy:
			ref.s.integrate(fl.cfg.Keep, fl.cfg.Log)
		case kindEvents:
			ref.s.evMoved = true
		}
	}
	fl.markLocked(ref.s)
}

// overflow looks at every log again: the watcher may have missed events.
func (fl *Fleet) overflow() {
	fl.mu.Lock()
	defer fl.mu.Unlock()
	for _, s := range fl.streams {
		s.integrate(fl.cfg.Keep, fl.cfg.Log)
		s.evMoved = true
		fl.markLocked(s)
	}
}

func (fl *Fleet) closeAll() {
	fl.mu.Lock()
	defer fl.mu.Unlock()
	for _, s := range fl.streams {
		s.close()
	}
}

// reader is Run's one goroutine that reads the logs and writes Out.
type reader struct {
	fl   *Fleet
	rbuf []byte
	obuf []byte
}

// readState is what one read found.
type readState int

const (
	readData readState = iota // data, and maybe more after it
	readEnd                   // the end of the log for now
	readWait                  // a rotation is under way: read again once it is done
)

// serve prints up to max bytes of s's log (markers first when markers is
// set). It returns how many bytes it consumed and how it stopped: readData
// when more may be waiting.
func (r *reader) serve(s *stream, max int64, markers bool) (int64, readState, error) {
	fl := r.fl
	fl.mu.Lock()
	if s.prefixWidth != fl.width || s.prefix == nil {
		s.prefix, s.prefixWidth = linePrefix(s.name, fl.width, fl.cfg.Prefix, fl.cfg.Color), fl.width
	}
	moved := s.evMoved
	s.evMoved = false
	fl.mu.Unlock()
	out := r.obuf[:0]
	var done int64
	state := readData
	for done < max {
		data, st, short, skipped, mid, err := r.read(s, max-done)
		if err != nil {
			return done, readEnd, err
		}
		if markers {
			// The starts recorded up to now go before what was just read:
			// the new process's first lines (written before its start was
			// recorded) come after the marker. Only output read together
			// with the start can be on the wrong side of it.
			out = r.markers(out, s, moved)
			moved = false
		}
		out = r.skip(out, s, skipped, mid)
		if s.restarted {
			// What the held part's line went on with is gone.
			s.restarted = false
			s.lines.drop()
			out = appendLine(out, s.prefix, []byte(truncatedMarker))
		}
		if st != readData {
			state = st
			break
		}
		done += int64(len(data))
		out = r.append(out, s, data)
		if short {
			state = readEnd
			break
		}
	}
	r.obuf = out[:0]
	if len(out) > 0 {
		if err := fl.out(out); err != nil {
			return done, readEnd, err
		}
	}
	return done, state, nil
}

// markers appends a marker line for each start appended to s's events
// file since the last look.
func (r *reader) markers(out []byte, s *stream, moved bool) []byte {
	lines, err := s.events.read(s.evPath, moved)
	if err != nil {
		r.fl.cfg.Log.V(1).Info("Cannot read the events file", "path", s.evPath, "error", err.Error())
	}
	for _, l := range lines {
		if at, pid, ok := parseStart(l); ok {
			out = appendLine(out, s.prefix, []byte(startMarker(at, pid)))
		}
	}
	return out
}

// skip accounts for bytes given up before what is read next, and prints
// the marker once the next line start is found.
func (r *reader) skip(out []byte, s *stream, skipped int64, mid bool) []byte {
	if skipped == 0 {
		return out
	}
	s.pending += skipped + int64(s.lines.drop())
	s.discard = s.discard || mid
	if !s.discard {
		out = appendLine(out, s.prefix, []byte(skipMarker(s.pending)))
		s.pending = 0
	}
	return out
}

// append formats data of s: whole lines, after the skip's partial line.
func (r *reader) append(out []byte, s *stream, data []byte) []byte {
	if s.discard {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			s.pending += int64(len(data))
			return out
		}
		s.pending += int64(i + 1)
		data = data[i+1:]
		s.discard = false
		out = appendLine(out, s.prefix, []byte(skipMarker(s.pending)))
		s.pending = 0
	}
	return s.lines.appendLines(out, s.prefix, data)
}

// flushAll lets out the lines still held, at the end of a log's history
// or of Run: as they are when one server is printed without prefix (the
// output then ends as its log does), else with the line feed they lack, so
// that the next server's line starts a line.
func (r *reader) flushAll(streams []*stream) error {
	r.fl.mu.Lock()
	alone := len(r.fl.streams) == 1
	r.fl.mu.Unlock()
	out := r.obuf[:0]
	for _, s := range streams {
		out = s.lines.flush(out, s.prefix, len(s.prefix) > 0 || !alone)
	}
	if len(out) == 0 {
		return nil
	}
	return r.fl.out(out)
}

// read reads the next bytes of s (at most max), committing them, and says
// whether the read was short (the end was reached) and what was skipped
// before them. A read of the live file counts only if no cut can have
// moved its bytes before it: Rotate cuts (and shifts the older copies)
// only while <log>.1.tmp exists, and ends with a new <log>.1 in place, so
// a read followed by a look that finds no <log>.1.tmp and no unseen
// <log>.1 read what it thinks it read. (The tmp file is looked at first:
// the other order would let a rotation's last two renames fall between
// the looks; this one, only a whole rotation, copy and fsync included.)
func (r *reader) read(s *stream, max int64) (data []byte, state readState, short bool, skipped int64, mid bool, err error) {
	fl := r.fl
	for {
		fl.mu.Lock()
		skipped, mid = s.skipped, s.skipMid
		s.skipped, s.skipMid = 0, false
		if skipped > 0 {
			// Reported first; what follows is read on the next call.
			fl.mu.Unlock()
			return nil, readData, false, skipped, mid, nil
		}
		if len(s.segs) == 0 {
			fl.mu.Unlock()
			return nil, readEnd, true, 0, false, nil
		}
		seg := s.segs[0]
		pos, gen, f, live := seg.pos, s.gen, seg.file, seg.live
		limit := min(int64(len(r.rbuf)), max)
		if f.size >= 0 {
			limit = min(limit, f.size-pos)
		}
		fl.mu.Unlock()

		n := 0
		if limit > 0 {
			n, err = f.f.ReadAt(r.rbuf[:limit], pos)
			if err != nil && !errors.Is(err, io.EOF) {
				return nil, readEnd, true, 0, false, fmt.Errorf("follow logs: read %s: %w", f.f.Name(), err)
			}
			err = nil
		}
		var cut cutCheck
		// At the end of the live file, a size below the read position is a
		// cut too: looked at only then.
		shrunk := false
		if live && n == 0 && pos > 0 {
			st, serr := f.f.Stat()
			shrunk = serr == nil && st.Size() < pos
		}
		if live && (n > 0 || shrunk) {
			cut = s.lookForCut()
		}

		fl.mu.Lock()
		if s.gen != gen {
			fl.mu.Unlock()
			continue
		}
		if live && (n > 0 || shrunk) {
			switch s.judgeCut(cut, fl) {
			case cutWait:
				fl.mu.Unlock()
				return nil, readWait, true, 0, false, nil
			case cutMoved:
				fl.mu.Unlock()
				continue
			}
		}
		if n == 0 {
			switch {
			case !live && len(s.segs) > 1 && (f.size < 0 || pos >= f.size):
				s.popFront() // finished; on to the next file
				fl.mu.Unlock()
				continue
			case shrunk:
				// Cut without a copy (truncated by hand, or by a rotator
				// that is not Rotate): start it over, and say so.
				fl.cfg.Log.V(1).Info("Log truncated; reading it from its start", "path", s.path)
				seg.pos, s.fp = 0, s.fp[:0]
				s.gen++
				s.restarted = true
				fl.mu.Unlock()
				continue
			}
			fl.mu.Unlock()
			return nil, readEnd, true, 0, false, nil
		}
		seg.pos += int64(n)
		s.fp = appendFingerprint(s.fp, r.rbuf[:n])
		fl.mu.Unlock()
		// Short: the end of the log for now. A file before the live one
		// (finished copy, renamed-away file) is followed by the next.
		return r.rbuf[:n], readData, live && int64(n) < limit, 0, false, nil
	}
}

// appendFingerprint keeps the last fingerprintLen bytes of fp + data.
func appendFingerprint(fp, data []byte) []byte {
	if len(data) >= fingerprintLen {
		return append(fp[:0], data[len(data)-fingerprintLen:]...)
	}
	fp = append(fp, data...)
	if len(fp) > fingerprintLen {
		fp = append(fp[:0], fp[len(fp)-fingerprintLen:]...)
	}
	return fp
}

// pollWatch stands in for the watcher when the folder cannot be watched:
// it reports an overflow (look at everything) every interval.
type pollWatch struct {
	t    *time.Ticker
	poke chan struct{}
}

func newPollWatch(d time.Duration) *pollWatch {
	return &pollWatch{t: time.NewTicker(d), poke: make(chan struct{}, 1)}
}

func (p *pollWatch) wait(_ func([]byte, bool), overflow func()) error {
	select {
	case <-p.poke:
	case <-p.t.C:
		overflow()
	}
	return nil
}

func (p *pollWatch) wake() {
	select {
	case p.poke <- struct{}{}:
	default:
	}
}

func (p *pollWatch) close() error {
	p.t.Stop()
	return nil
}

// poke queues s from another goroutine than Run's, and wakes Run.
func (fl *Fleet) poke(s *stream) {
	fl.mu.Lock()
	defer fl.mu.Unlock()
	fl.markLocked(s)
	if fl.w != nil {
		fl.w.wake()
	}
}
