//go:build !linux

package reconciler

// process appends the process_* families this system answers without cgo.
func (w *expo) process() { w.processCPU() }
