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
func signalGroupOf(h *observe.Handle, pgid int, sig syscall.Signal) (string, error) {
	if h.Exited() {
		return "", observe.ErrGone
	}
	return "by killpg while the pinned leader is alive", killGroup(pgid, sig)
}
