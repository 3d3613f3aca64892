//go:build !linux

package observe

import "syscall"

// dieWithParent does nothing where the kernel has no parent-death signal
// (macOS): a probe there ends at its own pace if procfleet is killed.
func dieWithParent(*syscall.SysProcAttr) {}
