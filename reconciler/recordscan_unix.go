//go:build unix

package reconciler

import (
	"os"

	"golang.org/x/sys/unix"
)

// statAt is the key of the file fname in the folder dir, not following a
// symbolic link; ok is false where it cannot be made.
func statAt(dir *os.File, fname string) (key fileKey, ok bool, err error) {
	var st unix.Stat_t
	if err := unix.Fstatat(int(dir.Fd()), fname, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return fileKey{}, false, err
	}
	return fileKey{dev: uint64(st.Dev), ino: uint64(st.Ino), ctimeNanos: st.Ctim.Nano(), size: int64(st.Size), mode: uint32(st.Mode)}, true, nil
}
