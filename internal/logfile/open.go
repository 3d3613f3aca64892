package logfile

import (
	"errors"
	"fmt"
	"os"
)

// errNotRegular: a log path that holds something else than a regular file
// (a FIFO, a device, a folder) is not read.
var errNotRegular = errors.New("not a regular file")

// openLog opens a file of the logs folder for reading: without following a
// symlink, without blocking (an ordinary open of a FIFO waits for a
// writer), and only when it is a regular file. The errors name the path.
func openLog(path string) (*os.File, os.FileInfo, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|noFollow|noBlock, 0)
	if err != nil {
		return nil, nil, err // *PathError: names the path
	}
	fi, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return nil, nil, err
	}
	if !fi.Mode().IsRegular() {
		_ = f.Close()
		return nil, nil, fmt.Errorf("open %s: %w (%s)", path, errNotRegular, fi.Mode().Type())
	}
	return f, fi, nil
}
