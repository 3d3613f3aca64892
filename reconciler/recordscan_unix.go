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
	return keyOf(&st), true, nil
}

// statPath is the key of the file at path, not following a symbolic link.
func statPath(path string) (key fileKey, ok bool, err error) {
	var st unix.Stat_t
	if err := unix.Fstatat(unix.AT_FDCWD, path, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return fileKey{}, false, err
	}
	return keyOf(&st), true, nil
}

func keyOf(st *unix.Stat_t) fileKey {
	return fileKey{dev: uint64(st.Dev), ino: uint64(st.Ino), ctimeNanos: st.Ctim.Nano(), size: int64(st.Size), mode: uint32(st.Mode)}
}
