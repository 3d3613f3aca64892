package logfile

import (
	"bytes"
	"errors"
	"io"
	"os"
	"slices"
	"time"

	"github.com/go-logr/logr"
)

// Tuning of following.
const (
	// fingerprintLen is how many of the bytes last read are kept to check
	// that a rotated copy, or the live file after a cut, holds them where
	// the read position says: a file put in place by hand is not taken for
	// a rotation.
	fingerprintLen = 256
	// staleTmpAfter: a <name>.log.1.tmp that has not changed (size, time)
	// for this long belongs to a rotation that was interrupted, and a
	// follower stops waiting for it. A rotation under way writes its copy,
	// then cuts, shifts and renames within moments; up recovers a left
	// copy at its next rotation pass (every 30 s).
	staleTmpAfter = 30 * time.Second
	// scanTries bounds the scans of the rotated copies that a rotation
	// running at the same moment makes inconsistent; rotations are
	// seconds apart, so a second scan almost always agrees.
	scanTries = 10
	// scanSlack: copies are looked for up to Keep plus this many, for a
	// rotator that keeps a few more than this follower was told.
	scanSlack = 2
)

// file is an open file of a server's log: the live file or a rotated copy.
type file struct {
	f  *os.File
	fi os.FileInfo // its identity, as opened
	// size is a rotated copy's size (a copy never changes once in place);
	// -1 for a file that may grow.
	size int64
	held bool // in stream.copies
	refs int  // segments reading it
}

// segment is a file still to be read, from pos.
type segment struct {
	file *file
	pos  int64
	// live: the file at the log's path, which grows and which rotation
	// cuts. A live file replaced at its path (renamed away, re-created) is
	// read to its end, then left.
	live bool
}

// stream is one server's log as a follower sees it. The fields up to the
// reader's own are guarded by Fleet.mu; integrate changes them, the reader
// commits what it read under the same lock, and gen tells the reader that
// what it read meanwhile must be read again.
type stream struct {
	name                   string
	path, rot, tmp, evPath string // the live log, <log>.1, <log>.1.tmp, the events file

	segs    []*segment // what is left to read, in order; the live file last
	copies  []*file    // the rotated copies seen that are still in the folder
	waiting []*file    // copies seen, not taken in yet (see applyPending), oldest first
	gen     uint64
	fp      []byte // the last bytes committed, at most fingerprintLen
	// skipped counts the bytes of copies given up (more rotations than Keep
	// while the reader was behind); skipMid: what follows them starts in
	// the middle of a line.
	skipped  int64
	skipMid  bool
	tmpSeen  os.FileInfo // the <log>.1.tmp of the rotation the reader waits for
	tmpSince time.Time   // since when tmpSeen has not changed
	staleTmp os.FileInfo // a <log>.1.tmp left by an interrupted rotation
	otherRot os.FileInfo // a <log>.1 that cannot be read as a copy
	history  int64       // bytes from the start position to the log's end at setup
	queued   bool        // in Fleet.queue
	evMoved  bool        // the events file was renamed or created
	odd      bool        // the log path holds something else; said once

	// The reader's own.
	lines       lineBuf
	discard     bool  // dropping up to the next line feed after a skip
	restarted   bool  // the log was cut without a copy: read again from 0
	pending     int64 // bytes skipped, marker not printed yet
	events      eventsTail
	prefix      []byte
	prefixWidth int
}

func newStream(dir, name string) *stream {
	path := dir + string(os.PathSeparator) + name + logExt
	return &stream{
		name:   name,
		path:   path,
		rot:    RotatedPath(path, 1),
		tmp:    RotatedPath(path, 1) + tmpSuffix,
		evPath: dir + string(os.PathSeparator) + EventsFile(name),
	}
}

// setup opens the log and its rotated copies and places the read position
// lines lines before the end (negative: the start of the oldest copy; 0:
// the end). A log that does not exist yet is read from its start once it
// appears.
func (s *stream) setup(lines, keep int, log logr.Logger) {
	var copies []*file
	var live *file
	for try := 0; ; try++ {
		before := s.lookForCut()
		copies = s.scan(keep)
		live = nil
		if f, fi, err := openLog(s.path); err == nil {
			live = &file{f: f, fi: fi, size: -1}
		} else if !errors.Is(err, os.ErrNotExist) {
			s.oddPath(err, log)
		}
		// A rotation that began or ended meanwhile may have cut the live
		// file after the copies were listed: look again.
		after := s.lookForCut()
		if (sameInfo(before.rot, after.rot) && sameInfo(before.tmp, after.tmp)) || try == scanTries {
			break
		}
		for _, c := range copies {
			_ = c.f.Close()
		}
		if live != nil {
			_ = live.f.Close()
		}
	}
	for _, c := range copies {
		c.held = true
	}
	s.copies = copies

	// The chain, oldest first, read as one stream.
	chain := make([]*file, 0, len(copies)+1)
	for i := len(copies) - 1; i >= 0; i-- {
		chain = append(chain, copies[i])
	}
	var parts joined
	for _, c := range chain {
		parts = append(parts, part{r: c.f, size: c.size})
	}
	if live != nil {
		chain = append(chain, live)
		parts = append(parts, part{r: live.f, size: live.fi.Size()})
	}
	total := parts.size()
	start := total
	switch {
	case lines < 0:
		start = 0
	case lines > 0:
		if off, err := tailOffset(parts, total, lines); err == nil {
			start = off
		} else {
			log.Info("Cannot find where the log's last lines start; following from its end", "path", s.path, "error", err.Error())
		}
	}
	if len(chain) > 0 {
		idx, off := parts.locate(start)
		if lines == 0 && live == nil {
			idx, off = len(chain), 0 // only what the live file will hold
		}
		for i := idx; i < len(chain); i++ {
			seg := &segment{file: chain[i], live: chain[i] == live}
			if i == idx {
				seg.pos = off
			}
			chain[i].refs++
			s.segs = append(s.segs, seg)
		}
		s.fp, _ = lastBytes(parts, start, fingerprintLen)
	}
	s.history = total - start
}

// scan opens the rotated copies in the folder that are not among
// s.copies, newest first, skipping those that moved while it looked.
func (s *stream) scan(keep int) []*file {
	var fresh []*file
	for i := 1; i <= keep+scanSlack; i++ {
		p := RotatedPath(s.path, i)
		fi, err := os.Lstat(p)
		if err != nil || !fi.Mode().IsRegular() || s.held(fi) || containsFile(fresh, fi) {
			continue
		}
		f, ofi, err := openLog(p)
		if err != nil {
			continue
		}
		if !os.SameFile(fi, ofi) {
			_ = f.Close() // replaced between the two looks; the next scan sees it
			continue
		}
		fresh = append(fresh, &file{f: f, fi: ofi, size: ofi.Size()})
	}
	return fresh
}

// held reports whether fi is one of the copies seen.
func (s *stream) held(fi os.FileInfo) bool { return containsFile(s.copies, fi) }

func containsFile(files []*file, fi os.FileInfo) bool {
	for _, c := range files {
		if os.SameFile(c.fi, fi) {
			return true
		}
	}
	return false
}

// integrate brings the stream up to date with the files: it takes in the
// rotated copies made since it last looked, oldest first (moving the read
// position as each cut moved the bytes it points at), lets go of copies
// that were removed, and follows a file re-created at the log's path. It
// returns whether the read position changed.
func (s *stream) integrate(keep int, log logr.Logger) bool {
	gen := s.gen
	for try := 0; try <= scanTries; try++ {
		before, _ := os.Lstat(s.rot)
		fresh := s.scan(keep)
		after, _ := os.Lstat(s.rot)
		if !sameInfo(before, after) && try < scanTries {
			for _, c := range fresh {
				_ = c.f.Close()
			}
			continue // a rotation moved the copies while they were listed
		}
		// Held at once (so a rotation that removes one cannot lose it),
		// taken in below, oldest first.
		for i := len(fresh) - 1; i >= 0; i-- {
			fresh[i].held = true
			s.copies = append(s.copies, fresh[i])
			s.waiting = append(s.waiting, fresh[i])
		}
		break
	}
	s.applyPending()
	s.forgetRemoved()
	s.trim(keep)

	fi, err := os.Lstat(s.path)
	live := s.liveSeg()
	if err == nil && (live == nil || !os.SameFile(fi, live.file.fi)) {
		f, ofi, err := openLog(s.path)
		switch {
		case err != nil:
			if !errors.Is(err, os.ErrNotExist) {
				s.oddPath(err, log)
			}
		case !os.SameFile(fi, ofi):
			_ = f.Close() // replaced again; its event brings us back
		default:
			if live != nil {
				live.live = false
			}
			s.odd = false
			s.segs = append(s.segs, &segment{file: &file{f: f, fi: ofi, size: -1, refs: 1}, live: true})
			s.gen++
		}
	}
	return s.gen != gen
}

// oddPath says once that the log path holds something that is not read.
func (s *stream) oddPath(err error, log logr.Logger) {
	if !s.odd {
		s.odd = true
		log.Info("Not following a log path that is not a regular file", "server", s.name, "error", err.Error())
	}
}

// applyPending takes in the waiting copies, oldest first. A copy whose
// check fails while a rotation is under way (its tmp file there, or a
// newer <log>.1 not held yet) may have failed because that rotation moved
// the bytes it looks for: it waits, with the ones after it, until that
// rotation's copy is in place and can be looked at with it.
func (s *stream) applyPending() {
	for len(s.waiting) > 0 {
		c := s.waiting[0]
		if !s.cut(c, s.waiting[1:]) {
			if now := s.lookForCut(); (now.tmp != nil && !sameInfo(now.tmp, s.staleTmp)) || (now.rot != nil && !s.held(now.rot)) {
				return
			}
			// Nothing moves meanwhile: c is not a cut of this log.
		}
		s.waiting[0] = nil
		s.waiting = s.waiting[1:]
	}
}

// cut takes in one new rotated copy c, later being the copies made by the
// rotations after it, held and not taken in yet (oldest first). When the
// reader is in the live file at p and c is what a cut removed from its
// start: before p's end of c, the rest of c is read first, then the live
// file from its start; beyond it, the live file is read on from p minus
// c's size (the bytes moved there). The bytes before p must be found where
// this says (after c, in the later copies and then the live file, which
// later cuts moved them into); cut reports false when they are not (c is
// not a cut of this log, or a rotation moved them meanwhile), and then
// moves nothing. When the reader is still in older files, c is read whole
// before the live file.
func (s *stream) cut(c *file, later []*file) bool {
	live := s.liveSeg()
	switch {
	case live == nil:
		return true // a copy of no file this follows
	case os.SameFile(c.fi, live.file.fi):
		live.live = false // renamed away: read to its end, then the new file
		return true
	case s.segs[0] != live:
		c.refs++
		s.segs = append(s.segs[:len(s.segs)-1], &segment{file: c}, live)
	case live.pos <= c.size:
		if !endsWith(c.f, live.pos, s.fp) {
			return false
		}
		c.refs++
		s.segs = []*segment{{file: c, pos: live.pos}, live}
		live.pos = 0
	default:
		q := live.pos - c.size // where the bytes before pos are now
		var after joined
		for _, l := range later {
			after = append(after, part{r: l.f, size: l.size})
		}
		if fi, err := live.file.f.Stat(); err == nil {
			after = append(after, part{r: live.file.f, size: fi.Size()})
		}
		inAfter := min(int64(len(s.fp)), q)
		split := int64(len(s.fp)) - inAfter
		if !endsWith(after, q, s.fp[split:]) || !endsWith(c.f, c.size, s.fp[:split]) {
			return false
		}
		live.pos = q
	}
	s.gen++
	return true
}

// trim gives up the oldest copies being read while more than keep of them
// wait (the rotator has removed those already), counting the bytes not
// read.
func (s *stream) trim(keep int) {
	for s.copySegs() > keep && s.segs[0].file.size >= 0 {
		d := s.segs[0]
		if left := d.file.size - d.pos; left > 0 {
			s.skipped += left
			var last [1]byte
			_, err := d.file.f.ReadAt(last[:], d.file.size-1)
			s.skipMid = err != nil || last[0] != '\n'
		}
		s.popFront()
	}
}

func (s *stream) copySegs() int {
	n := 0
	for _, seg := range s.segs {
		if seg.file.size >= 0 {
			n++
		}
	}
	return n
}

// forgetRemoved lets go of the copies that the rotator removed (or someone
// deleted): held, their inodes could not be reused, so a new copy is never
// taken for one already seen.
func (s *stream) forgetRemoved() {
	kept := s.copies[:0]
	for _, c := range s.copies {
		if fi, err := c.f.Stat(); (err == nil && linked(fi)) || slices.Contains(s.waiting, c) {
			kept = append(kept, c)
			continue
		}
		c.held = false
		c.release()
	}
	clear(s.copies[len(kept):])
	s.copies = kept
}

func (s *stream) liveSeg() *segment {
	if n := len(s.segs); n > 0 && s.segs[n-1].live {
		return s.segs[n-1]
	}
	return nil
}

func (s *stream) popFront() {
	s.segs[0].file.refs--
	s.segs[0].file.release()
	s.segs[0] = nil
	s.segs = s.segs[1:]
	s.gen++
}

// release closes f once nothing reads or holds it.
func (f *file) release() {
	if f.refs == 0 && !f.held {
		_ = f.f.Close()
	}
}

// close closes every file of the stream.
func (s *stream) close() {
	for _, seg := range s.segs {
		seg.file.refs = 0
		seg.file.held = false
		_ = seg.file.f.Close()
	}
	for _, c := range s.copies {
		_ = c.f.Close()
	}
	s.segs, s.copies = nil, nil
	s.events.close()
}

// abandonTmp deals with a <log>.1.tmp that stayed unchanged for
// staleTmpAfter: the rotation that made it was interrupted. If the live file no longer
// holds what was read before the read position, that rotation did cut it,
// and the copy it left is the cut part: it is taken in as the copy (as the
// next rotation will put it in place).
func (s *stream) abandonTmp(fi os.FileInfo, keep int) {
	s.staleTmp = fi
	s.tmpSeen, s.tmpSince = nil, time.Time{}
	live := s.liveSeg()
	if live == nil || s.segs[0] != live || live.pos == 0 {
		return
	}
	if st, err := live.file.f.Stat(); err == nil && st.Size() >= live.pos && endsWith(live.file.f, live.pos, s.fp) {
		return
	}
	f, ofi, err := openLog(s.tmp)
	if err != nil || !os.SameFile(fi, ofi) {
		if err == nil {
			_ = f.Close()
		}
		return
	}
	c := &file{f: f, fi: ofi, size: ofi.Size(), held: true}
	s.copies = append(s.copies, c)
	s.waiting = append(s.waiting, c)
	s.applyPending()
	s.trim(keep)
}

// cutCheck is what lookForCut found: the rotation's files as they are now.
type cutCheck struct {
	tmp, rot os.FileInfo // nil: none
}

// lookForCut looks at the files a rotation by Rotate makes (it takes no
// lock: the answer is judged under it).
func (s *stream) lookForCut() cutCheck {
	var c cutCheck
	c.tmp, _ = os.Lstat(s.tmp) // first: see reader.read
	c.rot, _ = os.Lstat(s.rot)
	return c
}

// What judgeCut decided about a read of the live file.
type cutVerdict int

const (
	cutNone  cutVerdict = iota // no cut: what was read stands
	cutWait                    // a rotation is under way: read again once its copy is in place
	cutMoved                   // a rotation was taken in: read again from where it moved the position
)

// judgeCut decides, under Fleet.mu, whether a read of the live file may
// have been moved by a cut. A <log>.1.tmp that stays unchanged for
// staleTmpAfter is abandoned (see abandonTmp). Only the reader calls it.
func (s *stream) judgeCut(c cutCheck, fl *Fleet) cutVerdict {
	if c.tmp != nil && !sameInfo(c.tmp, s.staleTmp) {
		switch {
		case !unchanged(c.tmp, s.tmpSeen):
			// Another rotation, or this one still writing its copy: the
			// clock starts again.
			s.tmpSeen, s.tmpSince = c.tmp, fl.cfg.Clock.Now()
			// poke takes fl.mu, held here: run it on its own.
			fl.cfg.Clock.AfterFunc(staleTmpAfter, func() { go fl.poke(s) })
		case fl.cfg.Clock.Since(s.tmpSince) >= staleTmpAfter:
			fl.cfg.Log.Info("A rotation left its copy unfinished; going on without it", "path", s.tmp)
			s.abandonTmp(c.tmp, fl.cfg.Keep)
			return cutMoved
		}
		return cutWait
	}
	s.tmpSeen, s.tmpSince = nil, time.Time{}
	if len(s.waiting) > 0 {
		// Copies not taken in yet: the read position is not known.
		if s.integrate(fl.cfg.Keep, fl.cfg.Log) {
			return cutMoved
		}
		if len(s.waiting) > 0 {
			return cutWait
		}
	}
	if c.rot != nil && !s.held(c.rot) && !sameInfo(c.rot, s.otherRot) {
		if s.integrate(fl.cfg.Keep, fl.cfg.Log) {
			return cutMoved
		}
		if !s.held(c.rot) {
			s.otherRot = c.rot // not a copy that can be read: not a cut by Rotate
		}
	}
	return cutNone
}

// unchanged reports whether a and b are the same file with the same size
// and modification time.
func unchanged(a, b os.FileInfo) bool {
	return a != nil && b != nil && os.SameFile(a, b) && a.Size() == b.Size() && a.ModTime().Equal(b.ModTime())
}

// sameInfo reports whether two Lstat results name the same file, or both
// found none.
func sameInfo(a, b os.FileInfo) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return os.SameFile(a, b)
}

// eventsTail reads the lines appended to a server's events file. It
// follows the file across the reconciler's rotation of it (a rename to
// <file>.1, then a new file).
type eventsTail struct {
	f       *file
	pos     int64
	partial []byte
	buf     []byte
}

// open starts at the file's end: only what happens from now on is shown.
func (e *eventsTail) open(path string) {
	if f, fi, err := openLog(path); err == nil {
		e.f, e.pos = &file{f: f, fi: fi, size: -1}, fi.Size()
	}
}

// read returns the complete lines appended since the last read; moved
// says the path may name another file now, which is then read from its
// start once the old one is finished.
func (e *eventsTail) read(path string, moved bool) ([][]byte, error) {
	lines, err := e.drain()
	if err != nil || (!moved && e.f != nil) {
		return lines, err
	}
	fi, err := os.Lstat(path)
	if err != nil || (e.f != nil && os.SameFile(fi, e.f.fi)) {
		return lines, nil
	}
	f, ofi, err := openLog(path)
	if err != nil {
		return lines, nil
	}
	e.close()
	e.f, e.pos, e.partial = &file{f: f, fi: ofi, size: -1}, 0, e.partial[:0]
	more, err := e.drain()
	return append(lines, more...), err
}

func (e *eventsTail) drain() ([][]byte, error) {
	if e.f == nil {
		return nil, nil
	}
	if e.buf == nil {
		e.buf = make([]byte, 4<<10)
	}
	var lines [][]byte
	for {
		n, err := e.f.f.ReadAt(e.buf, e.pos)
		e.pos += int64(n)
		data := e.buf[:n]
		for len(data) > 0 {
			i := bytes.IndexByte(data, '\n')
			if i < 0 {
				e.partial = append(e.partial, data...)
				break
			}
			line := append(e.partial, data[:i]...)
			lines = append(lines, line)
			e.partial = nil
			data = data[i+1:]
		}
		if n < len(e.buf) || errors.Is(err, io.EOF) {
			return lines, nil
		}
		if err != nil {
			return lines, err
		}
	}
}

func (e *eventsTail) close() {
	if e.f != nil {
		_ = e.f.f.Close()
		e.f = nil
	}
}
