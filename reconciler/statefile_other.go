//go:build !unix

package reconciler

// openNoFollow: no such flags here; the Lstat before the open refuses a
// symlink or a FIFO.
const openNoFollow = 0
