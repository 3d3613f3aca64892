package actuate

import (
	"slices"
	"testing"
)

func TestParseChildren(t *testing.T) {
	for in, want := range map[string][]int{
		"":              nil,
		"12 34 ":        {12, 34},
		"7\n":           {7},
		"x 5 -3 0 9999": {5, 9999},
	} {
		if got := parseChildren([]byte(in)); !slices.Equal(got, want) {
			t.Errorf("parseChildren(%q) = %v, want %v", in, got, want)
		}
	}
}
