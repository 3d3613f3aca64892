//go:build unix

package observe

import (
	"os/exec"
	"syscall"
)

// setProbeGroup runs an exec probe in its own process group and makes the
// context's cancel kill the whole group, so that a probe script's children
// do not outlive its timeout.
func setProbeGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}
