//go:build !unix

package safefile

import (
	"io/fs"
	"os"
)

// openRegular opens path plainly (no O_NOFOLLOW or O_NONBLOCK here) and
// checks what it opened.
func openRegular(path string, flag int, perm fs.FileMode) (*os.File, string, error) {
	f, err := os.OpenFile(path, flag, perm)
	if err != nil {
		return nil, "", err
	}
	fi, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return nil, "", err
	}
	if !fi.Mode().IsRegular() {
		_ = f.Close()
		return nil, kindOf(fi.Mode()), nil
	}
	return f, "", nil
}
