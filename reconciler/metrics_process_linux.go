package reconciler

import (
	"bytes"
	"os"
	"strconv"
	"sync"
)

// userHZ is the unit of the times in /proc/PID/stat: USER_HZ, which Linux
// fixes at 100 for user space whatever the kernel's own tick.
const userHZ = 100

// process appends the process_* families, from getrusage, getrlimit and
// /proc/self.
func (w *expo) process() {
	w.processCPU()
	if n, err := openFDs(); err == nil {
		w.family("process_open_fds", "File descriptors the process has open.", "gauge")
		w.sample("process_open_fds", float64(n))
	}
	b, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return
	}
	st, ok := parseSelfStat(b)
	if !ok {
		return
	}
	w.family("process_resident_memory_bytes", "Resident set size of the process, in bytes.", "gauge")
	w.sample("process_resident_memory_bytes", float64(st.rssPages*uint64(os.Getpagesize())))
	if boot := bootTime(); boot > 0 {
		w.family("process_start_time_seconds", "When the process started, in seconds since the Unix epoch.", "gauge")
		w.sample("process_start_time_seconds", float64(boot)+float64(st.startTicks)/userHZ)
	}
	w.family("process_virtual_memory_bytes", "Virtual memory size of the process, in bytes.", "gauge")
	w.sample("process_virtual_memory_bytes", float64(st.vsize))
}

// selfStat is what the metrics read of /proc/self/stat.
type selfStat struct {
	startTicks uint64 // field 22
	vsize      uint64 // field 23, bytes
	rssPages   uint64 // field 24
}

// parseSelfStat reads fields 22-24 of a /proc/PID/stat line: the fields
// after the last ')', since the command name may hold spaces and ')'.
func parseSelfStat(b []byte) (selfStat, bool) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return selfStat{}, false
	}
	f := bytes.Fields(b[i+1:]) // f[0] is field 3 (state)
	if len(f) < 22 {
		return selfStat{}, false
	}
	var st selfStat
	var err error
	for _, p := range []struct {
		dst   *uint64
		field int
	}{{&st.startTicks, 22}, {&st.vsize, 23}, {&st.rssPages, 24}} {
		if *p.dst, err = strconv.ParseUint(string(f[p.field-3]), 10, 64); err != nil {
			return selfStat{}, false
		}
	}
	return st, true
}

// bootTime is the btime line of /proc/stat (seconds since the epoch), or 0
// when it cannot be read. It never changes while the machine runs.
var bootTime = sync.OnceValue(func() int64 {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	for line := range bytes.Lines(b) {
		if v, ok := bytes.CutPrefix(line, []byte("btime ")); ok {
			n, err := strconv.ParseInt(string(bytes.TrimSpace(v)), 10, 64)
			if err != nil {
				return 0
			}
			return n
		}
	}
	return 0
})

// openFDs counts the entries of /proc/self/fd (less the one it opens to
// list them).
func openFDs() (int, error) {
	d, err := os.Open("/proc/self/fd")
	if err != nil {
		return 0, err
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return 0, err
	}
	return len(names) - 1, nil
}
