//go:build !linux

package observe

// KernelOOMKill: this system's kernel log is not read (false: no claim).
func KernelOOMKill(int, uint64) (string, bool) { return "", false }
