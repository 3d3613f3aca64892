//go:build unix

package logfile

import (
	"os"
	"syscall"
)

// linked reports whether the file fi describes still has a name: a file
// removed while open has no link left.
func linked(fi os.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return !ok || st.Nlink > 0
}
