//go:build unix

package logfile

import "syscall"

// noFollow makes an open fail on a symlink, so a log path is never followed
// out of the state folder; noBlock makes opening a FIFO return at once
// instead of waiting for a writer.
const (
	noFollow = syscall.O_NOFOLLOW
	noBlock  = syscall.O_NONBLOCK
)
