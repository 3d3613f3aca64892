//go:build !unix

package logfile

import (
	"os"
	"path/filepath"
)

// statIn stats the file name in the folder dir, not following a symbolic
// link.
func statIn(dir *os.File, name string) (fileStat, error) {
	fi, err := os.Lstat(filepath.Join(dir.Name(), name))
	if err != nil {
		return fileStat{}, err
	}
	return fileStat{size: fi.Size(), mtime: fi.ModTime(), regular: fi.Mode().IsRegular()}, nil
}
