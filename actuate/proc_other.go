//go:build !unix

package actuate

import (
	"fmt"
	"os"
	"runtime"
	"syscall"

	"github.com/procfleet/procfleet/observe"
)

var errUnsupported = fmt.Errorf("process groups are not supported on %s: %w", runtime.GOOS, observe.ErrNotSupported)

func newSessionAttr() *syscall.SysProcAttr { return nil }

func killGroup(int, syscall.Signal) error { return errUnsupported }

func ownPGID() int { return -1 }

func exitStatusOf(ps *os.ProcessState, _ error) ExitStatus {
	if ps == nil {
		return ExitStatus{Code: -1}
	}
	return ExitStatus{Code: ps.ExitCode()}
}

func signalName(sig syscall.Signal) string { return sig.String() }

func signalNumber(string) int { return 0 }

func signalGroupOf(*observe.Handle, int, syscall.Signal) (string, error) { return "", errUnsupported }

func groupExists(int) bool { return true }
