//go:build unix

package reconciler

import "golang.org/x/sys/unix"

// openFileLimit is this process's soft limit on open descriptors
// (RLIMIT_NOFILE, which Go raises to the hard limit at start-up), 0 when
// unknown.
func openFileLimit() int {
	var rl unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_NOFILE, &rl) != nil || rl.Cur > 1<<30 {
		return 0
	}
	return int(rl.Cur)
}
