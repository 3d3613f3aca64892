//go:build unix

package reconciler

import "syscall"

// openNoFollow: an open of a state file fails on a symlink (ELOOP) and does
// not wait for a writer on a FIFO swapped in after the path was checked.
const openNoFollow = syscall.O_NOFOLLOW | syscall.O_NONBLOCK
