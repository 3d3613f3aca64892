package reconciler

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
)

// maxStateFile bounds what is read of a file the reconciler keeps in the
// state folder (held.json, started/<name>.json).
const maxStateFile = 1 << 20

// readStateFile reads a small file the reconciler keeps in the state folder.
// It never follows a symlink and never blocks on a FIFO: a path that is not a
// regular file is an error naming it. A missing file is fs.ErrNotExist.
func readStateFile(path string) ([]byte, error) {
	if fi, err := os.Lstat(path); err != nil {
		return nil, err
	} else if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("read %s: not a regular file (%s)", path, fi.Mode().Type())
	}
	f, err := os.OpenFile(path, os.O_RDONLY|openNoFollow, 0)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	} else if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("read %s: not a regular file", path)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxStateFile+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if len(data) > maxStateFile {
		return nil, fmt.Errorf("read %s: larger than %d bytes", path, maxStateFile)
	}
	return data, nil
}

// mkdirState makes a folder of the state folder (mode 0700) if it is not
// there; a path that is there and is not a folder (a symlink included) is
// an error.
func mkdirState(path string) error {
	if err := os.Mkdir(path, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("create %s: %w", path, err)
	}
	fi, err := os.Lstat(path)
	if err != nil {
		return fmt.Errorf("create %s: %w", path, err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("create %s: not a folder (%s)", path, fi.Mode().Type())
	}
	return nil
}
