//go:build linux || darwin

package actuate

import (
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// cloexecListed marks close-on-exec every descriptor from 3 up that dir
// (/proc/self/fd or /dev/fd) lists: one fcntl each.
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
