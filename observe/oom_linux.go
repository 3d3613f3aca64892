package observe

import (
	"errors"
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// kmsgMaxRecords bounds one read of the kernel log: the ring buffer holds a
// few thousand records on a default kernel (128 KiB to 1 MiB); more than
// this many is not a log procfleet can afford to read for one exit.
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
func KernelOOMKill(pid int, startTime uint64) (string, bool) {
	f, err := os.OpenFile("/dev/kmsg", os.O_RDONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		return "", false
	}
	defer f.Close()
	fd := int(f.Fd())
	startUsec := startTime * (1_000_000 / clockTicks())
	buf := make([]byte, 8192)
	found := ""
	for range kmsgMaxRecords {
		n, err := unix.Read(fd, buf)
		switch {
		case errors.Is(err, unix.EINTR), errors.Is(err, unix.EPIPE):
			continue // EPIPE: a record was overwritten while read; go on
		case err != nil || n <= 0:
			return found, found != ""
		}
		rec, err := parseKmsg(buf[:n])
		if err != nil || rec.Usec < startUsec {
			continue
		}
		if p, ok := oomKilledPID(rec.Msg); ok && p == pid {
			found = rec.Msg
		}
	}
	return found, found != ""
}
