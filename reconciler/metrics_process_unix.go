//go:build unix

package reconciler

import "golang.org/x/sys/unix"

// processCPU appends process_cpu_seconds_total and process_max_fds, which
// every unix answers the same way.
func (w *expo) processCPU() {
	var ru unix.Rusage
	if unix.Getrusage(unix.RUSAGE_SELF, &ru) == nil {
		cpu := float64(ru.Utime.Sec+ru.Stime.Sec) + float64(ru.Utime.Usec+ru.Stime.Usec)/1e6
		w.family("process_cpu_seconds_total", "User and system CPU time the process has spent, in seconds.", "counter")
		w.sample("process_cpu_seconds_total", cpu)
	}
	var rl unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_NOFILE, &rl) == nil {
		w.family("process_max_fds", "The process's limit on open file descriptors (RLIMIT_NOFILE, soft).", "gauge")
		w.sample("process_max_fds", float64(rl.Cur))
	}
}
