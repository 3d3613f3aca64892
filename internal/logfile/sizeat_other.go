//go:build !unix

package logfile

import (
	"os"
	"path/filepath"
)

// sizeAt is the size of the file name in the folder dir, and whether it is
// a regular file, not following a symbolic link.
func sizeAt(dir *os.File, name string) (size int64, regular bool, err error) {
	fi, err := os.Lstat(filepath.Join(dir.Name(), name))
	if err != nil {
		return 0, false, err
	}
	return fi.Size(), fi.Mode().IsRegular(), nil
}
