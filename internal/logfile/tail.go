package logfile

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

// tailChunk is how much Tail reads per step backwards.
const tailChunk = 64 << 10

// Tail returns the last n lines of the file at path, without their line
// feeds; a last line without a line feed counts as a line. It reads
// backwards from the end, so its cost follows n, not the file's size.
func Tail(path string, n int) ([]string, error) {
	f, fi, err := openLog(path)
	if err != nil {
		return nil, fmt.Errorf("tail: %w", err)
	}
	defer f.Close()
	start, err := tailOffset(f, fi.Size(), n)
	if err != nil {
		return nil, fmt.Errorf("tail %s: %w", path, err)
	}
	data := make([]byte, fi.Size()-start)
	if _, err := f.ReadAt(data, start); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("tail %s: %w", path, err)
	}
	return splitLines(data), nil
}

// TailFiles returns the last n lines of the files taken as one stream, the
// oldest file first (as Files lists them): a line that a rotation split
// between a copy and the next file is returned whole. Missing files are
// skipped.
func TailFiles(paths []string, n int) ([]string, error) {
	var parts joined
	for _, path := range paths {
		f, fi, err := openLog(path)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("tail: %w", err)
		}
		defer f.Close()
		parts = append(parts, part{r: f, size: fi.Size()})
	}
	size := parts.size()
	start, err := tailOffset(parts, size, n)
	if err != nil {
		return nil, fmt.Errorf("tail %s: %w", paths[len(paths)-1], err)
	}
	data := make([]byte, size-start)
	if _, err := parts.ReadAt(data, start); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("tail %s: %w", paths[len(paths)-1], err)
	}
	return splitLines(data), nil
}

// splitLines splits data at line feeds; a final line feed ends the last
// line rather than starting an empty one.
func splitLines(data []byte) []string {
	if len(data) == 0 {
		return nil
	}
	return strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
}

// tailOffset returns the offset where the last n lines of r (of the given
// size) begin, reading backwards in chunks. n <= 0 gives size.
func tailOffset(r io.ReaderAt, size int64, n int) (int64, error) {
	if n <= 0 || size == 0 {
		return size, nil
	}
	buf := make([]byte, tailChunk)
	end := size
	// A final line feed ends the last line; it does not count as a break.
	if _, err := r.ReadAt(buf[:1], size-1); err != nil && !errors.Is(err, io.EOF) {
		return 0, err
	}
	if buf[0] == '\n' {
		end = size - 1
	}
	found := 0
	for end > 0 {
		start := max(end-tailChunk, 0)
		chunk := buf[:end-start]
		if _, err := r.ReadAt(chunk, start); err != nil && !errors.Is(err, io.EOF) {
			return 0, err
		}
		for i := len(chunk) - 1; i >= 0; i-- {
			if chunk[i] != '\n' {
				continue
			}
			found++
			if found == n {
				return start + int64(i) + 1, nil
			}
		}
		end = start
	}
	return 0, nil
}

// lastBytes returns up to n bytes of f that end at off.
func lastBytes(f io.ReaderAt, off int64, n int) ([]byte, error) {
	start := max(off-int64(n), 0)
	b := make([]byte, off-start)
	if _, err := f.ReadAt(b, start); err != nil {
		return nil, err
	}
	return b, nil
}

// endsWith reports whether f holds want just before off. When want is
// longer than off it compares the last off bytes of want with the start of
// f: after Follow resumed a file close to its start, its fingerprint still
// holds bytes of the copy before it, which this file never had.
func endsWith(f io.ReaderAt, off int64, want []byte) bool {
	if int64(len(want)) > off {
		want = want[int64(len(want))-off:]
	}
	got, err := lastBytes(f, off, len(want))
	return err == nil && bytes.Equal(got, want)
}

// Cat copies the files to w, in order, each opened without following a
// symlink; a file gone meanwhile (rotated away) is skipped.
func Cat(w io.Writer, paths []string) error {
	for _, path := range paths {
		f, _, err := openLog(path)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("read log: %w", err)
		}
		_, err = io.Copy(w, f)
		_ = f.Close()
		if err != nil {
			return fmt.Errorf("read log %s: %w", path, err)
		}
	}
	return nil
}
