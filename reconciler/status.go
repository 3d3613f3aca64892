package reconciler

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"time"

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
	return writeStatusFile(path, append(b, '\n'))
}

// writeStatusFile replaces the file at path with b as WriteStatus does.
func writeStatusFile(path string, b []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), ".status-*.tmp")
	if err != nil {
		return fmt.Errorf("write status: %w", err)
	}
	tmp := f.Name()
	_, err = f.Write(b)
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
// only the entries of servers whose status changed since the last
// encoding, and write skips a content already written: while servers
// start, a write is due every statusWriteInterval, and encoding all of a
// fleet of 1,000 each time (about 1 MB) made most of the bytes a cold start
// allocated. The bytes are those of WriteStatus for the same Status.
type statusFile struct {
	path    string
	entries map[string]*statusEntry
	pass    uint64 // marks the entries of the last encoding
	doc     []byte // the content last written; nil before the first write
	next    []byte // the buffer of the next encoding
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

// encode returns the content of status.json for s (valid until the next
// call). s's servers carry no events: they are not written.
func (f *statusFile) encode(s Status) ([]byte, error) {
	if f.entries == nil {
		f.entries = make(map[string]*statusEntry, len(s.Servers))
	}
	f.pass++
	b := append(f.next[:0], "{\n"+statusFieldPrefix+`"servers": `...)
	switch {
	case s.Servers == nil:
		b = append(b, "null"...)
	case len(s.Servers) == 0:
		b = append(b, "[]"...)
	default:
		b = append(b, "[\n"...)
		for i := range s.Servers {
			ss := &s.Servers[i]
			e := f.entries[ss.Name]
			if e == nil || !e.ss.same(ss) {
				enc, err := json.MarshalIndent(ss, statusEntryPrefix, statusIndent)
				if err != nil {
					return nil, fmt.Errorf("encode the status of server %s: %w", ss.Name, err)
				}
				e = &statusEntry{ss: ss.clone(), enc: enc}
				f.entries[ss.Name] = e
			}
			e.pass = f.pass
			if i > 0 {
				b = append(b, ",\n"...)
			}
			b = append(b, statusEntryPrefix...)
			b = append(b, e.enc...)
		}
		b = append(b, "\n"+statusFieldPrefix+"]"...)
	}
	errs, err := json.MarshalIndent(s.Errors, statusFieldPrefix, statusIndent)
	if err != nil {
		return nil, fmt.Errorf("encode the status errors: %w", err)
	}
	b = append(b, ",\n"+statusFieldPrefix+`"errors": `...)
	b = append(b, errs...)
	b = append(b, "\n}\n"...)
	if len(f.entries) > len(s.Servers) {
		for name, e := range f.entries {
			if e.pass != f.pass {
				delete(f.entries, name)
			}
		}
	}
	f.next = b
	return b, nil
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
		samePtr(ss.Index, o.Index)
}

// samePtr reports whether a and b are both nil, or point to equal values.
func samePtr[T comparable](a, b *T) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// write writes s to the file unless the file already holds it. A failed
// write is tried again at the next call, whatever s is.
func (f *statusFile) write(s Status) error {
	b, err := f.encode(s)
	if err != nil {
		return err
	}
	if f.doc != nil && bytes.Equal(b, f.doc) {
		return nil
	}
	if err := writeStatusFile(f.path, b); err != nil {
		f.doc = nil
		return err
	}
	f.doc, f.next = b, f.doc
	return nil
}
