package reconciler

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"time"

	"github.com/procfleet/procfleet/actuate"
	"github.com/procfleet/procfleet/spec"
)

// Status is the fleet as the reconciler sees it: the shape of status.json
// and of `status -o json` (DESIGN.md).
type Status struct {
	Servers []ServerStatus `json:"servers"`
	Errors  []StatusError  `json:"errors"`
}

// ServerStatus is one server's status.
type ServerStatus struct {
	Name       string      `json:"name"`
	Phase      Phase       `json:"phase"`
	Ready      bool        `json:"ready"`
	PID        int         `json:"pid"`
	Port       int         `json:"port"`
	Restarts   int         `json:"restarts"`
	StartedAt  *time.Time  `json:"startedAt"`
	Reason     string      `json:"reason"`
	Message    string      `json:"message"`
	LastExit   *LastExit   `json:"lastExit"`
	Conditions []Condition `json:"conditions"`
	// ReplicaOf and Index are set for a replica of a server with
	// spec.replicas ("api-1": "api", 1), and left out otherwise.
	ReplicaOf string `json:"replicaOf,omitempty"`
	Index     *int   `json:"index,omitempty"`
	// Membership is how the members of the process shown (PID) are found:
	// "cgroup" or "session" (DESIGN.md "Membership"); left out without a
	// process.
	Membership actuate.MembershipMode `json:"membership,omitempty"`
	// Events are the server's recent events, oldest first (not written to
	// status.json).
	Events []Event `json:"-"`
}

// StatusError is a fleet-file error that keeps the last good fleet in force.
type StatusError struct {
	File    string `json:"file"`
	Line    int    `json:"line"`
	Field   string `json:"field"`
	Message string `json:"message"`
}

func statusErrors(list spec.ErrorList) []StatusError {
	out := make([]StatusError, 0, len(list))
	for _, fe := range list {
		out = append(out, StatusError{File: fe.File, Line: fe.Line, Field: fe.Field, Message: fe.Message})
	}
	return out
}

// Get returns the named server's status.
func (s Status) Get(name string) (ServerStatus, bool) {
	i := sort.Search(len(s.Servers), func(i int) bool { return s.Servers[i].Name >= name })
	if i < len(s.Servers) && s.Servers[i].Name == name {
		return s.Servers[i], true
	}
	return ServerStatus{}, false
}

// ReadStatus reads a status.json written by WriteStatus.
func ReadStatus(path string) (Status, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Status{}, fmt.Errorf("read status: %w", err)
	}
	var s Status
	if err := json.Unmarshal(b, &s); err != nil {
		return Status{}, fmt.Errorf("read status %s: %w", path, err)
	}
	return s, nil
}

// WriteStatus writes s to path atomically (temp file in the same folder,
// then rename), mode 0600.
func WriteStatus(path string, s Status) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return fmt.Errorf("write status: %w", err)
	}
	b = append(b, '\n')
	return writeStatusWith(path, func(w io.Writer) error {
		_, err := w.Write(b)
		return err
	})
}

// writeStatusWith replaces the file at path with what encode writes, as
// WriteStatus does.
func writeStatusWith(path string, encode func(io.Writer) error) error {
	f, err := os.CreateTemp(filepath.Dir(path), ".status-*.tmp")
	if err != nil {
		return fmt.Errorf("write status: %w", err)
	}
	tmp := f.Name()
	err = encode(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp, 0o600)
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("write status %s: %w", path, err)
	}
	return nil
}

// statusFile is up's status.json between its writes. It encodes again
// only the entries of servers whose status changed since the last write,
// writes nothing when no entry, no server and no error changed, and
// streams the document to the file rather than building it in memory:
// while servers start, a write is due every statusWriteInterval, and
// encoding all of a fleet of 1,000 each time (about 1 MB) made most of the
// bytes a cold start allocated. The bytes are those of WriteStatus for the
// same Status.
type statusFile struct {
	path    string
	entries map[string]*statusEntry
	pass    uint64 // marks the entries of the last encoding
	errs    []byte // the encoding of the errors
	null    bool   // Servers was nil ("servers": null)
	written bool   // the file holds the entries and errs
	buf     *bufio.Writer
	// je encodes one entry into jb (encodeEntry).
	je *json.Encoder
	jb bytes.Buffer
}

// statusEntry is one server's status and its encoding in the document.
type statusEntry struct {
	ss   ServerStatus
	enc  []byte
	pass uint64
}

// Indentation of the document's parts, as json.MarshalIndent(s, "", "  ")
// nests them: an entry of "servers" at depth 2, "errors" at depth 1.
const (
	statusEntryPrefix = "    "
	statusFieldPrefix = "  "
	statusIndent      = "  "
)

// update brings the entries and errors up to s and reports whether any
// changed. s's servers carry no events: they are not written.
func (f *statusFile) update(s Status) (changed bool, err error) {
	if f.entries == nil {
		f.entries = make(map[string]*statusEntry, len(s.Servers))
	}
	f.pass++
	for i := range s.Servers {
		ss := &s.Servers[i]
		e := f.entries[ss.Name]
		if e == nil || !e.ss.same(ss) {
			if e == nil {
				e = &statusEntry{}
				f.entries[ss.Name] = e
			}
			enc, err := f.encodeEntry(ss, e.enc)
			if err != nil {
				delete(f.entries, ss.Name) // encoded afresh next time
				return false, fmt.Errorf("encode the status of server %s: %w", ss.Name, err)
			}
			e.ss, e.enc = ss.clone(), enc
			changed = true
		}
		e.pass = f.pass
	}
	if len(f.entries) > len(s.Servers) {
		for name, e := range f.entries {
			if e.pass != f.pass {
				delete(f.entries, name)
			}
		}
		changed = true
	}
	errs, err := json.MarshalIndent(s.Errors, statusFieldPrefix, statusIndent)
	if err != nil {
		return false, fmt.Errorf("encode the status errors: %w", err)
	}
	if !bytes.Equal(errs, f.errs) {
		f.errs, changed = errs, true
	}
	if null := s.Servers == nil; null != f.null {
		f.null, changed = null, true
	}
	return changed, nil
}

// encodeEntry is json.MarshalIndent(ss, statusEntryPrefix, statusIndent),
// written into old's memory when it fits: an encoder and its buffer are
// kept between writes, so a server's change costs no new encoding buffers
// (while 1,000 servers start, their entries change a few times each).
func (f *statusFile) encodeEntry(ss *ServerStatus, old []byte) ([]byte, error) {
	if f.je == nil {
		f.je = json.NewEncoder(&f.jb)
		f.je.SetIndent(statusEntryPrefix, statusIndent)
	}
	f.jb.Reset()
	if err := f.je.Encode(ss); err != nil {
		return nil, err
	}
	b := bytes.TrimSuffix(f.jb.Bytes(), []byte("\n")) // Encode ends the value with a newline
	return append(old[:0], b...), nil
}

// encode writes the document of s's servers, whose entries update has
// just brought up to date, to w.
func (f *statusFile) encode(w io.Writer, s Status) error {
	if f.buf == nil {
		f.buf = bufio.NewWriterSize(nil, statusBuffer)
	}
	b := f.buf
	b.Reset(w)
	b.WriteString("{\n" + statusFieldPrefix + `"servers": `)
	switch {
	case s.Servers == nil:
		b.WriteString("null")
	case len(s.Servers) == 0:
		b.WriteString("[]")
	default:
		b.WriteString("[\n")
		for i := range s.Servers {
			if i > 0 {
				b.WriteString(",\n")
			}
			b.WriteString(statusEntryPrefix)
			b.Write(f.entries[s.Servers[i].Name].enc)
		}
		b.WriteString("\n" + statusFieldPrefix + "]")
	}
	b.WriteString(",\n" + statusFieldPrefix + `"errors": `)
	b.Write(f.errs)
	b.WriteString("\n}\n")
	err := b.Flush()
	b.Reset(nil)
	return err
}

// statusBuffer is the size of the buffer the document goes through to the
// file: a write(2) per 64 KiB.
const statusBuffer = 64 << 10

// write writes s (sorted by name, as Status returns it) to the file
// unless the file already holds it. A failed write is tried again at the
// next call, whatever s is.
func (f *statusFile) write(s Status) error {
	changed, err := f.update(s)
	if err != nil {
		return err
	}
	if !changed && f.written {
		return nil
	}
	f.written = false
	if err := writeStatusWith(f.path, func(w io.Writer) error { return f.encode(w, s) }); err != nil {
		return err
	}
	f.written = true
	return nil
}

// clone returns a copy of ss that shares no memory with it (Events
// aside), so that a later change made through ss's pointers shows as a
// change.
func (ss *ServerStatus) clone() ServerStatus {
	c := *ss
	if ss.StartedAt != nil {
		at := *ss.StartedAt
		c.StartedAt = &at
	}
	if ss.LastExit != nil {
		le := *ss.LastExit
		c.LastExit = &le
	}
	if ss.Index != nil {
		i := *ss.Index
		c.Index = &i
	}
	c.Conditions = slices.Clone(ss.Conditions)
	return c
}

// same reports whether o encodes as ss does (Events aside, they are not
// written). A time is the same only with the same location.
func (ss *ServerStatus) same(o *ServerStatus) bool {
	return ss.Name == o.Name && ss.Phase == o.Phase && ss.Ready == o.Ready &&
		ss.PID == o.PID && ss.Port == o.Port && ss.Restarts == o.Restarts &&
		samePtr(ss.StartedAt, o.StartedAt) && ss.Reason == o.Reason &&
		ss.Message == o.Message && samePtr(ss.LastExit, o.LastExit) &&
		slices.Equal(ss.Conditions, o.Conditions) && ss.ReplicaOf == o.ReplicaOf &&
		ss.Membership == o.Membership &&
		samePtr(ss.Index, o.Index)
}

// samePtr reports whether a and b are both nil, or point to equal values.
func samePtr[T comparable](a, b *T) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}
