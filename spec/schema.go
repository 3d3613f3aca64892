package spec

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"reflect"
	"strings"

	"github.com/invopop/jsonschema"
)

// typesSource is the source of the API types: Schema takes its field and
// type descriptions from their doc comments, so that the schema and the Go
// documentation cannot drift apart.
//
//go:embed types.go
var typesSource []byte

// SchemaID is the $id of the schema Schema returns.
const SchemaID = "https://procfleet.dev/schemas/v1alpha1/server.json"

// Schema returns the JSON Schema (draft 2020-12) of one fleet-file document,
// generated from the Server type: unknown fields are not allowed, required
// fields and enums (apiVersion, kind, restartPolicy) are declared, and
// descriptions come from the types' doc comments. The output is stable, so
// it can be committed and diffed.
func Schema() ([]byte, error) {
	comments, err := typeComments()
	if err != nil {
		return nil, fmt.Errorf("build schema: %w", err)
	}
	r := &jsonschema.Reflector{
		RequiredFromJSONSchemaTags: true,
		ExpandedStruct:             true,
		LookupComment: func(t reflect.Type, field string) string {
			key := t.Name()
			if field != "" {
				key += "." + field
			}
			return comments[key]
		},
	}
	s := r.Reflect(&Server{})
	s.ID = SchemaID
	s.Title = "procfleet Server"
	out, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("build schema: %w", err)
	}
	return append(out, '\n'), nil
}

// typeComments maps "Type" and "Type.Field" to their doc comments in
// types.go, joined on one line.
func typeComments() (map[string]string, error) {
	f, err := parser.ParseFile(token.NewFileSet(), "types.go", typesSource, parser.ParseComments)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	text := func(g *ast.CommentGroup) string {
		return strings.Join(strings.Fields(g.Text()), " ")
	}
	for _, decl := range f.Decls {
		gd, ok := decl.(*ast.GenDecl)
		if !ok || gd.Tok != token.TYPE {
			continue
		}
		for _, spec := range gd.Specs {
			ts := spec.(*ast.TypeSpec)
			doc := ts.Doc
			if doc == nil && len(gd.Specs) == 1 {
				doc = gd.Doc
			}
			if doc != nil {
				out[ts.Name.Name] = text(doc)
			}
			st, ok := ts.Type.(*ast.StructType)
			if !ok {
				continue
			}
			for _, fld := range st.Fields.List {
				c := fld.Doc
				if c == nil {
					c = fld.Comment
				}
				if c == nil {
					continue
				}
				for _, n := range fld.Names {
					out[ts.Name.Name+"."+n.Name] = text(c)
				}
			}
		}
	}
	return out, nil
}

// JSONSchemaExtend states in the schema what Validate checks: a probe has
// exactly one handler.
func (Probe) JSONSchemaExtend(s *jsonschema.Schema) {
	for _, h := range []string{"httpGet", "tcpSocket", "exec"} {
		s.OneOf = append(s.OneOf, &jsonschema.Schema{Required: []string{h}})
	}
}
