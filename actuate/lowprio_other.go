//go:build !linux

package actuate

// lowerThreadPriority does nothing where a thread's priority cannot be set
// apart from its process's.
func lowerThreadPriority() {}
