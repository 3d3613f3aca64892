//go:build unix

package logfile

import (
	"os"

	"golang.org/x/sys/unix"
)

// sizeAt is the size of the file name in the folder dir, and whether it is
// a regular file, not following a symbolic link.
func sizeAt(dir *os.File, name string) (size int64, regular bool, err error) {
	var st unix.Stat_t
	if err := unix.Fstatat(int(dir.Fd()), name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return 0, false, &os.PathError{Op: "lstat", Path: name, Err: err}
	}
	return st.Size, st.Mode&unix.S_IFMT == unix.S_IFREG, nil
}
