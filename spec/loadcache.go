package spec

import (
	"bytes"
	"maps"
	"path/filepath"
	"slices"
	"sync"
)

// Loader loads fleets as Load does, and keeps each document it decoded for
// its next Load: a document whose bytes and file are the same is not
// decoded again (only its lines and index are moved when it moved), so
// saving one server of a fleet of 1,000 decodes one document. A Loader is
// safe for concurrent use (its loads run one at a time). The zero Loader
// is ready to use.
//
// What it returns is what Load would return for the same files, errors
// included: a file with a YAML directive (%), a document end marker
// (...), a line break other than \n or \r\n, or any error, is decoded
// whole, as by Load. The Servers of the fleets it returns share memory with
// each other and with the Loader: read them, do not change them in place.
type Loader struct {
	mu    sync.Mutex
	cache docCache
}

// Load is spec.Load through the Loader's documents.
func (l *Loader) Load(paths ...string) (*Fleet, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cache.next = map[docKey]*docEntry{}
	defer func() {
		// Only what this load used is kept: the cache never holds more
		// than the fleet files' documents once.
		l.cache.prev, l.cache.next = l.cache.next, nil
	}()
	return loadWith(paths, &l.cache)
}

// docCache maps a document, as it stands in its file, to what decoding it
// gave.
type docCache struct {
	prev, next map[docKey]*docEntry
	// decoded counts the documents decoded (tests).
	decoded int
}

// docKey is a part of a fleet file that starts at a document start marker
// (or the file's start) and ends before the next one.
type docKey struct {
	file, base string // as Source.File; the folder workingDir resolves against
	text       string
}

// docEntry is what decoding a docKey's text gave, without an error, with
// the lines and indexes of the place it was last found at.
type docEntry struct {
	docs      []docResult
	line, idx int // the part's first line (1-based) and first document index
	nodes     int // charged to the file's node budget
	n         int // documents read, empty ones and other kinds included
}

// parse is parse(file, data), decoding only the documents not in c.
func (c *docCache) parse(file string, data []byte) ([]docResult, ErrorList) {
	if c == nil || len(data) > MaxFileSize {
		return parse(file, data)
	}
	parts := splitDocs(data)
	if parts == nil {
		return parse(file, data)
	}
	base, err := filepath.Abs(filepath.Dir(file))
	if err != nil {
		return parse(file, data)
	}
	budget := nodeBudget(data)
	var docs []docResult
	idx := 0
	for _, p := range parts {
		k := docKey{file: file, base: base, text: string(p.text)}
		e, ok := c.next[k]
		if !ok {
			e, ok = c.prev[k]
		}
		if !ok {
			got, errs, left, n := parseDocs(file, base, p.text, budget, 0)
			if len(errs) > 0 {
				// Decoded whole, its errors are as Load reports them.
				return parse(file, data)
			}
			e = &docEntry{docs: got, line: 1, nodes: budget - left, n: n}
			c.decoded += len(got)
			e.move(p.line, idx) // its own: moved in place
		} else if e.line != p.line || e.idx != idx {
			e = e.moved(p.line, idx)
		}
		c.next[k] = e
		budget -= e.nodes
		idx += e.n
		docs = append(docs, e.docs...)
		if budget < 0 || len(docs) >= MaxServers {
			return parse(file, data)
		}
	}
	return docs, nil
}

// moved is a copy of e for its part found at line with its first
// document at idx: e's documents are in fleets already.
func (e *docEntry) moved(line, idx int) *docEntry {
	m := *e
	m.docs = slices.Clone(e.docs)
	for i := range m.docs {
		m.docs[i].server.Source.Fields = maps.Clone(e.docs[i].server.Source.Fields)
	}
	m.move(line, idx)
	return &m
}

// move moves e's lines and indexes in place to line and idx.
func (e *docEntry) move(line, idx int) {
	dl, di := line-e.line, idx-e.idx
	e.line, e.idx = line, idx
	for i := range e.docs {
		src := &e.docs[i].server.Source
		src.Line += dl
		src.Doc += di
		for f := range src.Fields {
			src.Fields[f] += dl
		}
	}
}

// docPart is a part of a file as splitDocs cuts it.
type docPart struct {
	line int // 1-based
	text []byte
}

// splitDocs cuts data before each document start marker (a line that is
// "---" alone or followed by a space or tab), so that decoding the parts
// one by one reads the documents decoding data whole does. It returns nil
// where it cannot be sure of that: a directive or a document end marker,
// a "---" followed by anything else, or a line break YAML knows and this
// split does not (a lone \r, NEL, LS, PS).
func splitDocs(data []byte) []docPart {
	if bytes.Contains(data, []byte("\xc2\x85")) || bytes.Contains(data, []byte("\xe2\x80\xa8")) || bytes.Contains(data, []byte("\xe2\x80\xa9")) {
		return nil
	}
	if bytes.Count(data, []byte{'\r'}) != bytes.Count(data, []byte("\r\n")) {
		return nil
	}
	var parts []docPart
	start, startLine := 0, 1
	line := 1
	for off := 0; off < len(data); line++ {
		end := bytes.IndexByte(data[off:], '\n')
		next := len(data)
		if end >= 0 {
			next = off + end + 1
		}
		l := data[off:next]
		switch {
		case len(l) > 0 && l[0] == '%', bytes.HasPrefix(l, []byte("...")):
			return nil
		case bytes.HasPrefix(l, []byte("---")):
			if len(l) > 3 && !bytes.ContainsRune([]byte(" \t\r\n"), rune(l[3])) {
				return nil
			}
			if off > start {
				parts = append(parts, docPart{line: startLine, text: data[start:off]})
			}
			start, startLine = off, line
		}
		off = next
	}
	if start < len(data) {
		parts = append(parts, docPart{line: startLine, text: data[start:]})
	}
	return parts
}
