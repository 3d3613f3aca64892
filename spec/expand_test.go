package spec

import (
	"slices"
	"testing"
)

func TestExpand(t *testing.T) {
	vars := map[string]string{"PORT": "8080", "A": "x", "EMPTY": "", "DOLLAR": "$(A)"}
	lookup := func(n string) (string, bool) { v, ok := vars[n]; return v, ok }
	tests := []struct {
		in, want   string
		unresolved []string
	}{
		{"plain", "plain", nil},
		{"$(PORT)", "8080", nil},
		{"http://127.0.0.1:$(PORT)/x", "http://127.0.0.1:8080/x", nil},
		{"$(A)$(A)", "xx", nil},
		{"$(EMPTY)-", "-", nil},
		{"$$(PORT)", "$(PORT)", nil},
		{"$$$(PORT)", "$8080", nil},
		{"$$$$(PORT)", "$$(PORT)", nil},
		{"a$$b", "a$b", nil},
		{"$(NOPE)", "$(NOPE)", []string{"NOPE"}},
		{"$(NOPE) and $(A) and $(ALSO)", "$(NOPE) and x and $(ALSO)", []string{"NOPE", "ALSO"}},
		{"$(", "$(", nil},
		{"$(unclosed", "$(unclosed", nil},
		{"$", "$", nil},
		{"end$", "end$", nil},
		{"$HOME ${HOME}", "$HOME ${HOME}", nil},
		{"$()", "$()", []string{""}},
		{"$(DOLLAR)", "$(A)", nil}, // one pass: a value is not expanded again
		{"$(A)(", "x(", nil},
	}
	for _, tt := range tests {
		var unresolved []string
		got := Expand(tt.in, lookup, func(n string) { unresolved = append(unresolved, n) })
		if got != tt.want || !slices.Equal(unresolved, tt.unresolved) {
			t.Errorf("Expand(%q) = %q, unresolved %q; want %q, %q", tt.in, got, unresolved, tt.want, tt.unresolved)
		}
	}
	if got := References("$(A) $$(B) $(C)"); !slices.Equal(got, []string{"A", "C"}) {
		t.Errorf("References = %q", got)
	}
}
