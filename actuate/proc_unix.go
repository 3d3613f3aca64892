//go:build unix

package actuate

import (
	"errors"
	"os"
	"os/exec"
	"syscall"

	"golang.org/x/sys/unix"
)

// newSessionAttr starts the child in its own session and process group,
// without a controlling terminal: terminal signals to procfleet do not reach
// it, and its group can be signalled as a whole.
func newSessionAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setsid: true}
}

// killGroup is kill(-pgid, sig). Only called right after checking that the
// pinned leader of the group is alive (a group id is not reused while its
// leader lives).
func killGroup(pgid int, sig syscall.Signal) error {
	if pgid <= 1 {
		return syscall.EINVAL
	}
	return unix.Kill(-pgid, sig)
}

func ownPGID() int { return unix.Getpgrp() }

// exitStatusOf reads how a reaped child ended.
func exitStatusOf(ps *os.ProcessState, err error) ExitStatus {
	if ps == nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			ps = ee.ProcessState
		}
	}
	if ps == nil {
		return ExitStatus{Code: -1}
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return ExitStatus{Code: -1, Signal: signalName(ws.Signal())}
	}
	return ExitStatus{Code: ps.ExitCode()}
}

func signalName(sig syscall.Signal) string {
	if n := unix.SignalName(sig); n != "" {
		return n
	}
	return sig.String()
}

func signalNumber(name string) int {
	return int(unix.SignalNum(name))
}

// groupExists probes a process group with signal 0 (nothing is delivered):
// false only when no process is in it (ESRCH).
func groupExists(pgid int) bool {
	return unix.Kill(-pgid, 0) != unix.ESRCH
}
