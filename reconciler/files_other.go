//go:build !linux

package reconciler

// newNativeBackend returns the watch of platforms without one of their own
// here: fsnotify (kqueue on macOS), with no writer probe.
func newNativeBackend(bool) (watchBackend, error) { return newFsnotifyBackend() }
