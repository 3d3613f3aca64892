package logfile

import (
	"os"

	"github.com/procfleet/procfleet/internal/safefile"
)

// openLog opens a file of the logs folder for reading through safefile:
// without following a symlink, without blocking (an ordinary open of a FIFO
// waits for a writer), and only when it is a regular file
// (*safefile.NotRegularError otherwise). The errors name the path.
func openLog(path string) (*os.File, os.FileInfo, error) {
	f, err := safefile.Open(path, os.O_RDONLY, 0)
	if err != nil {
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return nil, nil, err
	}
	return f, fi, nil
}
