package main

import (
	"encoding/json"
	"strings"
	"testing"
)

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
