package actuate

import (
	"errors"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/procfleet/procfleet/observe"
)

// pidfdSignalProcessGroup is PIDFD_SIGNAL_PROCESS_GROUP (Linux 6.9,
// include/uapi/linux/pidfd.h), absent from x/sys.
const pidfdSignalProcessGroup = 4

// pidfdGroupSignal is false only in tests of the killpg path.
var pidfdGroupSignal = true

// signalGroupOf sends sig to the process group of the pinned leader h. On
// Linux >= 6.9 it opens a pidfd on h's pid, checks that its pidfs inode is
// h's (so it is the same process, not a successor), and signals the group
// through it: no process group id is ever used bare. Elsewhere it uses
// killpg while the pinned leader is alive: a group id cannot be reused while
// its leader lives.
func signalGroupOf(h *observe.Handle, pgid int, sig syscall.Signal) (string, error) {
	if h.Exited() {
		return "", observe.ErrGone
	}
	if ino, ok := h.PidfdInode(); ok && pidfdGroupSignal {
		fd, err := unix.PidfdOpen(h.PID(), 0)
		if errors.Is(err, unix.ESRCH) {
			return "", observe.ErrGone
		}
		if err == nil {
			defer unix.Close(fd)
			var st unix.Stat_t
			if err := unix.Fstat(fd, &st); err != nil {
				return "", err
			}
			if st.Ino != ino {
				return "", observe.ErrGone // the pinned process is gone; its pid is another's
			}
			err = unix.PidfdSendSignal(fd, sig, nil, pidfdSignalProcessGroup)
			if !errors.Is(err, unix.EINVAL) {
				return "through the leader's pidfd (PIDFD_SIGNAL_PROCESS_GROUP)", err
			}
		}
	}
	if h.Exited() {
		return "", observe.ErrGone
	}
	return "by killpg while the pinned leader is alive", killGroup(pgid, sig)
}
