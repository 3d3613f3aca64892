//go:build !linux && !darwin

package actuate

// closeInheritedFDs does nothing on this platform: only Go's own
// (close-on-exec) descriptors are open.
func closeInheritedFDs() error { return nil }
