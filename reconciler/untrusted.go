package reconciler

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"

	"github.com/procfleet/procfleet/actuate"
	"github.com/procfleet/procfleet/observe"
)

var (
	salvagePID   = regexp.MustCompile(`"pid"\s*:\s*([0-9]+)`)
	salvageStart = regexp.MustCompile(`"startTime"\s*:\s*([0-9]+)`)
)

// salvageIdentity picks the pid and start time out of an untrusted record's
// bytes, whatever else is broken in it. Zero means not found. The result is
// only ever used to decide that something is gone, never to signal.
func salvageIdentity(b []byte) (pid int, start uint64) {
	if m := salvagePID.FindSubmatch(b); m != nil {
		if n, err := strconv.Atoi(string(m[1])); err == nil && n > 0 {
			pid = n
		}
	}
	if m := salvageStart.FindSubmatch(b); m != nil {
		start, _ = strconv.ParseUint(string(m[1]), 10, 64)
	}
	return pid, start
}

// sameCommand says whether a process's argv is the declared command line:
// the same arguments, and the same program (path, or base name when one of
// the two was resolved through PATH).
func sameCommand(argv, declared []string) bool {
	if len(argv) == 0 || len(argv) != len(declared) || !slices.Equal(argv[1:], declared[1:]) {
		return false
	}
	return argv[0] == declared[0] || filepath.Base(argv[0]) == filepath.Base(declared[0])
}

// untrustedGone decides whether an UntrustedRecord quarantine has nothing
// left to protect: the process the moved-aside record named (as far as its
// bytes tell) is gone or was replaced, the declared port is free, and no
// live process runs the declared command line. It says why, either way.
// It only reads the kernel's state; it never signals anything.
func untrustedGone(ue *actuate.UntrustedRecordError, d Desired) (string, bool) {
	pid, start := 0, uint64(0)
	if ue != nil && ue.MovedTo != "" {
		if b, err := os.ReadFile(ue.MovedTo); err == nil {
			pid, start = salvageIdentity(b)
		}
	}
	why := "the moved-aside record names no process"
	if pid > 0 {
		switch observe.CheckLiveness(pid) {
		case observe.LivenessGone:
			why = fmt.Sprintf("pid %d it named is gone", pid)
		case observe.LivenessAlive:
			id, err := observe.ReadIdentity(pid)
			if err != nil || start == 0 || id.StartTime == start {
				return fmt.Sprintf("pid %d it named may still run", pid), false
			}
			why = fmt.Sprintf("pid %d it named is now another process", pid)
		default:
			return fmt.Sprintf("pid %d it named cannot be examined", pid), false
		}
	}
	var port int
	var argv []string
	if d.Server != nil {
		in := instanceFor(d)
		port, argv = in.Port, in.Argv()
	}
	if holder := PortHolder(port); holder != "" {
		return fmt.Sprintf("port %d is held by %s", port, holder), false
	}
	if len(argv) > 0 {
		found, known := runsCommand(argv)
		if found {
			return "a process runs its command line", false
		}
		if !known && pid == 0 {
			return "nothing proves its process gone", false
		}
	}
	if port > 0 {
		why += fmt.Sprintf(", port %d is free", port)
	}
	return why + ", and no process runs its command line", true
}
