//go:build unix

package actuate

import (
	"errors"
	"io"
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

// openRecordFile opens a record read-only, never through a symlink (ELOOP)
// nor blocked on a FIFO (nonBlock), and fstats the opened descriptor. It is
// read through the descriptor directly: an *os.File of it would try to
// register a regular file with the runtime poller (a refused epoll_ctl)
// and clear O_NONBLOCK (an fcntl), two system calls per record of a down.
// O_NONBLOCK changes nothing for the regular file that is read; anything
// else is closed unread by the caller.
func openRecordFile(path string) (io.ReadCloser, recordStat, error) {
	var fd int
	var err error
	for {
		fd, err = syscall.Open(path, syscall.O_RDONLY|noFollow|nonBlock|syscall.O_CLOEXEC, 0)
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		return nil, recordStat{}, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		_ = syscall.Close(fd)
		return nil, recordStat{}, &fs.PathError{Op: "fstat", Path: path, Err: err}
	}
	rs := recordStat{
		regular: uint32(st.Mode)&syscall.S_IFMT == syscall.S_IFREG,
		uid:     int(st.Uid),
		hasUID:  true,
		perm:    fs.FileMode(st.Mode) & fs.ModePerm,
		size:    st.Size,
	}
	return &recordFD{fd: fd, path: path}, rs, nil
}

// recordFD reads a record through its descriptor.
type recordFD struct {
	fd   int
	path string
}

func (f *recordFD) Read(b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	for {
		n, err := syscall.Read(f.fd, b)
		switch {
		case err == syscall.EINTR:
			continue
		case err != nil:
			return 0, &fs.PathError{Op: "read", Path: f.path, Err: err}
		case n == 0:
			return 0, io.EOF
		}
		return n, nil
	}
}

func (f *recordFD) Close() error {
	if err := syscall.Close(f.fd); err != nil {
		return &fs.PathError{Op: "close", Path: f.path, Err: err}
	}
	return nil
}
