package spec

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// DefaultFile is the fleet file Load reads when given no paths.
const DefaultFile = "procfleet.yaml"

// Bounds that keep a hostile or mistaken fleet file from exhausting memory
// or time. Each one crossed is an error that names it.
const (
	// MaxFileSize is the largest fleet file read, in bytes.
	MaxFileSize = 4 << 20
	// MaxServers is the most servers a fleet may declare, over all files.
	MaxServers = 10_000
	// MaxFiles is the most fleet files one Load reads.
	MaxFiles = 1_000

	maxNodes      = 2_000_000 // YAML nodes and keys decoded per file (aliases included), at most
	maxErrors     = 100       // errors reported per file before giving up on it
	maxNameLen    = 64        // longest name compared by edit distance
	maxMergeDepth = 100       // nesting of YAML merge keys (<<)
)

// Fleet is a loaded, defaulted and validated set of servers.
type Fleet struct {
	// Servers, sorted by name.
	Servers []Server
	// Files are the fleet files read, in the order read.
	Files []string
	// Environ is procfleet's own environment ("NAME=value"), which $(NAME)
	// may refer to. Load sets it to os.Environ(); nil means an empty one.
	Environ []string
	// Warnings are problems that do not keep the fleet from loading, sorted
	// as errors are: $(NAME) references that stay as written, shell-style
	// ${NAME} that nothing expands, variables procfleet overrides. A
	// warning about an env file's line names that file and line, and the
	// variable as its Field.
	Warnings ErrorList

	instances []Instance
	// prints are the servers' fingerprints, by index, when a Loader
	// loaded the fleet; nil otherwise.
	prints [][]byte
}

// Get returns the server with the given name.
func (f *Fleet) Get(name string) (*Server, bool) {
	i, ok := slices.BinarySearchFunc(f.Servers, name, func(s Server, name string) int {
		return strings.Compare(s.Metadata.Name, name)
	})
	if !ok {
		return nil, false
	}
	return &f.Servers[i], true
}

// Load reads the fleet files at paths: files, multi-document files and
// folders (their *.yaml and *.yml files, sorted, not recursive, hidden files
// skipped), following symlinks; no paths means DefaultFile. It decodes
// strictly, sets defaults, reads every server's env files (relative to the
// folder of the file that declares it), validates the whole fleet, and
// computes its instances and warnings. On any problem it returns a nil
// Fleet and an ErrorList holding every error found, sorted.
func Load(paths ...string) (*Fleet, error) {
	return loadWith(paths, nil)
}

// testHookListed, when set (tests only), runs between the listing of the
// fleet files and their reads: a test removes a file there, as an editor
// that deletes and re-creates a file can at any moment.
var testHookListed func()

// loadWith is Load, decoding each document through c when c is not nil.
// A file of a listed folder that is gone when read is skipped: it is no
// longer in the folder. A file named itself is an error when gone.
func loadWith(paths []string, c *docCache) (*Fleet, error) {
	if len(paths) == 0 {
		paths = []string{DefaultFile}
	}
	var errs ErrorList
	files, listed := expand(paths, &errs)
	if testHookListed != nil {
		testHookListed()
	}
	if len(files) > MaxFiles {
		errs = append(errs, &FieldError{File: files[MaxFiles], Message: fmt.Sprintf("too many fleet files: more than %d", MaxFiles)})
		files = files[:MaxFiles]
	}
	var all []docResult
	var read []string
	for _, file := range files {
		data, err := readFile(file)
		if err != nil {
			if _, lerr := os.Lstat(file); listed[file] && errors.Is(lerr, fs.ErrNotExist) {
				continue // removed from its folder since the listing (an editor's save)
			}
			errs = append(errs, &FieldError{File: file, Message: err.Error(), Err: err})
			continue
		}
		read = append(read, file)
		docs, ferrs := c.parse(file, data)
		errs = append(errs, ferrs...)
		if all == nil {
			all = docs // not copied: the fleet of one file is the common case
		} else {
			all = append(all, docs...)
		}
		if len(all) > MaxServers {
			break
		}
	}
	if len(all) > MaxServers {
		s := all[MaxServers].server
		errs = append(errs, &FieldError{File: s.Source.File, Line: s.Source.Line, Message: fmt.Sprintf("too many servers: more than %d", MaxServers)})
		all = all[:MaxServers]
	}
	servers := make([]Server, len(all))
	for i := range all {
		servers[i] = all[i].server
	}
	errs = append(errs, readEnvFiles(servers)...)
	var passed []bool // by server: its own checks passed (a kept document's)
	if c != nil {
		passed = make([]bool, len(all))
		for i := range all {
			passed[i] = all[i].memo != nil && all[i].memo.checked
			if !passed[i] {
				c.checked++
			}
		}
	}
	for _, is := range validate(servers, passed) {
		if !all[is.server].covers(is.err.Field) {
			errs = append(errs, is.err)
		}
	}
	for i := range passed {
		if m := all[i].memo; m != nil && passed[i] {
			m.checked = true
		}
	}
	if len(errs) > 0 {
		errs.Sort()
		return nil, errs
	}
	f := &Fleet{Files: read, Environ: os.Environ()}
	inherited := lookupIn(f.Environ)
	if c == nil {
		slices.SortFunc(servers, func(a, b Server) int { return strings.Compare(a.Metadata.Name, b.Metadata.Name) })
		f.Servers = servers
		f.instances = instancesOf(f.Servers, inherited)
		f.Warnings = Warn(f.Servers, inherited)
		return f, nil
	}
	// Names are unique (validated): sorting by name has one result.
	order := make([]int, len(servers))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return strings.Compare(servers[a].Metadata.Name, servers[b].Metadata.Name) })
	f.Servers = make([]Server, len(servers))
	memos := make([]*serverMemo, len(servers))
	for i, j := range order {
		f.Servers[i], memos[i] = servers[j], all[j].memo
	}
	c.derive(f, memos, inherited)
	return f, nil
}

// EnvFileError is the Err of a FieldError about an env file that could not
// be read; Path names it (absolute), so that a watcher can wait for a
// missing one to appear.
type EnvFileError struct {
	Path string
	Err  error
}

func (e *EnvFileError) Error() string { return "read env file " + e.Path + ": " + unwrapPath(e.Err) }

// Unwrap returns the underlying error (fs.ErrNotExist for a missing file).
func (e *EnvFileError) Unwrap() error { return e.Err }

// envRead is one env file as read, shared by the servers that name it.
type envRead struct {
	vars []Var
	err  error // reading failed (missing, not a regular file, too large)
	bad  bool  // its syntax errors are already reported
}

// readEnvFiles reads the env files of every server, each file once, and
// sets Server.EnvFiles. A file that cannot be read is an error at each
// spec.envFile entry that names it (file and line of the entry); a syntax
// error is reported once, at the env file's own line.
func readEnvFiles(servers []Server) ErrorList {
	var errs ErrorList
	cache := map[string]*envRead{}
	for i := range servers {
		s := &servers[i]
		s.EnvFiles = nil
		if len(s.Spec.EnvFile) == 0 {
			continue
		}
		base, err := filepath.Abs(filepath.Dir(s.Source.File))
		if err != nil {
			errs = append(errs, &FieldError{File: s.Source.File, Line: lineOf(s, "spec.envFile"), Field: "spec.envFile", Message: fmt.Sprintf("resolve folder: %v", err), Err: err})
			continue
		}
		for j, entry := range s.Spec.EnvFile {
			if entry == "" || strings.ContainsRune(entry, 0) {
				continue // Validate reports it
			}
			field := fmt.Sprintf("spec.envFile[%d]", j)
			path, shown := filepath.Clean(entry), filepath.Clean(entry)
			if !filepath.IsAbs(entry) {
				path = filepath.Join(base, entry)
				shown = filepath.Join(filepath.Dir(s.Source.File), entry)
			}
			r, ok := cache[path]
			if !ok {
				r = &envRead{}
				cache[path] = r
				var data []byte
				if data, r.err = readEnvFile(path); r.err == nil {
					var perrs []dotenvError
					r.vars, perrs = parseDotenv(data)
					for _, pe := range perrs {
						errs = append(errs, &FieldError{File: shown, Line: pe.line,
							Message: fmt.Sprintf("%s (env file of %s, %s)", pe.msg, s.Metadata.Name, field)})
					}
					r.bad = len(perrs) > 0
				}
			}
			if r.err != nil {
				errs = append(errs, &FieldError{File: s.Source.File, Line: lineOf(s, field), Field: field,
					Message: fmt.Sprintf("env file %s: %s", shown, unwrapPath(r.err)), Err: &EnvFileError{Path: path, Err: r.err}})
				continue
			}
			s.EnvFiles = append(s.EnvFiles, EnvFile{Path: path, Name: shown, Vars: r.vars})
		}
	}
	return errs
}

// readEnvFile reads a regular file of at most MaxFileSize bytes.
func readEnvFile(path string) ([]byte, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, errors.New("not a regular file")
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxFileSize {
		return nil, fmt.Errorf("larger than %d bytes (4 MiB)", MaxFileSize)
	}
	return data, nil
}

// expand turns the paths into the list of fleet files, each once.
func expand(paths []string, errs *ErrorList) (files []string, listed map[string]bool) {
	listed = map[string]bool{}
	var infos []os.FileInfo
	add := func(file string, fi os.FileInfo) bool {
		for _, seen := range infos {
			if os.SameFile(seen, fi) {
				return false
			}
		}
		files = append(files, file)
		infos = append(infos, fi)
		return true
	}
	for _, p := range paths {
		fi, err := os.Stat(p)
		if err != nil {
			*errs = append(*errs, &FieldError{File: p, Message: "read fleet file: " + unwrapPath(err), Err: err})
			continue
		}
		if !fi.IsDir() {
			if !fi.Mode().IsRegular() {
				*errs = append(*errs, &FieldError{File: p, Message: "not a regular file or folder"})
				continue
			}
			add(p, fi)
			continue
		}
		entries, err := os.ReadDir(p)
		if err != nil {
			*errs = append(*errs, &FieldError{File: p, Message: "read fleet folder: " + unwrapPath(err), Err: err})
			continue
		}
		for _, e := range entries { // sorted by name
			name := e.Name()
			if strings.HasPrefix(name, ".") || (filepath.Ext(name) != ".yaml" && filepath.Ext(name) != ".yml") {
				continue
			}
			file := filepath.Join(p, name)
			fi, err := os.Stat(file)
			if err != nil {
				if _, lerr := os.Lstat(file); errors.Is(lerr, fs.ErrNotExist) {
					continue // removed since the listing: no longer in the folder
				}
				*errs = append(*errs, &FieldError{File: file, Message: "read fleet file: " + unwrapPath(err), Err: err})
				continue
			}
			if fi.IsDir() {
				continue
			}
			if !fi.Mode().IsRegular() {
				*errs = append(*errs, &FieldError{File: file, Message: "not a regular file"})
				continue
			}
			if add(file, fi) {
				listed[file] = true
			}
			if len(files) > MaxFiles {
				return files, listed
			}
		}
	}
	return files, listed
}

// unwrapPath drops the path from a *PathError's message: FieldError names
// the file already.
func unwrapPath(err error) string {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

// readFile reads a fleet file of at most MaxFileSize bytes.
func readFile(file string) ([]byte, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, fmt.Errorf("read fleet file: %s", unwrapPath(err))
	}
	defer f.Close()
	var buf bytes.Buffer
	if fi, err := f.Stat(); err == nil && fi.Size() <= MaxFileSize {
		buf.Grow(int(fi.Size()) + bytes.MinRead) // read at once, not grown from 512 bytes
	}
	if _, err := buf.ReadFrom(io.LimitReader(f, MaxFileSize+1)); err != nil {
		return nil, fmt.Errorf("read fleet file: %w", err)
	}
	data := buf.Bytes()
	if len(data) > MaxFileSize {
		return nil, fmt.Errorf("fleet file larger than %d bytes (4 MiB)", MaxFileSize)
	}
	return data, nil
}

// LoadBytes decodes the fleet file data, read from file, strictly and sets
// defaults. It does not validate (see Validate): names, ports and
// dependencies are checked over the whole fleet by Load. It reads no env
// file (Server.EnvFiles stays empty). workingDir is resolved against
// file's folder. On any problem it returns nil servers and
// an ErrorList of every decoding error, sorted.
func LoadBytes(file string, data []byte) ([]Server, error) {
	docs, errs := parse(file, data)
	if len(errs) > 0 {
		errs.Sort()
		return nil, errs
	}
	servers := make([]Server, len(docs))
	for i := range docs {
		servers[i] = docs[i].server
	}
	return servers, nil
}

// docResult is one decoded document and the fields that failed to decode.
type docResult struct {
	server Server
	bad    []string
	// memo, for a document a Loader keeps, is what Load derived from its
	// server at the last load that used it; nil otherwise.
	memo *serverMemo
}

// covers reports whether field is, lies under, or holds a field that failed
// to decode: its validation errors would only repeat the decoding error
// ("a probe needs a handler" beside "unknown field path, did you mean
// httpGet.path?").
func (r *docResult) covers(field string) bool {
	for _, b := range r.bad {
		if b == "" || field == b || under(field, b) || field != "" && under(b, field) {
			return true
		}
	}
	return false
}

// under reports whether field lies under parent.
func under(field, parent string) bool {
	return strings.HasPrefix(field, parent+".") || strings.HasPrefix(field, parent+"[")
}

var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// parse decodes every document of data. Documents that are not Servers
// (wrong apiVersion or kind, not a mapping) are left out; the others are
// returned, defaulted, even when some of their fields failed to decode.
func parse(file string, data []byte) (docs []docResult, errs ErrorList) {
	if len(data) > MaxFileSize {
		return nil, ErrorList{{File: file, Message: fmt.Sprintf("fleet file larger than %d bytes (4 MiB)", MaxFileSize)}}
	}
	base, err := filepath.Abs(filepath.Dir(file))
	if err != nil {
		return nil, ErrorList{{File: file, Message: fmt.Sprintf("resolve folder: %v", err), Err: err}}
	}
	docs, errs, _, _ = parseDocs(file, base, data, nodeBudget(data), 0)
	return docs, errs
}

// nodeBudget is the YAML nodes a file may decode. It grows with the file,
// so that a small hostile file costs little; a legitimate file has far
// fewer nodes than 16 per byte.
func nodeBudget(data []byte) int { return min(maxNodes, 100_000+16*len(data)) }

// parseDocs decodes the documents of data, the first one numbered idx0,
// charging their nodes to budget. It returns what is left of the budget
// and how many documents it read (empty ones and other kinds included).
func parseDocs(file, base string, data []byte, budget, idx0 int) (docs []docResult, errs ErrorList, left, n int) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	idx := idx0
	defer func() { left, n = budget, idx-idx0 }()
	for ; ; idx++ {
		var doc yaml.Node
		err := decodeNode(dec, &doc)
		if err == io.EOF {
			break
		}
		if err != nil {
			e := &FieldError{File: file, Message: err.Error(), Err: err}
			if m := yamlLine.FindStringSubmatch(err.Error()); m != nil {
				e.Line, _ = strconv.Atoi(m[1])
				line, msg := yamlSyntaxHint(data, e.Line, m[2])
				e.Line, e.Message = line, "invalid YAML: "+msg
			} else {
				e.Message = "invalid YAML: " + strings.TrimPrefix(err.Error(), "yaml: ")
			}
			errs = append(errs, e)
			break // the parser cannot resume after a syntax error
		}
		if len(docs) >= MaxServers {
			errs = append(errs, &FieldError{File: file, Line: doc.Line, Message: fmt.Sprintf("too many servers: more than %d", MaxServers)})
			break
		}
		d := &decoder{file: file, budget: budget, lines: map[string]int{}}
		r, ok := d.document(&doc, idx)
		budget = d.budget
		for _, e := range d.errs {
			r.bad = append(r.bad, e.Field)
		}
		errs = append(errs, d.errs...)
		if d.broke {
			break
		}
		if !ok {
			continue
		}
		SetDefaults(&r.server)
		resolveWorkingDir(&r.server, base)
		docs = append(docs, r)
	}
	return
}

// decodeNode reads the next document; a panic in the YAML parser (none is
// known, this is defence in depth for hostile input) becomes an error.
func decodeNode(dec *yaml.Decoder, n *yaml.Node) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("yaml: parser failed: %v", r)
		}
	}()
	return dec.Decode(n)
}

// document decodes one YAML document into a Server. ok is false for an
// empty document or one that is not a Server at all.
func (d *decoder) document(doc *yaml.Node, idx int) (r docResult, ok bool) {
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 {
		return r, false
	}
	root := d.resolve(doc.Content[0], "")
	if root == nil || isNull(root) {
		return r, false // empty document
	}
	if root.Kind != yaml.MappingNode {
		d.errorf(root.Line, "", "expected a Server document (a mapping with apiVersion: %s, kind: %s), got %s", APIVersion, Kind, describe(root))
		return r, false
	}
	// apiVersion and kind first: a document of another kind would only
	// drown in unknown-field errors.
	var apiVersion, kind *yaml.Node
	for i := 0; i+1 < len(root.Content); i += 2 {
		switch root.Content[i].Value {
		case "apiVersion":
			apiVersion = root.Content[i]
		case "kind":
			kind = root.Content[i]
		}
	}
	okHeader := true
	check := func(key *yaml.Node, field, want string) {
		if key == nil {
			d.errorf(root.Line, field, "required: must be %q", want)
			okHeader = false
			return
		}
		v := d.resolve(root.Content[slices.Index(root.Content, key)+1], field)
		if v == nil || v.Kind != yaml.ScalarNode || v.Value != want {
			got := "null"
			if v != nil {
				got = describe(v)
			}
			d.errorf(key.Line, field, "unsupported value %s: must be %q", got, want)
			okHeader = false
		}
	}
	check(apiVersion, "apiVersion", APIVersion)
	check(kind, "kind", Kind)
	if !okHeader {
		return r, false
	}
	d.decode(root, reflect.ValueOf(&r.server).Elem(), "", root.Line)
	r.server.Source = Source{File: d.file, Line: root.Line, Doc: idx, Fields: d.lines}
	return r, true
}

// resolveWorkingDir makes workingDir absolute against base, the absolute
// folder of the fleet file; empty means base.
func resolveWorkingDir(s *Server, base string) {
	switch {
	case s.Spec.WorkingDir == "":
		s.Spec.WorkingDir = base
	case !filepath.IsAbs(s.Spec.WorkingDir):
		s.Spec.WorkingDir = filepath.Join(base, s.Spec.WorkingDir)
	default:
		s.Spec.WorkingDir = filepath.Clean(s.Spec.WorkingDir)
	}
}
