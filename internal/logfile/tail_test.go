package logfile

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func writeFile(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "api.log")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestTail(t *testing.T) {
	long := strings.Repeat("x", tailChunk+10) // a line across chunk borders
	tests := []struct {
		name    string
		content string
		n       int
		want    []string
	}{
		{"empty file", "", 3, nil},
		{"zero lines", "a\nb\n", 0, nil},
		{"fewer lines than asked", "a\nb\n", 5, []string{"a", "b"}},
		{"last two", "a\nb\nc\n", 2, []string{"b", "c"}},
		{"no trailing line feed", "a\nb\nc", 2, []string{"b", "c"}},
		{"no line feed at all", "partial", 1, []string{"partial"}},
		{"blank lines kept", "a\n\n\nb\n", 3, []string{"", "", "b"}},
		{"only line feeds", "\n\n", 5, []string{"", ""}},
		{"long lines", "a\n" + long + "\n" + long + "\nz", 3, []string{long, long, "z"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Tail(writeFile(t, tt.content), tt.n)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Tail(%q, %d) (-want +got):\n%s", tt.content, tt.n, diff)
			}
		})
	}
}

func TestTailMissing(t *testing.T) {
	if _, err := Tail(filepath.Join(t.TempDir(), "none.log"), 3); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Tail of a missing file: %v, want a not-exist error", err)
	}
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.ReaderAt
	n atomic.Int64
}

func (c *countingReader) ReadAt(p []byte, off int64) (int, error) {
	n, err := c.r.ReadAt(p, off)
	c.n.Add(int64(n))
	return n, err
}

func TestTailLargeFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "big.log")
	b := bytes.NewBuffer(make([]byte, 0, 21<<20))
	line := []byte("00000000 some log text that makes the line longer\n")
	for i := 0; b.Len() < 20<<20; i++ {
		copy(line, fmt.Appendf(nil, "%08d", i)) // cheaper than Fprintf per line under -race
		b.Write(line)
	}
	last := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if err := os.WriteFile(path, b.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := Tail(path, 10)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(last[len(last)-10:], got); diff != "" {
		t.Errorf("last 10 lines of a 20 MiB file (-want +got):\n%s", diff)
	}

	// It reads from the end: a few chunks, not 20 MiB.
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cr := &countingReader{r: f}
	if _, err := tailOffset(cr, int64(b.Len()), 1000); err != nil {
		t.Fatal(err)
	}
	if read := cr.n.Load(); read > 2*tailChunk+1 {
		t.Errorf("finding the last 1000 lines read %d bytes, want at most %d", read, 2*tailChunk+1)
	}
}

func TestTailFiles(t *testing.T) {
	dir := t.TempDir()
	live := filepath.Join(dir, "api.log")
	for path, content := range map[string]string{
		RotatedPath(live, 2): "1\n2\n",
		RotatedPath(live, 1): "3\n4\n",
		live:                 "5\n",
	} {
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	files := Files(live, Options{})
	if diff := cmp.Diff([]string{RotatedPath(live, 2), RotatedPath(live, 1), live}, files); diff != "" {
		t.Fatalf("Files (-want +got):\n%s", diff)
	}
	for n, want := range map[int][]string{
		1:  {"5"},
		3:  {"3", "4", "5"},
		4:  {"2", "3", "4", "5"},
		10: {"1", "2", "3", "4", "5"},
	} {
		got, err := TailFiles(files, n)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("TailFiles(%d) (-want +got):\n%s", n, diff)
		}
	}
}
