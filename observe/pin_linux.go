package observe

import (
	"errors"
	"fmt"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// pidfsMagic is PIDFS_MAGIC, the statfs type of pidfds on kernels >= 6.9.
const pidfsMagic = 0x50494446

// pidfdBroken is set once pidfd_open failed with ENOSYS or EPERM (a kernel
// before 5.3, or a seccomp filter); later pins go straight to PinNone.
var pidfdBroken atomic.Bool

// Pin opens a pidfd on pid. Identity read through the returned handle is
// checked against the pidfd, signals go through it, and waits poll it, so
// none of them can reach a process that later reuses the pid. When
// pidfd_open is not available (ENOSYS, or EPERM from a seccomp filter) the
// handle is PinNone: it remembers the start time it read and polls; the
// caller should log that mode. The error wraps ErrGone when pid does not
// exist.
func Pin(pid int) (*Handle, error) {
	if pid <= 0 {
		return nil, fmt.Errorf("pin pid %d: %w", pid, ErrGone)
	}
	if !pidfdBroken.Load() {
		h, err := pinPidfd(pid)
		if err == nil || !(errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EPERM)) {
			return h, err
		}
		pidfdBroken.Store(true)
	}
	return pinNone(pid)
}

func pinPidfd(pid int) (*Handle, error) {
	fd, err := unix.PidfdOpen(pid, unix.PIDFD_NONBLOCK)
	if errors.Is(err, unix.EINVAL) {
		// Before 5.10 PIDFD_NONBLOCK is unknown; O_NONBLOCK on the
		// descriptor only matters to the runtime poller.
		fd, err = unix.PidfdOpen(pid, 0)
		if err == nil {
			if serr := unix.SetNonblock(fd, true); serr != nil {
				unix.Close(fd)
				return nil, fmt.Errorf("pin pid %d: %w", pid, serr)
			}
		}
	}
	switch {
	case errors.Is(err, unix.ESRCH):
		return nil, fmt.Errorf("pin pid %d: %w", pid, ErrGone)
	case errors.Is(err, unix.ENOENT):
		// pid is a thread of another process, not a process.
		return nil, fmt.Errorf("pin pid %d: not a process: %w", pid, ErrGone)
	case err != nil:
		return nil, fmt.Errorf("pin pid %d: pidfd_open: %w", pid, err)
	}
	h := newHandle(pid, PinPidfd)
	h.sys.inode, h.sys.haveInode = pidfsInode(fd)
	if err := h.sys.set(fd, "pidfd"); err != nil {
		return nil, fmt.Errorf("pin pid %d: %w", pid, err)
	}
	return h, nil
}

// pidfsKnown says whether pidfds live on pidfs, once one pidfd's file
// system was read: the kernel puts every pidfd on the same one, so one
// fstatfs answers for all (a down of 1,000 read it 1,000 times, 3% of
// its CPU).
var pidfsKnown atomic.Int32

const (
	pidfsUnknown int32 = iota
	pidfsYes
	pidfsNo
)

// pidfsInode returns the inode of a pidfd when it lives on pidfs (Linux >=
// 6.9), where it names one process for the life of the system.
func pidfsInode(fd int) (uint64, bool) {
	switch pidfsKnown.Load() {
	case pidfsNo:
		return 0, false
	case pidfsUnknown:
		var sfs unix.Statfs_t
		if err := unix.Fstatfs(fd, &sfs); err != nil {
			return 0, false
		}
		if uint64(sfs.Type) != pidfsMagic {
			pidfsKnown.Store(pidfsNo)
			return 0, false
		}
		pidfsKnown.Store(pidfsYes)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return 0, false
	}
	return st.Ino, true
}

// PidfdInode returns the pidfs inode of the handle's pidfd (Linux >= 6.9);
// false on older kernels and for PinNone handles.
func (h *Handle) PidfdInode() (uint64, bool) {
	return h.sys.inode, h.sys.haveInode
}

// Identity reads the identity of the pinned process and then checks that the
// process had not exited when the read ended. If it had, the error wraps
// ErrUntrusted (and the Identity returned is what was read, for messages
// only). For PinNone handles, a start time other than the one read at Pin
// time is also ErrUntrusted.
func (h *Handle) Identity() (Identity, error) {
	if h.isClosed() {
		return Identity{}, fmt.Errorf("identity of pid %d: handle closed", h.pid)
	}
	id, err := ReadIdentity(h.pid)
	return h.checkRead(id, err)
}

// IdentityBrief is Identity without the command line (left nil): for a
// caller that has other proof of who the process is (a pidfs inode equal
// to one it recorded) and reads its identity for the start time, state,
// group and uid alone. It reads /proc/PID/stat, and the uid through the
// pidfd (PIDFD_GET_INFO, Linux >= 6.13), else from /proc/PID/status:
// one /proc read where Identity takes three. Its checks are Identity's.
func (h *Handle) IdentityBrief() (Identity, error) {
	if h.isClosed() {
		return Identity{}, fmt.Errorf("identity of pid %d: handle closed", h.pid)
	}
	id, err := readIdentityBrief(h)
	return h.checkRead(id, err)
}

// readIdentityBrief reads IdentityBrief's fields of h's process.
func readIdentityBrief(h *Handle) (Identity, error) {
	st, err := readStat(h.pid)
	if err != nil {
		return Identity{}, fmt.Errorf("read identity: %w", err)
	}
	id := Identity{
		PID: st.PID, PPID: st.PPID, PGID: st.PGID, SID: st.SID,
		State: st.State, StartTime: st.StartTime, Comm: st.Comm, UID: -1,
	}
	if id.BootID, err = BootID(); err != nil {
		return Identity{}, fmt.Errorf("read identity of pid %d: %w", h.pid, err)
	}
	if uid, ok := h.pidfdUID(); ok {
		id.UID = uid
		return id, nil
	}
	status, err := readProcFile(h.pid, "status")
	if err != nil {
		return Identity{}, fmt.Errorf("read identity: %w", err)
	}
	if id.UID, err = parseStatusUID(status); err != nil {
		return Identity{}, fmt.Errorf("read identity of pid %d: %w", h.pid, err)
	}
	return id, nil
}

// pidfdInfoBroken is set once PIDFD_GET_INFO failed other than with ESRCH
// (a kernel before 6.13): later reads go to /proc/PID/status.
var pidfdInfoBroken atomic.Bool

// pidfdUID returns the real uid of the pinned process through its pidfd
// (PIDFD_GET_INFO); false when that cannot tell (PinNone, an older kernel,
// the process gone).
func (h *Handle) pidfdUID() (int, bool) {
	if h.mode != PinPidfd || pidfdInfoBroken.Load() {
		return 0, false
	}
	info := unix.PidfdInfo{Mask: unix.PIDFD_INFO_CREDS}
	var err error
	if cerr := h.control(func(fd int) { err = unix.IoctlPidfdInfo(fd, &info) }); cerr != nil {
		return 0, false
	}
	if err != nil {
		if !errors.Is(err, unix.ESRCH) {
			pidfdInfoBroken.Store(true)
		}
		return 0, false
	}
	if info.Mask&unix.PIDFD_INFO_CREDS == 0 {
		return 0, false
	}
	return int(info.Ruid), true
}

// checkRead is Identity's check of what was read through h: a read that
// failed because the pinned process is gone, or that ended after it
// exited (or, unpinned, found another start time), is ErrUntrusted.
func (h *Handle) checkRead(id Identity, err error) (Identity, error) {
	if err != nil {
		if errors.Is(err, ErrGone) && h.mode == PinPidfd {
			return id, fmt.Errorf("identity of pid %d: %w: %w", h.pid, ErrUntrusted, err)
		}
		return id, err
	}
	if h.mode == PinNone && h.start != 0 && id.StartTime != h.start {
		h.exitedSeen.Store(true)
		return id, fmt.Errorf("identity of pid %d: start time %d, pinned %d: %w", h.pid, id.StartTime, h.start, ErrUntrusted)
	}
	if h.Exited() {
		return id, fmt.Errorf("identity of pid %d: %w", h.pid, ErrUntrusted)
	}
	return id, nil
}

func (h *Handle) sysExited() bool {
	exited := false
	_ = h.control(func(fd int) { exited = pollIn(fd, 0) })
	return exited
}

// exitPollBatch is how many pidfds one poll(2) of ExitedAll asks about: a
// syscall for every 64 handles, and at most 64 nested holds of a
// descriptor on the stack.
const exitPollBatch = 64

// sysExitedAll is ExitedAll's look at the handles not known to have exited
// (exited[i] false): pidfd handles by batches of exitPollBatch in one
// poll(2), the others one at a time.
func sysExitedAll(hs []*Handle, exited []bool) {
	b := &exitBatch{}
	b.held = func(fd uintptr) {
		b.fds[b.k-1].Fd = int32(fd) // hold took the k-th, then counted it
		b.hold()
	}
	for i, h := range hs {
		if exited[i] {
			continue
		}
		if h.mode != PinPidfd {
			exited[i] = h.Exited()
			continue
		}
		b.hs[b.n], b.at[b.n] = h, i
		if b.n++; b.n == exitPollBatch {
			b.poll(exited)
		}
	}
	if b.n > 0 {
		b.poll(exited)
	}
}

// exitBatch is up to exitPollBatch pidfd handles, and their indices in
// ExitedAll's arguments.
type exitBatch struct {
	n, k int // handles in the batch, handles held so far
	hs   [exitPollBatch]*Handle
	at   [exitPollBatch]int
	fds  [exitPollBatch]unix.PollFd
	held func(fd uintptr) // hold's Control callback, made once per ExitedAll
}

// poll asks about the batch's handles in one poll(2), sets exited at their
// indices, and empties the batch. Each descriptor is held (Control) from
// before the call until after it, so that a Close meanwhile cannot hand its
// number to another file: hold holds the next one and, within its Control,
// the rest, nested.
func (b *exitBatch) poll(exited []bool) {
	b.k = 0
	b.hold()
	for k := range b.n {
		if b.fds[k].Fd >= 0 && b.fds[k].Revents&(unix.POLLIN|unix.POLLHUP) != 0 {
			exited[b.at[k]] = true
		}
		b.hs[k] = nil
	}
	b.n = 0
}

func (b *exitBatch) hold() {
	if b.k == b.n {
		for {
			_, err := unix.Poll(b.fds[:b.n], 0)
			if err != unix.EINTR {
				if err != nil {
					for i := range b.n {
						b.fds[i].Revents = 0
					}
				}
				return
			}
		}
	}
	k := b.k
	b.fds[k] = unix.PollFd{Fd: -1, Events: unix.POLLIN} // a negative fd is skipped by poll
	b.k++
	if b.hs[k].sys.rc.Control(b.held) != nil { // closed: not held, go on without it
		b.hold()
	}
}

// pollIn polls fd for POLLIN for up to d (0: do not block).
func pollIn(fd int, d time.Duration) bool {
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	for {
		n, err := unix.Poll(fds, int(d/time.Millisecond))
		if err == unix.EINTR {
			continue
		}
		return err == nil && n > 0 && fds[0].Revents&(unix.POLLIN|unix.POLLHUP) != 0
	}
}

func (h *Handle) sysWaitExit() error {
	return h.waitFD(func(fd int) bool { return pollIn(fd, 0) }, pollIn)
}

// Signal sends sig to the pinned process through its pidfd, which cannot
// reach a process that reused the pid. The error wraps ErrGone when the
// process has exited (a zombie included).
func (h *Handle) Signal(sig syscall.Signal) error {
	if h.isClosed() {
		return fmt.Errorf("signal %v to pid %d: handle closed", sig, h.pid)
	}
	if h.Exited() {
		return fmt.Errorf("signal %v to pid %d: %w", sig, h.pid, ErrGone)
	}
	var err error
	if h.mode == PinNone {
		err = unix.Kill(h.pid, sig)
	} else if cerr := h.control(func(fd int) { err = unix.PidfdSendSignal(fd, sig, nil, 0) }); cerr != nil {
		return fmt.Errorf("signal %v to pid %d: %w", sig, h.pid, cerr)
	}
	if errors.Is(err, unix.ESRCH) {
		h.exitedSeen.Store(true)
		return fmt.Errorf("signal %v to pid %d: %w", sig, h.pid, ErrGone)
	}
	if err != nil {
		return fmt.Errorf("signal %v to pid %d: %w", sig, h.pid, err)
	}
	return nil
}

// pidfdSignalProcessGroup is PIDFD_SIGNAL_PROCESS_GROUP (Linux 6.9,
// include/uapi/linux/pidfd.h); x/sys does not define it.
const pidfdSignalProcessGroup = 4

// SignalGroup sends sig to the process group the pinned process is in now,
// through its pidfd (PIDFD_SIGNAL_PROCESS_GROUP, Linux >= 6.9): no group id
// is used bare, so a reused group id cannot be hit. The error wraps ErrGone
// when the process has exited, and ErrNotSupported for PinNone handles and
// kernels without the flag (callers then fall back to killpg while the
// pinned leader is alive).
func (h *Handle) SignalGroup(sig syscall.Signal) error {
	if h.isClosed() {
		return fmt.Errorf("signal %v to the group of pid %d: handle closed", sig, h.pid)
	}
	if h.mode != PinPidfd {
		return fmt.Errorf("signal %v to the group of pid %d: %w: unpinned", sig, h.pid, ErrNotSupported)
	}
	if h.Exited() {
		return fmt.Errorf("signal %v to the group of pid %d: %w", sig, h.pid, ErrGone)
	}
	var err error
	if cerr := h.control(func(fd int) { err = unix.PidfdSendSignal(fd, sig, nil, pidfdSignalProcessGroup) }); cerr != nil {
		return fmt.Errorf("signal %v to the group of pid %d: %w", sig, h.pid, cerr)
	}
	switch {
	case errors.Is(err, unix.ESRCH):
		h.exitedSeen.Store(true)
		return fmt.Errorf("signal %v to the group of pid %d: %w", sig, h.pid, ErrGone)
	case errors.Is(err, unix.EINVAL):
		return fmt.Errorf("signal %v to the group of pid %d: %w: pidfd_send_signal: %w", sig, h.pid, ErrNotSupported, err)
	case err != nil:
		return fmt.Errorf("signal %v to the group of pid %d: %w", sig, h.pid, err)
	}
	return nil
}
