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

// fileID returns the device and inode of a file from its stat data.
func fileID(fi fs.FileInfo) (FolderID, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return FolderID{}, false
	}
	return FolderID{Dev: uint64(st.Dev), Ino: st.Ino}, true
}

// linkCount returns the number of names a file has (0 once deleted; 1
// where the system does not say).
func linkCount(fi fs.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Nlink)
	}
	return 1
}

// noFollow is added to the open flags of records: a symlinked record is
// refused (ELOOP) instead of followed.
const noFollow = syscall.O_NOFOLLOW

// nonBlock is added to the open flags of a record being read: a FIFO swapped
// in after the path's type was checked opens at once instead of waiting for
// a writer (the opened file's type is checked before any read). It changes
// nothing for a regular file.
const nonBlock = syscall.O_NONBLOCK

// isSymlinkLoop reports the error of an O_NOFOLLOW open of a symlink.
func isSymlinkLoop(err error) bool { return errors.Is(err, syscall.ELOOP) }
