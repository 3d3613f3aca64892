// Package schema_test checks that the checked-in JSON Schema, the one editors
// load through the examples' yaml-language-server modeline, accepts every
// example fleet file and rejects the mistakes it exists to catch.
package schema_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	yaml "go.yaml.in/yaml/v3"
)

func compile(t *testing.T) *jsonschema.Schema {
	t.Helper()
	f, err := os.Open("server.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	doc, err := jsonschema.UnmarshalJSON(f)
	if err != nil {
		t.Fatalf("decode server.schema.json: %v", err)
	}
	c := jsonschema.NewCompiler()
	const url = "file:///server.schema.json"
	if err := c.AddResource(url, doc); err != nil {
		t.Fatalf("add schema: %v", err)
	}
	s, err := c.Compile(url)
	if err != nil {
		t.Fatalf("compile server.schema.json: %v", err)
	}
	return s
}

// documents splits a YAML stream into its documents, each as a JSON value the
// validator understands.
func documents(t *testing.T, data []byte) []any {
	t.Helper()
	var docs []any
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var v any
		err := dec.Decode(&v)
		if errors.Is(err, io.EOF) {
			return docs
		}
		if err != nil {
			t.Fatalf("decode yaml: %v", err)
		}
		if v == nil {
			continue
		}
		raw, err := json.Marshal(v)
		if err != nil {
			t.Fatalf("yaml document to json: %v", err)
		}
		j, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, j)
	}
}

func TestSchemaAcceptsExamples(t *testing.T) {
	s := compile(t)
	files, err := filepath.Glob("../*/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no example fleet files found under examples/")
	}
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		docs := documents(t, data)
		if len(docs) == 0 {
			t.Errorf("%s: no documents", file)
		}
		for i, doc := range docs {
			if err := s.Validate(doc); err != nil {
				t.Errorf("%s: document %d does not validate: %v", file, i, err)
			}
		}
	}
}

func TestSchemaRejectsMistakes(t *testing.T) {
	s := compile(t)
	tests := []struct {
		name, yaml, want string
	}{
		{"misspelt field", "apiVersion: procfleet.dev/v1alpha1\nkind: Server\nmetadata: {name: a}\nspec:\n  comand: [x]\n", "comand"},
		{"bad restart policy", "apiVersion: procfleet.dev/v1alpha1\nkind: Server\nmetadata: {name: a}\nspec:\n  command: [x]\n  restartPolicy: always\n", "restartPolicy"},
		{"two probe handlers", "apiVersion: procfleet.dev/v1alpha1\nkind: Server\nmetadata: {name: a}\nspec:\n  command: [x]\n  readinessProbe:\n    tcpSocket: {port: 1}\n    exec: {command: [y]}\n", "readinessProbe"},
		{"port out of range", "apiVersion: procfleet.dev/v1alpha1\nkind: Server\nmetadata: {name: a}\nspec:\n  command: [x]\n  port: 70000\n", "port"},
		{"missing command", "apiVersion: procfleet.dev/v1alpha1\nkind: Server\nmetadata: {name: a}\nspec: {}\n", "command"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			docs := documents(t, []byte(tt.yaml))
			if len(docs) != 1 {
				t.Fatalf("got %d documents, want 1", len(docs))
			}
			err := s.Validate(docs[0])
			if err == nil {
				t.Fatalf("schema accepted %q", tt.yaml)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not mention %q", err, tt.want)
			}
		})
	}
}
