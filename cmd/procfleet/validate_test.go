package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestValidateWarnings: warnings (an unresolved $(NAME), a ${NAME} nothing
// expands, an env file value taken literally, a program not in $PATH) are
// printed in every format and fail validate only with --strict.
func TestValidateWarnings(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		wantCode int
		golden   string
	}{
		{"text", []string{"validate", "-f", "testdata/warn.yaml"}, 0, "validate-warn.txt"},
		{"json", []string{"validate", "-f", "testdata/warn.yaml", "-o", "json"}, 0, "validate-warn.json"},
		{"github", []string{"validate", "-f", "testdata/warn.yaml", "-o", "github"}, 0, "validate-warn.github"},
		{"strict", []string{"validate", "-f", "testdata/warn.yaml", "--strict"}, 1, "validate-warn-strict.txt"},
		{"strict github", []string{"validate", "-f", "testdata/warn.yaml", "--strict", "-o", "github"}, 1, "validate-warn-strict.github"},
		{"strict without warnings", []string{"validate", "-f", "testdata/good.yaml", "--strict"}, 0, "validate-good.txt"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := procfleet(t, tt.args...)
			if r.code != tt.wantCode {
				t.Errorf("exit code = %d, want %d; stderr:\n%s", r.code, tt.wantCode, r.stderr)
			}
			if r.stderr != "" {
				t.Errorf("stderr = %q, want nothing", r.stderr)
			}
			golden(t, tt.golden, r.stdout)
		})
	}
}

func TestValidateJSONSeverity(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"validate", "-f", "testdata/warn.yaml", "-o", "json"}, "warning"},
		{[]string{"validate", "-f", "testdata/warn.yaml", "-o", "json", "--strict"}, "error"},
		{[]string{"validate", "-f", "testdata/bad.yaml", "-o", "json"}, "error"},
	} {
		r := procfleet(t, tc.args...)
		var got []validationError
		if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
			t.Fatalf("%v: not JSON: %v", tc.args, err)
		}
		if len(got) == 0 {
			t.Fatalf("%v: no entries", tc.args)
		}
		for _, e := range got {
			if e.Severity != tc.want || e.Line == 0 || e.File == "" {
				t.Errorf("%v: entry %+v, want severity %s with file and line", tc.args, e, tc.want)
			}
			if strings.HasPrefix(e.File, "/") {
				t.Errorf("%v: file %q is absolute; the fleet file was given relative", tc.args, e.File)
			}
		}
	}
}
