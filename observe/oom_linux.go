package observe

import (
	"bytes"
	"errors"
	"sync"

	"golang.org/x/sys/unix"
)

// kmsgMaxRecords bounds the records one look reads: the ring buffer holds a
// few thousand records on a default kernel (128 KiB to 1 MiB); more than
// this many is not a log procfleet can afford to read for one exit (the
// next look reads on from there).
const kmsgMaxRecords = 100_000

// atClkTck is AT_CLKTCK (include/uapi/linux/auxvec.h), absent from x/sys.
const atClkTck = 17

// clockTicks is USER_HZ, the unit of /proc/PID/stat start times (AT_CLKTCK
// from the auxiliary vector; 100 where it cannot be read, which is every
// Linux architecture's value).
var clockTicks = sync.OnceValue(func() uint64 {
	if auxv, err := unix.Auxv(); err == nil {
		for _, kv := range auxv {
			if kv[0] == atClkTck && kv[1] > 0 {
				return uint64(kv[1])
			}
		}
	}
	return 100
})

// KernelOOMKill looks in the kernel log (/dev/kmsg) for the out-of-memory
// killer's report that it killed pid, logged after the process started
// (startTime as in Identity; an older line names an earlier process with
// the same pid). It returns that line. false when there is none, and when
// the log cannot be read (it needs root or CAP_SYSLOG where
// kernel.dmesg_restrict is 1): no line, no claim.
//
// The log is read once: the first call reads it from its oldest record,
// later calls only what was logged since (kernelLog), so a look after an
// exit costs a read or two, not a read per record of the whole log.
func KernelOOMKill(pid int, startTime uint64) (string, bool) {
	return klog.oomKill(pid, startTime*(1_000_000/clockTicks()))
}

// kmsgMaxOOMs bounds the OOM killer's lines kept: each is a process killed;
// a look comes right after the exit it is about, so only recent ones matter.
const kmsgMaxOOMs = 256

// klog is the process's one reader of the kernel log.
var klog kernelLog

// kernelLog reads /dev/kmsg on from where its last look stopped (the
// descriptor stays open: its position is the kernel's sequence number,
// which lseek cannot restore) and keeps the OOM killer's lines it saw.
// Records the ring buffer dropped before they were read are skipped
// (EPIPE); a descriptor that fails otherwise is closed and the next look
// reads the log again from its oldest record.
type kernelLog struct {
	mu   sync.Mutex
	fd   int // open on /dev/kmsg when open is true
	open bool
	buf  []byte
	ooms []oomLine // oldest first
}

type oomLine struct {
	pid  int
	usec uint64
	msg  string
}

func (k *kernelLog) oomKill(pid int, startUsec uint64) (string, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.readNew()
	for i := len(k.ooms) - 1; i >= 0; i-- {
		if l := k.ooms[i]; l.pid == pid && l.usec >= startUsec {
			return l.msg, true
		}
	}
	return "", false
}

// readNew reads the records logged since the last look, at most
// kmsgMaxRecords of them (the rest are read by the next look).
func (k *kernelLog) readNew() {
	if !k.open {
		// A plain descriptor, not an *os.File: reads must not block, and
		// the runtime's poller has no business with it.
		fd, err := unix.Open("/dev/kmsg", unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
		if err != nil {
			return
		}
		k.fd, k.open = fd, true
		if k.buf == nil {
			k.buf = make([]byte, 8192)
		}
	}
	for range kmsgMaxRecords {
		n, err := unix.Read(k.fd, k.buf)
		switch {
		case errors.Is(err, unix.EINTR), errors.Is(err, unix.EPIPE):
			continue // EPIPE: a record was overwritten before it was read; go on
		case errors.Is(err, unix.EAGAIN):
			return // read to the end
		case err != nil || n <= 0:
			_ = unix.Close(k.fd)
			k.open = false
			return
		}
		if !bytes.Contains(k.buf[:n], killedProcess) {
			continue
		}
		rec, err := parseKmsg(k.buf[:n])
		if err != nil {
			continue
		}
		if p, ok := oomKilledPID(rec.Msg); ok {
			if len(k.ooms) == kmsgMaxOOMs {
				k.ooms = append(k.ooms[:0], k.ooms[1:]...)
			}
			k.ooms = append(k.ooms, oomLine{pid: p, usec: rec.Usec, msg: rec.Msg})
		}
	}
}

var killedProcess = []byte(oomMarker)
