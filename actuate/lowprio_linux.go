package actuate

import (
	"runtime"

	"golang.org/x/sys/unix"
)

// lowerThreadPriority gives the calling goroutine an OS thread of its own
// at the lowest scheduling priority (nice 19): the thread is never handed
// back, so it ends with the goroutine and no other goroutine runs on it.
// A failure leaves the usual priority.
func lowerThreadPriority() {
	runtime.LockOSThread()
	_ = unix.Setpriority(unix.PRIO_PROCESS, unix.Gettid(), 19)
}
