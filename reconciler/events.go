package reconciler

import (
	"encoding/json"
	"io"
	"os"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/go-logr/logr"

	"github.com/procfleet/procfleet/internal/safefile"
)

// Event types.
const (
	EventNormal  = "Normal"
	EventWarning = "Warning"
)

// Event reasons the reconciler emits (actuate adds its own: Signal, Started,
// Stopped, RecordRemoved, Quarantined, StartFailed).
const (
	ReasonStarting    = "Starting"
	ReasonReady       = "Ready"
	ReasonNotReady    = "NotReady"
	ReasonFailed      = "Failed"
	ReasonExited      = "Exited"
	ReasonBackOff     = "BackOff"
	ReasonReplacing   = "Replacing"
	ReasonStopping    = "Stopping"
	ReasonStopped     = "Stopped"
	ReasonAdopted     = "Adopted"
	ReasonQuarantined = "Quarantined"
	ReasonUnhealthy   = "Unhealthy"
	ReasonWaiting     = "Waiting"
	// ReasonQuarantineLifted: an UntrustedRecord quarantine ended because
	// nothing it protected is left (process gone, port free).
	ReasonQuarantineLifted = "QuarantineLifted"
	// ReasonRecordRewritten: the record on disk was untrusted and moved
	// aside; a fresh one was written from the pinned process up started.
	ReasonRecordRewritten = "RecordRewritten"
	// ReasonRecordFailed: a record could not be written or removed (the
	// state folder is full or read-only); nothing is signalled on that
	// account, and the write or removal is tried again.
	ReasonRecordFailed = "RecordFailed"
)

// Event is one thing that happened to a server.
type Event struct {
	Time    time.Time `json:"time"`
	Server  string    `json:"server"`
	Type    string    `json:"type"`
	Reason  string    `json:"reason"`
	Message string    `json:"message"`
	// Detail marks the actuator's low-level events (each signal with its
	// evidence, records written and removed): kept and logged, but not a
	// progress line of their own.
	Detail bool `json:"detail,omitempty"`
}

// eventRingSize is how many events are kept in memory per server.
const eventRingSize = 64

// maxEventsFile is the size at which a server's events file is rotated
// (to <file>.1).
const maxEventsFile = 256 << 10

// ring is a bounded list of the most recent events. Its buffer grows with
// the events, up to eventRingSize: most servers have had a few.
type ring struct {
	buf  []Event
	next int // where the oldest is, once buf holds eventRingSize
}

func (r *ring) add(e Event) {
	if len(r.buf) < eventRingSize {
		if len(r.buf) == cap(r.buf) {
			grown := make([]Event, len(r.buf), min(max(2*cap(r.buf), 4), eventRingSize))
			copy(grown, r.buf)
			r.buf = grown
		}
		r.buf = append(r.buf, e)
		return
	}
	r.buf[r.next] = e
	r.next = (r.next + 1) % len(r.buf)
}

func (r *ring) list() []Event {
	out := make([]Event, 0, len(r.buf))
	out = append(out, r.buf[r.next:]...)
	return append(out, r.buf[:r.next]...)
}

// eventFiles appends events, one JSON object a line, to each server's events
// file in the state folder. Appends to one file are serialised (the size
// check and rename must not interleave); different servers' files are
// written in parallel, so that a fleet stopping at once does not queue
// behind one lock. A file stays open between its appends, for up to
// eventFileReuse and maxOpenEventFiles at once: a stop's three events cost
// one open and three writes instead of three opens (each an lstat, an open,
// an fstat, three fcntl and a close); a server that has stopped gives its
// descriptor back (rest). Only the state folder's lock holder writes
// these files, so the size kept with the open file is the file's.
type eventFiles struct {
	mu     sync.Mutex            // guards files, open and closed
	files  map[string]*eventFile // per server
	open   int                   // files holding a descriptor
	closed bool                  // closeAll ran: no descriptor is kept
	// limit bounds open (0: maxOpenEventFiles).
	limit int
	path  func(name string) string
}

// eventFile is one server's events file and the lock of its appends.
type eventFile struct {
	mu     sync.Mutex
	fh     io.WriteCloser // nil when not kept open
	size   int64          // of the file fh has open
	opened time.Time
}

// maxOpenEventFiles bounds the descriptors kept open unless the owner sets
// another limit (a fleet of 1,000 under up holds no more than this);
// appends beyond it open and close the file each time.
const maxOpenEventFiles = 256

// eventFileReuse is how long a kept descriptor is written through before
// the path is opened again, so that a file moved or removed meanwhile (by
// hand) is created again within this time.
const eventFileReuse = 10 * time.Second

// file returns the events file of a server.
func (f *eventFiles) file(name string) *eventFile {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.files == nil {
		f.files = map[string]*eventFile{}
	}
	ef := f.files[name]
	if ef == nil {
		ef = &eventFile{}
		f.files[name] = ef
	}
	return ef
}

// keep reports whether one more descriptor may be kept open, and counts
// it.
func (f *eventFiles) keep() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	limit := f.limit
	if limit == 0 {
		limit = maxOpenEventFiles
	}
	if f.closed || f.open >= limit {
		return false
	}
	f.open++
	return true
}

// release closes ef's descriptor, if it holds one. ef.mu is held.
func (f *eventFiles) release(ef *eventFile) {
	if ef.fh == nil {
		return
	}
	_ = ef.fh.Close()
	ef.fh = nil
	f.mu.Lock()
	f.open--
	f.mu.Unlock()
}

func (f *eventFiles) append(e Event) error {
	if f == nil || f.path == nil {
		return nil
	}
	b, err := appendEventJSON(make([]byte, 0, 256), e)
	if err != nil {
		return err
	}
	b = append(b, '\n')
	ef := f.file(e.Server)
	ef.mu.Lock()
	defer ef.mu.Unlock()
	now := time.Now()
	if ef.fh != nil && (now.Sub(ef.opened) > eventFileReuse || ef.size+int64(len(b)) > maxEventsFile) {
		f.release(ef)
	}
	fh := ef.fh
	if fh == nil {
		var size int64
		if fh, size, err = openEvents(f.path(e.Server)); err != nil {
			return err
		}
		if size >= 0 && f.keep() {
			ef.fh, ef.size, ef.opened = fh, size, now
		}
	}
	n, err := fh.Write(b)
	if fh != ef.fh {
		if cerr := fh.Close(); err == nil {
			err = cerr
		}
		return err
	}
	ef.size += int64(n)
	if err != nil {
		f.release(ef) // opened again at the next event
	}
	return err
}

// appendEventJSON appends e as json.Marshal(e) encodes it, byte for byte
// (TestAppendEventJSON, FuzzAppendEventJSON), without reflection: a
// stop's events are encoded on its worker's stack, which the encoder's
// reflective descent grew from 8 to 16 KiB in each of 1,000 workers.
func appendEventJSON(b []byte, e Event) ([]byte, error) {
	t, err := e.Time.MarshalJSON()
	if err != nil {
		// json.Marshal's own error (a year outside 0-9999).
		_, err = json.Marshal(e)
		return b, err
	}
	b = append(b, `{"time":`...)
	b = append(b, t...)
	b = append(b, `,"server":`...)
	b = appendJSONString(b, e.Server)
	b = append(b, `,"type":`...)
	b = appendJSONString(b, e.Type)
	b = append(b, `,"reason":`...)
	b = appendJSONString(b, e.Reason)
	b = append(b, `,"message":`...)
	b = appendJSONString(b, e.Message)
	if e.Detail {
		b = append(b, `,"detail":true`...)
	}
	return append(b, '}'), nil
}

// appendJSONString appends s quoted as encoding/json quotes a string: <, >
// and & escaped for HTML, U+2028 and U+2029 escaped, invalid UTF-8 as
// U+FFFD.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xf])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// openEvents opens the events file at path for appending, after moving it
// to path.1 when it has grown past maxEventsFile, and returns its size (-1
// when unknown). Never through a symlink, never blocked on a FIFO: what is
// not a regular file is moved aside (.corrupt-<time>) for a fresh one. The
// size is read from the open file, so an append opens and stats it once. A
// regular file already there and not due for rotation is opened as
// openEventsAppend does, with no *os.File.
func openEvents(path string) (io.WriteCloser, int64, error) {
	if w, size, ok := openEventsAppend(path); ok {
		return w, size, nil
	}
	fh, _, err := safefile.OpenAppend(path, 0o600)
	if err != nil {
		return nil, 0, err
	}
	fi, err := fh.Stat()
	if err != nil {
		return fh, -1, nil
	}
	if fi.Size() <= maxEventsFile {
		return fh, fi.Size(), nil
	}
	_ = fh.Close()
	_ = os.Rename(path, path+".1")
	if fh, _, err = safefile.OpenAppend(path, 0o600); err != nil {
		return nil, 0, err
	}
	if fi, err = fh.Stat(); err != nil {
		return fh, -1, nil
	}
	return fh, fi.Size(), nil
}

// rest closes the descriptor kept open for a server's events file, if
// any: it has stopped, and has no event to come until it starts again
// (which opens the file again). A fleet stopping at once then keeps a
// descriptor per server while it stops, within its limit.
func (f *eventFiles) rest(name string) {
	if f == nil {
		return
	}
	f.mu.Lock()
	ef := f.files[name]
	f.mu.Unlock()
	if ef == nil {
		return
	}
	ef.mu.Lock()
	f.release(ef)
	ef.mu.Unlock()
}

// closeAll closes the descriptors kept open; later appends keep none.
func (f *eventFiles) closeAll() {
	if f == nil {
		return
	}
	f.mu.Lock()
	f.closed = true
	files := make([]*eventFile, 0, len(f.files))
	for _, ef := range f.files {
		files = append(files, ef)
	}
	f.mu.Unlock()
	for _, ef := range files {
		ef.mu.Lock()
		f.release(ef)
		ef.mu.Unlock()
	}
}

// writeFault follows a run of failed writes of one kind (status.json, the
// events files), so that a state folder that stays full or read-only is
// logged as an error once, then at V(1) at each further failure, and its
// recovery once.
type writeFault struct {
	mu      sync.Mutex
	failing bool
}

// failed logs a failed write: an error when it begins a run, else at V(1).
func (w *writeFault) failed(log logr.Logger, err error, msg string, kv ...any) {
	w.mu.Lock()
	first := !w.failing
	w.failing = true
	w.mu.Unlock()
	if first {
		log.Error(err, msg, kv...)
		return
	}
	log.V(1).Info(msg, append(kv, "error", err.Error())...)
}

// ok logs msg when a write succeeds after a run of failures.
func (w *writeFault) ok(log logr.Logger, msg string) {
	w.mu.Lock()
	was := w.failing
	w.failing = false
	w.mu.Unlock()
	if was {
		log.Info(msg)
	}
}
