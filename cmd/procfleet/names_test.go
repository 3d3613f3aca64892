package main

import "testing"

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
