package spec

import (
	"errors"
	"io/fs"
	"slices"
	"testing"
)

func TestErrorListSortAndFormat(t *testing.T) {
	l := ErrorList{
		{File: "b.yaml", Line: 1, Field: "spec.port", Message: "m"},
		{File: "a.yaml", Line: 3, Field: "spec.env[10].name", Message: "m"},
		{File: "a.yaml", Line: 3, Field: "spec.env[9].name", Message: "m"},
		{File: "a.yaml", Line: 2, Field: "", Message: "m", Err: fs.ErrNotExist},
	}
	l.Sort()
	var got []string
	for _, e := range l {
		got = append(got, e.Error())
	}
	want := []string{"a.yaml:2: m", "a.yaml:3: spec.env[9].name: m", "a.yaml:3: spec.env[10].name: m", "b.yaml:1: spec.port: m"}
	if !slices.Equal(got, want) {
		t.Errorf("sorted = %q, want %q", got, want)
	}
	if !errors.Is(l, fs.ErrNotExist) {
		t.Error("errors.Is does not see through the list")
	}
	if ErrorList(nil).Err() != nil {
		t.Error("empty list Err() != nil")
	}
	if got := (&FieldError{Field: "f", Message: "m"}).Error(); got != "f: m" {
		t.Errorf("Error() = %q", got)
	}
}
