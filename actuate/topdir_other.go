//go:build !linux

package actuate

// markTopDir is a Linux (ext4) placement hint; elsewhere there is none.
func markTopDir(string) {}
