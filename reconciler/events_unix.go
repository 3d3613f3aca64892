//go:build unix

package reconciler

import (
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// openEventsAppend opens the events file at path for appending when it is
// already there, a regular file of at most maxEventsFile bytes: one open
// (never through a symlink, never blocked on a FIFO: O_NOFOLLOW|O_NONBLOCK)
// and one fstat of the opened descriptor, which is written through
// directly. safefile.OpenAppend's *os.File cost three fcntl (O_NONBLOCK
// cleared, then read back by os.NewFile) and a second fstat more, for
// each server of a down. O_NONBLOCK stays set: it changes nothing for a
// regular file, and the descriptor is close-on-exec, never a child's.
// false for anything else (missing, not a regular file, due for rotation):
// openEvents then creates, repairs or rotates it.
func openEventsAppend(path string) (io.WriteCloser, int64, bool) {
	var fd int
	var err error
	for {
		fd, err = unix.Open(path, unix.O_WRONLY|unix.O_APPEND|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		return nil, 0, false
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || uint32(st.Mode)&unix.S_IFMT != unix.S_IFREG || st.Size > maxEventsFile {
		_ = unix.Close(fd)
		return nil, 0, false
	}
	return &appendFD{fd: fd, path: path}, st.Size, true
}

// appendFD writes to a descriptor opened with O_APPEND. Its owner
// serialises its writes and its close (eventFile.mu).
type appendFD struct {
	fd   int
	path string
}

func (f *appendFD) Write(b []byte) (int, error) {
	n := 0
	for n < len(b) {
		m, err := unix.Write(f.fd, b[n:])
		switch {
		case err == unix.EINTR:
			continue
		case err != nil:
			return n, &os.PathError{Op: "write", Path: f.path, Err: err}
		case m == 0:
			return n, &os.PathError{Op: "write", Path: f.path, Err: io.ErrShortWrite}
		}
		n += m
	}
	return n, nil
}

func (f *appendFD) Close() error {
	if err := unix.Close(f.fd); err != nil {
		return &os.PathError{Op: "close", Path: f.path, Err: err}
	}
	return nil
}
