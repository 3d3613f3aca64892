package main

import (
	"slices"
	"testing"
)

func TestUntitled(t *testing.T) {
	tests := []struct {
		name string
		in   []string
		want []string
	}{
		{"redis's padded title", []string{"redis-server 127.0.0.1:6379", "", "", ""}, []string{"redis-server 127.0.0.1:6379"}},
		{"an empty argument inside is kept", []string{"prog", "", "x"}, []string{"prog", "", "x"}},
		{"nothing to drop", []string{"nginx: master process nginx"}, []string{"nginx: master process nginx"}},
		{"all empty", []string{"", ""}, []string{}},
		{"none", nil, nil},
	}
	for _, tt := range tests {
		if got := untitled(tt.in); !slices.Equal(got, tt.want) {
			t.Errorf("%s: untitled(%q) = %q, want %q", tt.name, tt.in, got, tt.want)
		}
	}
}
