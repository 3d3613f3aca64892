package logfile

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// collapsePrefix removes the first bytes of f, up to a file system block
// boundary at or below limit (and short of the end), in one atomic step
// (fallocate FALLOC_FL_COLLAPSE_RANGE, ext4 and xfs): what follows, bytes
// written meanwhile included, moves to the front, and O_APPEND writers go on
// at the new end. It returns how many bytes it removed.
func collapsePrefix(f *os.File, limit int64) (int64, error) {
	if disableCollapse {
		return 0, errNoCollapse
	}
	var st unix.Statfs_t
	if err := unix.Fstatfs(int(f.Fd()), &st); err != nil {
		return 0, err
	}
	blk := int64(st.Bsize)
	fi, err := f.Stat()
	if err != nil {
		return 0, err
	}
	if blk <= 0 {
		return 0, errNoCollapse
	}
	n := min(limit, fi.Size()-1) / blk * blk // the range must end before EOF
	if n <= 0 {
		return 0, errNoCollapse
	}
	if err := unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_COLLAPSE_RANGE, 0, n); err != nil {
		return 0, errors.Join(errNoCollapse, err)
	}
	return n, nil
}
