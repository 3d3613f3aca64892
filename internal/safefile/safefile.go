package safefile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"time"
)

// CorruptInfix goes between a path and the time when OpenAppend moves what
// was there aside: <path>.corrupt-<time>.
const CorruptInfix = ".corrupt-"

// TimeLayout is the UTC time in moved-aside names; it sorts as the time
// does.
const TimeLayout = "20060102T150405.000000000Z"

// NotRegularError reports a path that holds something other than a
// regular file.
type NotRegularError struct {
	Path string
	// Kind says what is there: "a symbolic link", "a FIFO", "a socket",
	// "a folder", "a device".
	Kind string
}

func (e *NotRegularError) Error() string {
	return fmt.Sprintf("%s is %s, not a regular file", e.Path, e.Kind)
}

// Open opens path with flag (os.O_RDONLY, os.O_WRONLY|os.O_CREATE|
// os.O_APPEND...) without following a symlink and without blocking, and
// returns it only if it is a regular file (*NotRegularError otherwise). A
// missing file is an error wrapping fs.ErrNotExist.
func Open(path string, flag int, perm fs.FileMode) (*os.File, error) {
	f, kind, err := openRegular(path, flag, perm)
	if kind != "" {
		return nil, &NotRegularError{Path: path, Kind: kindAt(path, kind)}
	}
	return f, err
}

// OpenAppend opens path for appending, creating it (mode perm) when
// missing. When the path holds something other than a regular file, that
// is renamed to <path>.corrupt-<UTC time> and a fresh file is created;
// movedTo names where it went ("" when nothing was moved). An error names
// the path, and says so when it could not be moved.
func OpenAppend(path string, perm fs.FileMode) (f *os.File, movedTo string, err error) {
	const flag = os.O_WRONLY | os.O_CREATE | os.O_APPEND
	f, err = Open(path, flag, perm)
	var nr *NotRegularError
	if !errors.As(err, &nr) {
		return f, "", err
	}
	to := path + CorruptInfix + time.Now().UTC().Format(TimeLayout)
	if rerr := os.Rename(path, to); rerr != nil {
		return nil, "", fmt.Errorf("%w; moving it aside failed: %w", nr, rerr)
	}
	f, err = Open(path, flag|os.O_EXCL, perm)
	if err != nil {
		return nil, to, fmt.Errorf("create %s after moving %s aside to %s: %w", path, nr.Kind, to, err)
	}
	return f, to, nil
}

// ReadFile reads a regular file of at most max bytes through Open: a
// larger one is an error naming it.
func ReadFile(path string, max int64) ([]byte, error) {
	f, err := Open(path, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("read %s: larger than %d bytes", path, max)
	}
	return b, nil
}

// kindAt names what is at path, when an open failed because of it;
// guess is what the open's error said.
func kindAt(path, guess string) string {
	if fi, err := os.Lstat(path); err == nil && !fi.Mode().IsRegular() {
		return kindOf(fi.Mode())
	}
	return guess
}

func kindOf(m fs.FileMode) string {
	switch {
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m.IsDir():
		return "a folder"
	case m&fs.ModeDevice != 0:
		return "a device"
	}
	return "not a regular file"
}
