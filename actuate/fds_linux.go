package actuate

import (
	"errors"

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
