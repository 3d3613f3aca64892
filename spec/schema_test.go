package spec

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

func TestSchemaGolden(t *testing.T) {
	got, err := Schema()
	if err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "schema.golden.json")
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("Schema() differs from %s; run go test ./spec -run TestSchemaGolden -update and review the diff", golden)
	}
	var s struct {
		AdditionalProperties *bool `json:"additionalProperties"`
		Required             []string
		Defs                 map[string]struct {
			AdditionalProperties *bool `json:"additionalProperties"`
		} `json:"$defs"`
	}
	if err := json.Unmarshal(got, &s); err != nil {
		t.Fatal(err)
	}
	if s.AdditionalProperties == nil || *s.AdditionalProperties {
		t.Error("Server allows additional properties")
	}
	for name, d := range s.Defs {
		if d.AdditionalProperties == nil || *d.AdditionalProperties {
			t.Errorf("%s allows additional properties", name)
		}
	}
}

// TestSchemaCoversEveryField checks that the schema has a property for
// every field the loader accepts, and no other.
func TestSchemaCoversEveryField(t *testing.T) {
	got, err := Schema()
	if err != nil {
		t.Fatal(err)
	}
	var s struct {
		Properties map[string]json.RawMessage
		Defs       map[string]struct{ Properties map[string]json.RawMessage } `json:"$defs"`
	}
	if err := json.Unmarshal(got, &s); err != nil {
		t.Fatal(err)
	}
	check := func(typ string, props map[string]json.RawMessage, v any) {
		info := infoOf(reflectType(v))
		if len(props) != len(info.names) {
			t.Errorf("%s: schema has %d properties, loader %d", typ, len(props), len(info.names))
		}
		for _, n := range info.names {
			if _, ok := props[n]; !ok {
				t.Errorf("%s: schema lacks %q", typ, n)
			}
		}
	}
	check("Server", s.Properties, Server{})
	check("ServerSpec", s.Defs["ServerSpec"].Properties, ServerSpec{})
	check("Probe", s.Defs["Probe"].Properties, Probe{})
	check("EnvVar", s.Defs["EnvVar"].Properties, EnvVar{})
}

func reflectType(v any) reflect.Type { return reflect.TypeOf(v) }
