package actuate

import (
	"errors"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// closeInheritedFDs marks every descriptor from 3 up close-on-exec, so a
// spawned server inherits only stdin, stdout and stderr, even descriptors
// procfleet itself inherited without O_CLOEXEC. Go's own are already
// close-on-exec; it runs before each spawn (one system call) since a library
// may have opened one without the flag meanwhile.
func closeInheritedFDs() error {
	err := unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC)
	if err == nil || !(errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EINVAL)) {
		return err
	}
	// Before Linux 5.11: one fcntl per descriptor.
	return cloexecListed("/proc/self/fd")
}

func cloexecListed(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	names, err := f.Readdirnames(-1)
	own := int(f.Fd())
	_ = f.Close()
	if err != nil {
		return err
	}
	for _, n := range names {
		fd, err := strconv.Atoi(n)
		if err != nil || fd < 3 || fd == own {
			continue
		}
		_, _ = unix.FcntlInt(uintptr(fd), unix.F_SETFD, unix.FD_CLOEXEC)
	}
	return nil
}
