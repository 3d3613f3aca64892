package actuate

import (
	"fmt"
	"sync"

	"github.com/procfleet/procfleet/observe"
)

// OOMEvidence returns the kernel's evidence that the out-of-memory killer
// ended the server of rec: the oom_kill count of its cgroup's
// memory.events (where the memory controller is enabled for it), or the
// OOM killer's line for its pid in the kernel log, logged after it started
// (where procfleet may read the log: root, or kernel.dmesg_restrict 0).
// false when the kernel says nothing of it: then no claim is made. Call it
// before Cleanup, which removes the cgroup and its counters.
func OOMEvidence(rec Record) (string, bool) {
	if rec.Cgroup != "" {
		if dir, err := cgroupDir(rec.Cgroup); err == nil {
			if n, ok := observe.CgroupOOMKills(dir); ok && n > 0 {
				return fmt.Sprintf("memory.events of cgroup %s counts oom_kill %d", rec.Cgroup, n), true
			}
		}
	}
	if rec.PID > 0 && rec.StartTime > 0 {
		if line, ok := observe.KernelOOMKill(rec.PID, rec.StartTime); ok {
			return "kernel log: " + line, true
		}
	}
	return "", false
}

// primeKernelLog reads the kernel log to its end once, off the caller's
// way (at the first Spawn), so that the first SIGKILLed server's exit, like
// every later one, reads only what was logged since (KernelOOMKill) on its
// way to the restart. No pid is 0: nothing is looked up.
var primeKernelLog = sync.OnceFunc(func() { go observe.KernelOOMKill(0, 0) })

// ExitMessage says how a server's process ended, for status and events:
// "exited with code N", or "killed by signal 9 (SIGKILL)", followed, only
// when the kernel says so (OOMEvidence), by "by the out-of-memory killer
// (<evidence>)". A manual kill -9 gets no hint. Call it before Cleanup.
func ExitMessage(rec Record, st ExitStatus) string {
	msg := st.String()
	if st.Signal != "SIGKILL" {
		return msg
	}
	ev, ok := st.OOM, st.OOM != ""
	if !ok {
		ev, ok = OOMEvidence(rec)
	}
	if ok {
		msg += " by the out-of-memory killer (" + ev + ")"
	}
	return msg
}
