package observe

import "syscall"

// dieWithParent makes the child get SIGKILL when the thread that started
// it exits (PR_SET_PDEATHSIG), which in procfleet means when procfleet
// exits: Go ends a thread only when a goroutine locked to it returns
// without unlocking, which procfleet never does. The signal survives the
// child's exec (of anything but a set-uid program).
func dieWithParent(attr *syscall.SysProcAttr) {
	attr.Pdeathsig = syscall.SIGKILL
}
