//go:build unix && !linux

package api

import "fmt"

// withShortPath calls fn with path, or fails clearly when path is too long
// for a socket address (there is no /proc/self/fd here to shorten it).
func withShortPath(path string, fn func(string) error) error {
	if len(path) > maxSocketPath {
		return fmt.Errorf("socket path %s is too long (%d bytes, limit %d): use a shorter --state-dir", path, len(path), maxSocketPath)
	}
	return fn(path)
}
