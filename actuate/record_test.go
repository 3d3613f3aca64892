package actuate

import (
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// readSized reads a whole file whatever size its fstat gave, up to its
// limit.
func TestReadSized(t *testing.T) {
	for _, tc := range []struct {
		data        string
		size, limit int64
		want        string
	}{
		{"", 0, 10, ""},
		{"abc", 3, 10, "abc"},
		{"abcdef", 2, 10, "abcdef"},      // grew since the fstat
		{"ab", 6, 10, "ab"},              // shrank since
		{"abcdefghijkl", 12, 5, "abcde"}, // cut at the limit
		{"abc", -1, 10, "abc"},
	} {
		got, err := readSized(iotest.OneByteReader(strings.NewReader(tc.data)), tc.size, tc.limit)
		if err != nil || string(got) != tc.want {
			t.Errorf("readSized(%q, size %d, limit %d) = %q, %v; want %q", tc.data, tc.size, tc.limit, got, err, tc.want)
		}
		got, err = readSized(strings.NewReader(tc.data), tc.size, tc.limit)
		if err != nil || string(got) != tc.want {
			t.Errorf("readSized(%q, size %d, limit %d) in one read = %q, %v; want %q", tc.data, tc.size, tc.limit, got, err, tc.want)
		}
	}
	if _, err := readSized(iotest.ErrReader(io.ErrUnexpectedEOF), 3, 10); err == nil {
		t.Error("readSized of a failing reader: no error")
	}
}
