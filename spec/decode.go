package spec

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync"

	"go.yaml.in/yaml/v3"
)

// decoder turns a YAML node tree into a Go value, strictly: an unknown
// field, a duplicate field or a value of the wrong type is an error, and
// every error is collected with its line and field path. It walks the Go
// type, not the node tree, so its recursion depth is bounded by the depth
// of the types, and it charges every node it visits (aliases included) to a
// budget, so that alias fan-out ("billion laughs") cannot exhaust memory or
// time.
type decoder struct {
	file   string
	errs   ErrorList
	lines  map[string]int
	budget int
	// broke is set once the budget is spent; decoding stops.
	broke bool
	// merging holds the mappings whose merge keys are being expanded, to
	// catch a mapping that merges itself (&a {<<: *a}).
	merging map[*yaml.Node]bool
}

func (d *decoder) errorf(line int, field, format string, args ...any) {
	if d.broke {
		return
	}
	if len(d.errs) >= maxErrors {
		d.broke = true
		d.errs = append(d.errs, &FieldError{File: d.file, Line: line, Message: fmt.Sprintf("too many errors (more than %d), giving up on this file", maxErrors)})
		return
	}
	d.errs = append(d.errs, &FieldError{File: d.file, Line: line, Field: field, Message: fmt.Sprintf(format, args...)})
}

// charge takes one node from the budget; false means decoding must stop.
func (d *decoder) charge(n *yaml.Node, path string) bool {
	if d.broke {
		return false
	}
	d.budget--
	if d.budget < 0 {
		d.errorf(n.Line, path, "document too complex: more than %d YAML nodes to decode (aliases included)", maxNodes)
		d.broke = true
		return false
	}
	return true
}

// resolve follows aliases to the node they stand for.
func (d *decoder) resolve(n *yaml.Node, path string) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode; i++ {
		if i > 1000 || !d.charge(n, path) {
			return nil
		}
		n = n.Alias
	}
	return n
}

// zeroNotAllowed are integer fields where 0 would read as "absent" once
// decoded, but written out is a mistake worth naming.
var zeroNotAllowed = map[string]string{
	"spec.port": "port 0 is not a port: omit spec.port for a server that listens on none",
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

// describe names a node's kind and value for "expected X, got Y" messages.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a sequence"
	case yaml.DocumentNode:
		return "a document"
	case yaml.ScalarNode:
		v := n.Value
		if len(v) > 40 {
			v = v[:37] + "..."
		}
		switch n.ShortTag() {
		case "!!null":
			return "null"
		case "!!str":
			return "string " + strconv.Quote(v)
		case "!!int":
			return "integer " + v
		case "!!float":
			return "number " + v
		case "!!bool":
			return "boolean " + v
		default:
			return fmt.Sprintf("%s %s", n.ShortTag(), strconv.Quote(v))
		}
	}
	return "an unknown node"
}

// specType is ServerSpec's type, whose fields the hints name.
var specType = reflect.TypeOf(ServerSpec{})

// field is one JSON-named field of a struct type.
type field struct {
	name  string
	index int
}

type structInfo struct {
	fields []field
	byName map[string]int // name -> index into fields
	names  []string       // valid names, in declaration order
}

var structCache sync.Map // reflect.Type -> *structInfo

func infoOf(t reflect.Type) *structInfo {
	if v, ok := structCache.Load(t); ok {
		return v.(*structInfo)
	}
	info := &structInfo{byName: map[string]int{}}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		info.byName[name] = len(info.fields)
		info.fields = append(info.fields, field{name: name, index: i})
		info.names = append(info.names, name)
	}
	structCache.Store(t, info)
	return info
}

// pair is one key and value of a mapping, after merge keys are applied.
type pair struct{ key, value *yaml.Node }

// pairs lists the key/value pairs of a mapping node: its own keys first,
// then those brought in by merge keys ("<<: *base") that it does not set
// itself. Duplicate own keys are errors.
func (d *decoder) pairs(n *yaml.Node, path string) []pair {
	if d.merging[n] || len(d.merging) >= maxMergeDepth {
		d.errorf(n.Line, path, "merge key (<<) refers to a mapping that contains it, or nests deeper than %d", maxMergeDepth)
		return nil
	}
	if d.merging == nil {
		d.merging = map[*yaml.Node]bool{}
	}
	d.merging[n] = true
	defer delete(d.merging, n)
	var own, merged []pair
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		// Every key is charged, since merge keys can bring one mapping's
		// keys in many times.
		if !d.charge(k, path) {
			return nil
		}
		if k.Kind == yaml.ScalarNode && k.ShortTag() == "!!merge" {
			merged = append(merged, d.mergePairs(v, path)...)
			continue
		}
		if k.Kind != yaml.ScalarNode || (k.ShortTag() != "!!str" && k.ShortTag() != "!!int" && k.ShortTag() != "!!bool" && k.ShortTag() != "!!float") {
			d.errorf(k.Line, path, "field names must be strings, got %s", describe(k))
			continue
		}
		if first, ok := seen[k.Value]; ok {
			d.errorf(k.Line, joinField(path, shorten(k.Value)), "duplicate field %q (first at line %d)", shorten(k.Value), first)
			continue
		}
		seen[k.Value] = k.Line
		own = append(own, pair{k, v})
	}
	for _, p := range merged {
		if _, ok := seen[p.key.Value]; ok {
			continue
		}
		seen[p.key.Value] = p.key.Line
		own = append(own, p)
	}
	return own
}

func (d *decoder) mergePairs(v *yaml.Node, path string) []pair {
	v = d.resolve(v, path)
	if v == nil {
		return nil
	}
	switch v.Kind {
	case yaml.MappingNode:
		if !d.charge(v, path) {
			return nil
		}
		return d.pairs(v, path)
	case yaml.SequenceNode:
		var out []pair
		for _, item := range v.Content {
			item = d.resolve(item, path)
			if item == nil {
				return out
			}
			if item.Kind != yaml.MappingNode {
				d.errorf(item.Line, path, "merge key (<<) needs a mapping or a sequence of mappings, got %s", describe(item))
				continue
			}
			if !d.charge(item, path) {
				return out
			}
			out = append(out, d.pairs(item, path)...)
		}
		return out
	}
	d.errorf(v.Line, path, "merge key (<<) needs a mapping or a sequence of mappings, got %s", describe(v))
	return nil
}

func joinField(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

// decode sets v from n. path is the field path of v; line the line to
// record for it (the key's line for a struct field).
func (d *decoder) decode(n *yaml.Node, v reflect.Value, path string, line int) {
	n = d.resolve(n, path)
	if n == nil || !d.charge(n, path) {
		return
	}
	if line == 0 {
		line = n.Line
	}
	if path != "" {
		d.lines[path] = line
	}
	if isNull(n) {
		return // leave the zero value: an empty field is an absent one
	}
	switch v.Kind() {
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		d.decode(n, p.Elem(), path, line)
		v.Set(p)
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			d.errorf(n.Line, path, "expected a mapping, got %s%s", describe(n), typeHint(path, n))
			return
		}
		info := infoOf(v.Type())
		for _, p := range d.pairs(n, path) {
			name := p.key.Value
			fpath := joinField(path, shorten(name))
			i, ok := info.byName[name]
			if !ok {
				hint := unknownFieldHint(path, name)
				if hint == "" {
					hint = suggest(name, info.names)
				}
				d.errorf(p.key.Line, fpath, "unknown field %q%s", shorten(name), hint)
				continue
			}
			d.decode(p.value, v.Field(info.fields[i].index), fpath, p.key.Line)
		}
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			d.errorf(n.Line, path, "expected a sequence, got %s%s", describe(n), typeHint(path, n))
			return
		}
		s := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
		for i, item := range n.Content {
			d.decode(item, s.Index(i), fmt.Sprintf("%s[%d]", path, i), 0)
		}
		v.Set(s)
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			d.errorf(n.Line, path, "expected a mapping, got %s", describe(n))
			return
		}
		m := reflect.MakeMap(v.Type())
		for _, p := range d.pairs(n, path) {
			kpath := fmt.Sprintf("%s[%s]", path, shorten(p.key.Value))
			if p.key.ShortTag() != "!!str" {
				d.errorf(p.key.Line, kpath, "expected a string key, got %s (quote it)", describe(p.key))
				continue
			}
			e := reflect.New(v.Type().Elem()).Elem()
			d.decode(p.value, e, kpath, p.key.Line)
			m.SetMapIndex(reflect.ValueOf(p.key.Value).Convert(v.Type().Key()), e)
		}
		v.Set(m)
	case reflect.String:
		if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!str" {
			hint := ""
			if n.Kind == yaml.ScalarNode {
				hint = fmt.Sprintf(" (quote it: %q)", n.Value)
			}
			d.errorf(n.Line, path, "expected a string, got %s%s", describe(n), hint)
			return
		}
		v.SetString(n.Value)
	case reflect.Int, reflect.Int64, reflect.Int32:
		if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!int" {
			d.errorf(n.Line, path, "expected an integer, got %s%s", describe(n), typeHint(path, n))
			return
		}
		var i int64
		if err := n.Decode(&i); err != nil || v.OverflowInt(i) {
			d.errorf(n.Line, path, "integer %s out of range", n.Value)
			return
		}
		if why, ok := zeroNotAllowed[path]; ok && i == 0 {
			d.errorf(n.Line, path, "%s", why)
			return
		}
		v.SetInt(i)
	default:
		// Not reached for the types of this package.
		d.errorf(n.Line, path, "cannot decode into %s", v.Type())
	}
}
