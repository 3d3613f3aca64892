//go:build !unix

package actuate

import "io/fs"

// fileOwner cannot tell the owner on this platform.
func fileOwner(fs.FileInfo) (int, bool) { return 0, false }

const noFollow = 0

const nonBlock = 0

func isSymlinkLoop(error) bool { return false }

// fileID cannot tell the device and inode on this platform.
func fileID(fs.FileInfo) (FolderID, bool) { return FolderID{}, false }

func linkCount(fs.FileInfo) uint64 { return 1 }
