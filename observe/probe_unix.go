//go:build unix

package observe

import (
	"os/exec"
	"syscall"
)

// setProbeGroup runs an exec probe in its own process group and makes the
// context's cancel kill the whole group, so that a probe script's children
// do not outlive its timeout. Where the kernel can, the probe also dies
// with procfleet (dieWithParent): a probe left running by an up killed
// with -9 would have nobody left to enforce its timeout.
func setProbeGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	dieWithParent(cmd.SysProcAttr)
	cmd.Cancel = func() error {
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}

// killProbeGroup kills what is left of the probe's process group after the
// probe returned (children that kept running). The group id is only
// signalled while it still has members, so it cannot have been reused.
func killProbeGroup(cmd *exec.Cmd) {
	if cmd.Process == nil {
		return
	}
	pgid := cmd.Process.Pid
	if members, err := GroupMembers(pgid); err == nil && len(members) > 0 {
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
	}
}
