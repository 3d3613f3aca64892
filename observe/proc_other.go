//go:build !linux && !darwin

package observe

import (
	"fmt"
	"runtime"
	"syscall"
)

// Process observation has no implementation on this GOOS; probes and
// PortAccepting work everywhere.

var errOS = fmt.Errorf("%w: %s", ErrNotSupported, runtime.GOOS)

type handleSys struct{}

// BootID is not supported on this GOOS.
func BootID() (string, error) { return "", errOS }

// ReadIdentity is not supported on this GOOS.
func ReadIdentity(int) (Identity, error) { return Identity{}, errOS }

// CheckLiveness cannot tell on this GOOS: unknown.
func CheckLiveness(int) Liveness { return LivenessUnknown }

func startTimeOf(int) (uint64, error) { return 0, errOS }

// GroupMembers is not supported on this GOOS.
func GroupMembers(int) ([]int, error) { return nil, errOS }

// ProcessGroups is not supported on this GOOS.
func ProcessGroups() (map[int][]int, error) { return nil, errOS }

// Descendants is not supported on this GOOS.
func Descendants(int) ([]int, error) { return nil, errOS }

// Listeners is not supported on this GOOS.
func Listeners(int) ([]Listener, error) { return nil, errOS }

// Pin is not supported on this GOOS.
func Pin(int) (*Handle, error) { return nil, errOS }

// Identity is not supported on this GOOS.
func (h *Handle) Identity() (Identity, error) { return Identity{}, errOS }

// IdentityBrief is not supported on this GOOS.
func (h *Handle) IdentityBrief() (Identity, error) { return Identity{}, errOS }

// PidfdInode is always false on this GOOS.
func (h *Handle) PidfdInode() (uint64, bool) { return 0, false }

// Signal is not supported on this GOOS.
func (h *Handle) Signal(syscall.Signal) error { return errOS }

func (h *Handle) sysExited() bool                   { return false }
func (h *Handle) sysWaitExit() error                { return errOS }
func (h *Handle) sysClose() error                   { return nil }
func newExitBackend() (exitBackend, PinMode, error) { return nil, PinNone, errOS }

// SignalGroup is not supported on this GOOS.
func (h *Handle) SignalGroup(syscall.Signal) error { return errOS }

// ScanProcesses is not supported on this GOOS.
func ScanProcesses(ScanOptions) ([]ProcEntry, error) { return nil, errOS }

// Env is not supported on this GOOS.
func (h *Handle) Env(string) (string, bool, error) { return "", false, errOS }

// sysExitedAll is ExitedAll's look at the handles not known to have
// exited: one at a time.
func sysExitedAll(hs []*Handle, exited []bool) {
	for i, h := range hs {
		if !exited[i] {
			exited[i] = h.Exited()
		}
	}
}
