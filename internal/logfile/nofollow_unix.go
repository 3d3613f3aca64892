//go:build unix

package logfile

import "syscall"

// noFollow makes an open fail on a symlink: a log path is never followed
// out of the state folder.
const noFollow = syscall.O_NOFOLLOW
