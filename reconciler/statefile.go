package reconciler

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
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

// writeStateFile replaces the file at path with data atomically and
// durably: a temp file in the same folder (mode 0600), written, synced,
// renamed over path, the folder synced. A reader sees the old content or
// the new, never a part; a symlink at path is replaced, never followed.
func writeStateFile(path string, data []byte) error {
	return writeState(path, data, true)
}

func writeState(path string, data []byte, durable bool) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(0o600)
	}
	if err == nil && durable {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, err)
	}
	if !durable {
		return nil
	}
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync() // the rename is durable once the folder is; nothing to do if it cannot be
		_ = d.Close()
	}
	return nil
}

// removeStateFile removes path; a missing file is not an error.
func removeStateFile(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove %s: %w", path, err)
	}
	return nil
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
