package reconciler

import (
	"bytes"
	"os"
	"strconv"
)

// runsCommand says whether a live process (other than this one) runs argv,
// from /proc; known is false when /proc cannot be listed.
func runsCommand(argv []string) (found, known bool) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return false, false
	}
	self := os.Getpid()
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil || len(b) == 0 {
			continue // gone, a zombie or a kernel thread
		}
		fields := bytes.Split(bytes.TrimSuffix(b, []byte{0}), []byte{0})
		got := make([]string, len(fields))
		for i, f := range fields {
			got[i] = string(f)
		}
		if sameCommand(got, argv) {
			return true, true
		}
	}
	return false, true
}
