package main

import (
	"slices"
	"testing"

	"github.com/procfleet/procfleet/spec"
)

func TestUnknownNames(t *testing.T) {
	known := []string{"api", "backend", "web"}
	tests := []struct {
		names []string
		want  string
	}{
		{nil, ""},
		{[]string{"api", "web"}, ""},
		{[]string{"apj"}, "no server named apj (did you mean api?)"},
		{[]string{"web", "backnd"}, "no server named backnd (did you mean backend?)"},
		{[]string{"ghost-of-christmas"}, "no server named ghost-of-christmas"},
	}
	for _, tt := range tests {
		err := unknownNames(tt.names, known)
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != tt.want {
			t.Errorf("unknownNames(%q) = %q, want %q", tt.names, got, tt.want)
		}
	}
	if err := unknownNames([]string{"api"}, nil); err == nil || err.Error() != "no server named api" {
		t.Errorf("unknownNames with nothing known = %v, want no server named api", err)
	}
}

func TestExpandNames(t *testing.T) {
	two, zero := 2, 0
	fleet := &spec.Fleet{Servers: []spec.Server{
		{Metadata: spec.ObjectMeta{Name: "api"}, Spec: spec.ServerSpec{Replicas: &two}},
		{Metadata: spec.ObjectMeta{Name: "db"}},
		{Metadata: spec.ObjectMeta{Name: "idle"}, Spec: spec.ServerSpec{Replicas: &zero}},
	}}
	tests := []struct {
		names []string
		fleet *spec.Fleet
		extra []string
		want  []string
		err   string
	}{
		{names: []string{"db"}, fleet: fleet, want: []string{"db"}},
		{names: []string{"api"}, fleet: fleet, want: []string{"api-0", "api-1"}},
		{names: []string{"api-1", "db", "api"}, fleet: fleet, want: []string{"api-1", "db", "api-0"}},
		{names: []string{"idle"}, fleet: fleet, want: []string{}},
		{names: []string{"old"}, fleet: fleet, extra: []string{"old"}, want: []string{"old"}},
		{names: []string{"api-7"}, fleet: fleet, err: "no server named api-7 (did you mean api-0?)"},
		{names: []string{"dbb"}, fleet: nil, extra: []string{"db"}, err: "no server named dbb (did you mean db?)"},
	}
	for _, tt := range tests {
		got, err := expandNames(tt.names, tt.fleet, tt.extra)
		if tt.err != "" {
			if err == nil || err.Error() != tt.err {
				t.Errorf("expandNames(%q) error = %v, want %q", tt.names, err, tt.err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tt.want) {
			t.Errorf("expandNames(%q) = %q, %v; want %q", tt.names, got, err, tt.want)
		}
	}
}
