//go:build unix && !linux

package actuate

import (
	"syscall"

	"github.com/procfleet/procfleet/observe"
)

// signalGroupOf sends sig to the process group of the pinned leader h with
// killpg, right after checking (kqueue) that the leader has not exited: a
// group id cannot be reused while its leader lives. Compile-checked only on
// macOS.
func signalGroupOf(h *observe.Handle, pgid int, sig syscall.Signal) error {
	if h.Exited() {
		return observe.ErrGone
	}
	return killGroup(pgid, sig)
}
