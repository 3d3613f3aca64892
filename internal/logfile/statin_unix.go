//go:build unix

package logfile

import (
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// statIn stats the file name in the folder dir, not following a symbolic
// link.
func statIn(dir *os.File, name string) (fileStat, error) {
	var st unix.Stat_t
	if err := unix.Fstatat(int(dir.Fd()), name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return fileStat{}, &os.PathError{Op: "lstat", Path: name, Err: err}
	}
	return fileStat{
		size:    st.Size,
		mtime:   time.Unix(st.Mtim.Unix()),
		regular: st.Mode&unix.S_IFMT == unix.S_IFREG,
	}, nil
}
