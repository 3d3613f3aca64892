//go:build unix

package actuate

import (
	"errors"
	"io/fs"
	"syscall"
)

// fileOwner returns the owner uid of a file from its stat data.
func fileOwner(fi fs.FileInfo) (int, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return int(st.Uid), true
}

// noFollow is added to the open flags of records: a symlinked record is
// refused (ELOOP) instead of followed.
const noFollow = syscall.O_NOFOLLOW

// isSymlinkLoop reports the error of an O_NOFOLLOW open of a symlink.
func isSymlinkLoop(err error) bool { return errors.Is(err, syscall.ELOOP) }
