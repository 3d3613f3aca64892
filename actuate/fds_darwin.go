package actuate

import (
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// closeInheritedFDs marks every descriptor from 3 up close-on-exec (macOS
// has no close_range): one fcntl per entry of /dev/fd. Compile-checked only.
func closeInheritedFDs() error {
	f, err := os.Open("/dev/fd")
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
