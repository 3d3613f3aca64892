package api

import (
	"fmt"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// withShortPath calls fn with path, or, when path is too long for a socket
// address, with /proc/self/fd/N/<base> where N is a descriptor of path's
// folder held open during fn: a state folder deep in a project tree is still
// usable.
func withShortPath(path string, fn func(string) error) error {
	if len(path) <= maxSocketPath {
		return fn(path)
	}
	dir, base := filepath.Split(path)
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open socket folder: %w", err)
	}
	defer unix.Close(fd)
	short := fmt.Sprintf("/proc/self/fd/%d/%s", fd, base)
	if len(short) > maxSocketPath {
		return fmt.Errorf("socket name %q is too long (%d bytes, limit %d)", base, len(short), maxSocketPath)
	}
	return fn(short)
}
