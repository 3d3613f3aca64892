//go:build !unix

package actuate

import (
	"io"
	"io/fs"
	"os"
)

// fileOwner cannot tell the owner on this platform.
func fileOwner(fs.FileInfo) (int, bool) { return 0, false }

const noFollow = 0

const nonBlock = 0

func isSymlinkLoop(error) bool { return false }

// fileID cannot tell the device and inode on this platform.
func fileID(fs.FileInfo) (FolderID, bool) { return FolderID{}, false }

func linkCount(fs.FileInfo) uint64 { return 1 }

// openRecordFile opens a record read-only and stats the opened file.
func openRecordFile(path string) (io.ReadCloser, recordStat, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, recordStat{}, err
	}
	fi, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return nil, recordStat{}, err
	}
	return f, recordStat{regular: fi.Mode().IsRegular(), perm: fi.Mode().Perm(), size: fi.Size()}, nil
}
