//go:build unix

package safefile

import (
	"errors"
	"io/fs"
	"os"

	"golang.org/x/sys/unix"
)

// openRegular opens path with O_NOFOLLOW|O_NONBLOCK|O_CLOEXEC added, checks
// the descriptor with fstat, and clears O_NONBLOCK before it makes an
// *os.File of it (which then does plain blocking I/O, as on any regular
// file). kind is set when the path holds something else.
func openRegular(path string, flag int, perm fs.FileMode) (*os.File, string, error) {
	var fd int
	var err error
	for {
		fd, err = unix.Open(path, flag|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, uint32(perm.Perm()))
		if err != unix.EINTR {
			break
		}
	}
	switch {
	case errors.Is(err, unix.ELOOP):
		return nil, "a symbolic link", nil
	case errors.Is(err, unix.ENXIO):
		return nil, "a FIFO or socket", nil
	case errors.Is(err, unix.EISDIR):
		return nil, "a folder", nil
	case err != nil:
		return nil, "", &os.PathError{Op: "open", Path: path, Err: err}
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, "", &os.PathError{Op: "fstat", Path: path, Err: err}
	}
	if uint32(st.Mode)&unix.S_IFMT != unix.S_IFREG {
		unix.Close(fd)
		return nil, kindOfMode(uint32(st.Mode)), nil
	}
	fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0)
	if err == nil {
		_, err = unix.FcntlInt(uintptr(fd), unix.F_SETFL, fl&^unix.O_NONBLOCK)
	}
	if err != nil {
		unix.Close(fd)
		return nil, "", &os.PathError{Op: "fcntl", Path: path, Err: err}
	}
	return os.NewFile(uintptr(fd), path), "", nil
}

func kindOfMode(m uint32) string {
	switch m & unix.S_IFMT {
	case unix.S_IFLNK:
		return "a symbolic link"
	case unix.S_IFIFO:
		return "a FIFO"
	case unix.S_IFSOCK:
		return "a socket"
	case unix.S_IFDIR:
		return "a folder"
	case unix.S_IFCHR, unix.S_IFBLK:
		return "a device"
	}
	return "not a regular file"
}
