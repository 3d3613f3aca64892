//go:build unix

package actuate

import (
	"os"
	"syscall"
)

// renameInto renames from to to, a name known to be free (a fresh spare
// name): rename(2) alone. os.Rename first stats to, to refuse renaming
// over a folder; in a spare folder of thousands of files that failed
// lookup cost as much as the rename (a stop retires two files).
func renameInto(from, to string) error {
	for {
		err := syscall.Rename(from, to)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return &os.LinkError{Op: "rename", Old: from, New: to, Err: err}
		}
		return nil
	}
}
