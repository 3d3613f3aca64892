package spec

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// FieldError is one problem in a fleet file: where it is and what is wrong.
type FieldError struct {
	// File is the fleet file as given or found in a folder; "" when unknown.
	File string
	// Line is the 1-based line of the offending field; 0 when unknown.
	Line int
	// Field is the field path, like "spec.readinessProbe.httpGet.port" or
	// "spec.env[2].name"; "" for problems with the file as a whole.
	Field string
	// Message says what is wrong and, where it helps, what is valid.
	Message string
	// Err is the underlying error, if any (for errors.Is, like
	// fs.ErrNotExist); it is already part of Message.
	Err error
}

// Error formats the error as "file:line: field: message", leaving out the
// parts that are unknown.
func (e *FieldError) Error() string {
	var b strings.Builder
	if e.File != "" {
		b.WriteString(e.File)
		if e.Line > 0 {
			b.WriteByte(':')
			b.WriteString(strconv.Itoa(e.Line))
		}
		b.WriteString(": ")
	} else if e.Line > 0 {
		b.WriteString("line ")
		b.WriteString(strconv.Itoa(e.Line))
		b.WriteString(": ")
	}
	if e.Field != "" {
		b.WriteString(e.Field)
		b.WriteString(": ")
	}
	b.WriteString(e.Message)
	return b.String()
}

// Unwrap returns the underlying error, if any.
func (e *FieldError) Unwrap() error { return e.Err }

// ErrorList is every problem found, sorted by file, line and field. A
// non-empty ErrorList is an error; use Err to turn an empty one into nil.
type ErrorList []*FieldError

// Error lists every error, one a line.
func (l ErrorList) Error() string {
	switch len(l) {
	case 0:
		return "no errors"
	case 1:
		return l[0].Error()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d errors:", len(l))
	for _, e := range l {
		b.WriteString("\n  ")
		b.WriteString(e.Error())
	}
	return b.String()
}

// Unwrap returns the errors of the list, for errors.Is and errors.As.
func (l ErrorList) Unwrap() []error {
	errs := make([]error, len(l))
	for i, e := range l {
		errs[i] = e
	}
	return errs
}

// Err returns nil for an empty list, else the list sorted.
func (l ErrorList) Err() error {
	if len(l) == 0 {
		return nil
	}
	l.Sort()
	return l
}

// Sort orders the list by file, line, field and message.
func (l ErrorList) Sort() {
	slices.SortStableFunc(l, func(a, b *FieldError) int {
		return cmp.Or(
			cmp.Compare(a.File, b.File),
			cmp.Compare(a.Line, b.Line),
			compareFields(a.Field, b.Field),
			cmp.Compare(a.Message, b.Message),
		)
	})
}

// compareFields orders field paths with their list indexes as numbers, so
// that "env[9]" comes before "env[10]".
func compareFields(a, b string) int {
	for a != "" && b != "" {
		da, db := digits(a), digits(b)
		if da > 0 && db > 0 {
			na, nb := strings.TrimLeft(a[:da], "0"), strings.TrimLeft(b[:db], "0")
			if c := cmp.Or(cmp.Compare(len(na), len(nb)), cmp.Compare(na, nb)); c != 0 {
				return c
			}
			a, b = a[da:], b[db:]
			continue
		}
		if a[0] != b[0] {
			return cmp.Compare(a[0], b[0])
		}
		a, b = a[1:], b[1:]
	}
	return cmp.Compare(len(a), len(b))
}

func digits(s string) int {
	n := 0
	for n < len(s) && s[n] >= '0' && s[n] <= '9' {
		n++
	}
	return n
}
