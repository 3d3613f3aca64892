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
// saving one server of a fleet of 1,000 decodes one document and runs the
// validation checks of one server alone (the checks across servers run
// over the whole fleet, as Load runs them). A Loader is
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
	l.cache.begin()
	defer l.cache.end()
	return loadWith(paths, &l.cache)
}

// docCache maps a document, as it stands in its file, to what decoding it
// gave, and keeps with each decoded server what Load derives from it.
type docCache struct {
	// prev holds the documents of the last load, next those of this one,
	// by place, then by text.
	prev, next map[docPlace]map[string]*docEntry
	// decoded counts the documents decoded (tests); derived the servers
	// whose instances, warnings and fingerprint were computed (tests);
	// checked the servers whose own validation checks ran (tests).
	decoded, derived, checked int
	// environ is procfleet's environment at the last load, and envGen
	// counts its changes: a memo is of one environment.
	environ []string
	envGen  uint64
}

// docPlace is the file a document is read from: as Source.File, and the
// folder workingDir resolves against.
type docPlace struct{ file, base string }

// begin starts a load.
func (c *docCache) begin() {
	c.next = make(map[docPlace]map[string]*docEntry, len(c.prev))
}

// end ends a load: only what it used is kept, so the cache never holds
// more than the fleet files' documents once.
func (c *docCache) end() { c.prev, c.next = c.next, nil }

// docEntry is what decoding a document's text gave, without an error, with
// the lines and indexes of the place it was last found at. The text is a
// part of a fleet file that starts at a document start marker (or the
// file's start) and ends before the next one.
type docEntry struct {
	text      string
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
	docs := make([]docResult, 0, len(parts)) // a part is one document, but for empty ones
	place := docPlace{file: file, base: base}
	prev, next := c.prev[place], c.next[place]
	if next == nil {
		next = make(map[string]*docEntry, len(parts))
		c.next[place] = next
	}
	idx := 0
	for _, p := range parts {
		// Looked up by the bytes, not copied: a document's text is
		// copied only when it is decoded.
		e, ok := next[string(p.text)]
		if !ok {
			e, ok = prev[string(p.text)]
		}
		if !ok {
			got, errs, left, n := parseDocs(file, base, p.text, budget, 0)
			if len(errs) > 0 {
				// Decoded whole, its errors are as Load reports them.
				return parse(file, data)
			}
			for i := range got {
				got[i].memo = &serverMemo{}
			}
			e = &docEntry{text: string(p.text), docs: got, line: 1, nodes: budget - left, n: n}
			c.decoded += len(got)
			e.move(p.line, idx) // its own: moved in place
		} else if e.line != p.line || e.idx != idx {
			e = e.moved(p.line, idx)
		}
		next[e.text] = e
		budget -= e.nodes
		idx += e.n
		docs = append(docs, e.docs...)
		if budget < 0 || len(docs) >= MaxServers {
			return parse(file, data)
		}
	}
	if len(docs) == 0 {
		return nil, nil // as parse gives it
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

// serverMemo is what Load derives from one decoded server: its instances,
// its warnings and its fingerprint. It is kept with its document while the
// document's text, the variables of its env files and procfleet's
// environment stay as they were, so a load computes them only for the
// servers that changed. Where the document moved in its file (a server
// above it grew), the values placed by line move with it: its lines are
// those of the document at line, and every value placed in the fleet file
// shifts by the difference.
type serverMemo struct {
	// checked: the server passed validation's checks of itself alone
	// (validator.server), which read nothing but its document's text, so
	// they are not run again while the document is kept.
	checked bool

	ok        bool
	envGen    uint64
	envFiles  []EnvFile // as read when computed
	line      int       // Source.Line when computed
	instances []Instance
	// spec are the warnings placed in the fleet file, files those in env
	// files (Warn, by warnServer).
	spec, files ErrorList
	print       []byte
}

// derive sets f's instances, warnings and fingerprints from memos (one per
// server of f, nil for a server whose document is not kept), computing
// them for the servers whose memo does not hold. f.Servers is sorted.
func (c *docCache) derive(f *Fleet, memos []*serverMemo, inherited func(string) (string, bool)) {
	if !slices.Equal(c.environ, f.Environ) {
		c.environ = slices.Clone(f.Environ)
		c.envGen++
	}
	n := 0
	for i := range memos {
		s := &f.Servers[i]
		m := memos[i]
		if m == nil {
			m = &serverMemo{}
		}
		if !m.ok || m.envGen != c.envGen || !envFilesEqual(m.envFiles, s.EnvFiles) {
			*m = serverMemo{checked: m.checked, ok: true, envGen: c.envGen, envFiles: s.EnvFiles, line: s.Source.Line}
			m.instances = s.appendInstances(nil, inherited)
			for j := range m.instances {
				m.instances[j].Server = nil // set to the fleet's own at each load
			}
			m.spec, m.files = warnServer(s, inherited)
			m.print = s.Fingerprint()
			c.derived++
		}
		memos[i] = m
		n += len(m.instances)
	}
	f.instances = make([]Instance, 0, n)
	f.prints = make([][]byte, len(memos))
	var warnings ErrorList
	for i, m := range memos {
		s := &f.Servers[i]
		dl := s.Source.Line - m.line
		for _, in := range m.instances {
			in.Server = s
			if dl != 0 {
				in.Env = slices.Clone(in.Env)
				for k := range in.Env {
					if in.Env[k].From.Kind == FromEnv {
						in.Env[k].From.Line += dl
					}
				}
			}
			f.instances = append(f.instances, in)
		}
		for _, w := range m.spec {
			if dl != 0 {
				moved := *w
				moved.Line += dl
				w = &moved
			}
			warnings = append(warnings, w)
		}
		warnings = append(warnings, m.files...)
		f.prints[i] = m.print
	}
	f.Warnings = sortWarnings(warnings)
}

// envFilesEqual reports whether a and b are the same env files with the
// same variables, each from the same line.
func envFilesEqual(a, b []EnvFile) bool {
	return slices.EqualFunc(a, b, func(x, y EnvFile) bool {
		return x.Path == y.Path && x.Name == y.Name && slices.Equal(x.Vars, y.Vars)
	})
}
