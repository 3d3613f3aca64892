//go:build !linux

package actuate

import (
	"fmt"
	"os"
	"runtime"
	"syscall"

	"github.com/procfleet/procfleet/observe"
)

// Membership is always the session mode here: there are no cgroups on
// this system.
func (d *StateDir) Membership() Membership {
	return Membership{Mode: MembershipSession, Why: "no cgroups on " + runtime.GOOS}
}

type serverCgroup struct {
	path string
	dir  string
	fd   *os.File
}

func (d *StateDir) makeServerCgroup(string) (*serverCgroup, string, error) {
	return nil, "no cgroups on " + runtime.GOOS, nil
}

func (d *StateDir) serverCgroupPath(string) string { return "" }

func cgroupDir(string) (string, error) {
	return "", fmt.Errorf("cgroups on %s: %w", runtime.GOOS, observe.ErrNotSupported)
}

func killCgroup(string) error {
	return fmt.Errorf("cgroups on %s: %w", runtime.GOOS, observe.ErrNotSupported)
}

func removeCgroup(string) error { return nil }

func removeEmptyCgroup(string) bool { return false }

func intoCgroup(*syscall.SysProcAttr, *os.File) {}

func (d *StateDir) sweepCgroups() {}

func cloneRefused(error) bool { return false }
