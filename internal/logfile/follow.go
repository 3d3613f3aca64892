package logfile

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/go-logr/logr"
)

// Tuning of Follow.
const (
	// DefaultPoll is Follow's fallback poll interval.
	DefaultPoll = time.Second
	// fingerprintLen is how many bytes before the read offset are kept to
	// tell a file truncated and written again past that offset.
	fingerprintLen = 256
	// catchUpWait bounds the wait, after a truncation, for <name>.log.1 to
	// hold the copy; catchUpPoll paces that wait when no event comes.
	catchUpWait = 2 * time.Second
	catchUpPoll = 50 * time.Millisecond
	readChunk   = 64 << 10
)

// FollowOptions configure Follow. The zero value prints only what is
// written from now on.
type FollowOptions struct {
	// Lines is how many of the log's last lines are printed first: 0 none,
	// negative the whole log.
	Lines int
	// Poll is the fallback poll interval, for changes fsnotify does not
	// report; 0 means DefaultPoll.
	Poll time.Duration
	// Log receives watcher problems at V(1). The zero value discards.
	Log logr.Logger
}

// Follow copies to w what is written to the log at path, as it arrives,
// until ctx ends (then it returns nil) or writing to w fails. It keeps
// following across a copy-then-truncate rotation (printing first, from
// <path>.1, what was written after its last read and before the truncate)
// and across a rename or re-creation of the file. The log must exist when
// Follow starts.
func Follow(ctx context.Context, path string, w io.Writer, opts FollowOptions) error {
	abs, err := filepath.Abs(path)
	if err != nil {
		return fmt.Errorf("follow %s: %w", path, err)
	}
	fl := &follower{path: abs, w: w}
	if err := fl.open(opts.Lines); err != nil {
		return err
	}
	defer func() { _ = fl.f.Close() }()

	var events <-chan fsnotify.Event
	var watchErrs <-chan error
	if wt, err := fsnotify.NewWatcher(); err != nil {
		opts.Log.V(1).Info("cannot watch the log folder; polling only", "error", err.Error())
	} else {
		defer wt.Close()
		if err := wt.Add(filepath.Dir(abs)); err != nil {
			opts.Log.V(1).Info("cannot watch the log folder; polling only", "error", err.Error())
		} else {
			events, watchErrs = wt.Events, wt.Errors
		}
	}
	poll := opts.Poll
	if poll <= 0 {
		poll = DefaultPoll
	}
	ticker := time.NewTicker(poll)
	defer ticker.Stop()

	rotated := RotatedPath(abs, 1)
	for {
		if err := fl.step(); err != nil {
			return err
		}
		var catchUp <-chan time.Time
		if fl.pending != nil {
			catchUp = time.After(catchUpPoll) // bounded by catchUpWait
		}
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-events:
			if !ok {
				events = nil
				continue
			}
			if ev.Name != abs && ev.Name != rotated {
				// Another file in the folder: wait again, without a step.
				continue
			}
		case err, ok := <-watchErrs:
			if !ok {
				watchErrs = nil
				continue
			}
			// Overflow included: the step below looks at the file anew.
			opts.Log.V(1).Info("log folder watch error", "error", err.Error())
		case <-ticker.C:
		case <-catchUp:
		}
	}
}

// follower is Follow's state.
type follower struct {
	path    string
	w       io.Writer
	f       *os.File
	off     int64       // next byte of f to print
	fp      []byte      // the bytes of f just before off (at most fingerprintLen)
	rot     os.FileInfo // <path>.1 as last seen (nil: none)
	pending *pendingCatchUp
	buf     []byte // drain's read buffer, kept across steps
}

// pendingCatchUp is a rotation seen, waiting for <path>.1 to hold what was
// cut from the live file.
type pendingCatchUp struct {
	off      int64
	fp       []byte
	deadline time.Time
}

func (fl *follower) open(lines int) error {
	f, err := os.OpenFile(fl.path, os.O_RDONLY|noFollow, 0)
	if err != nil {
		return fmt.Errorf("follow %s: %w", fl.path, err)
	}
	fi, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return fmt.Errorf("follow %s: %w", fl.path, err)
	}
	off := int64(0)
	if lines >= 0 {
		if off, err = tailOffset(f, fi.Size(), lines); err != nil {
			_ = f.Close()
			return fmt.Errorf("follow %s: %w", fl.path, err)
		}
	}
	fp, err := lastBytes(f, off, fingerprintLen)
	if err != nil {
		_ = f.Close()
		return fmt.Errorf("follow %s: %w", fl.path, err)
	}
	fl.f, fl.off, fl.fp = f, off, fp
	fl.rot, _ = os.Lstat(RotatedPath(fl.path, 1))
	return nil
}

// step prints what is new and notices rotation and replacement.
func (fl *follower) step() error {
	if fl.pending != nil {
		resume, done, err := fl.catchUp()
		if err != nil {
			return err
		}
		if !done && time.Now().Before(fl.pending.deadline) {
			return nil // the copy is not in place yet; the live file waits
		}
		switch {
		case done && resume > 0:
			fl.off, fl.fp = resume, fl.pending.fp
		case !done && fl.uncut():
			// A false alarm (a <path>.1 that is not a copy of ours): the
			// live file still holds what was read, where it was.
		default:
			fl.off, fl.fp = 0, nil
		}
		fl.pending = nil
	}
	fi, err := fl.f.Stat()
	if err != nil {
		return fmt.Errorf("follow %s: %w", fl.path, err)
	}
	if pi, err := os.Stat(fl.path); err == nil && !os.SameFile(fi, pi) {
		// Renamed away (or removed) and re-created: finish the old file,
		// then follow the new one from its start.
		if err := fl.drain(); err != nil {
			return err
		}
		old := fl.f
		if err := fl.open(-1); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // gone again; the next step looks again
			}
			return err
		}
		_ = old.Close()
		return fl.drain()
	}
	// A new <path>.1 means a rotation (the copy is put in place last), even
	// when the live file's size and bytes happen to look unchanged.
	// (A <path>.1 that is our own file was renamed away: not a cut.)
	rot, _ := os.Lstat(RotatedPath(fl.path, 1))
	rotated := rot != nil && (fl.rot == nil || !os.SameFile(rot, fl.rot)) && !os.SameFile(rot, fi)
	if rot != nil || fl.rot != nil {
		fl.rot = rot
	}
	if fl.off > 0 && (rotated || fi.Size() < fl.off || !endsWith(fl.f, fl.off, fl.fp)) {
		fl.pending = &pendingCatchUp{off: fl.off, fp: fl.fp, deadline: time.Now().Add(catchUpWait)}
		return fl.step()
	}
	return fl.drain()
}

// uncut reports whether f still holds the bytes last read just before off.
func (fl *follower) uncut() bool {
	fi, err := fl.f.Stat()
	return err == nil && fi.Size() >= fl.off && endsWith(fl.f, fl.off, fl.fp)
}

// drain prints f from off to its end.
func (fl *follower) drain() error {
	if fl.buf == nil {
		fl.buf = make([]byte, readChunk)
	}
	buf := fl.buf
	for {
		n, err := fl.f.ReadAt(buf, fl.off)
		if n > 0 {
			if _, werr := fl.w.Write(buf[:n]); werr != nil {
				return fmt.Errorf("follow %s: write: %w", fl.path, werr)
			}
			fl.off += int64(n)
			fl.fp = appendFingerprint(fl.fp, buf[:n])
		}
		if errors.Is(err, io.EOF) || (err == nil && n == 0) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("follow %s: %w", fl.path, err)
		}
	}
}

// catchUp finds where the pending offset went once <path>.1 holds the
// copy: when the copy reaches past it (the live file was truncated, or its
// start removed up to a point beyond it) it prints the rest of the copy and
// resumes the live file at 0; when the copy ends before it (only a prefix
// was removed), it resumes the live file at off minus the copy's size. The
// bytes before the offset must match the fingerprint either way. It reports
// the live offset to resume at and whether it found it.
func (fl *follower) catchUp() (int64, bool, error) {
	p := fl.pending
	r, err := os.OpenFile(RotatedPath(fl.path, 1), os.O_RDONLY|noFollow, 0)
	if err != nil {
		return 0, false, nil
	}
	defer r.Close()
	fi, err := r.Stat()
	if err != nil {
		return 0, false, nil
	}
	size := fi.Size()
	defer func() { fl.rot = fi }() // this copy is accounted for
	if size >= p.off {
		if !endsWith(r, p.off, p.fp) {
			return 0, false, nil
		}
		if _, err := io.Copy(fl.w, io.NewSectionReader(r, p.off, size-p.off)); err != nil {
			return 0, false, fmt.Errorf("follow %s: write: %w", fl.path, err)
		}
		return 0, true, nil
	}
	resume := p.off - size
	inLive := min(int64(len(p.fp)), resume)
	split := int64(len(p.fp)) - inLive
	if !endsWith(fl.f, resume, p.fp[split:]) || !endsWith(r, size, p.fp[:split]) {
		return 0, false, nil
	}
	return resume, true, nil
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
