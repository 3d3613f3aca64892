//go:build !linux && !darwin

package observe

// ExitStatus is always false on this GOOS (no process observation).
func (h *Handle) ExitStatus() (ExitStatus, bool) { return ExitStatus{}, false }
