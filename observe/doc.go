// Package observe tells what is running: process identity, liveness, exit
// notification, listening ports and their owners, and probes. It imports
// nothing of the project; reconciler reads through it and actuate re-checks
// identities with it before every signal.
//
// Guarantees:
//   - Identity is (boot id, pid, start time), plus the pidfs inode of a pidfd
//     on Linux >= 6.9 (Handle.PidfdInode), which two processes never share.
//     /proc/PID/stat is parsed from the last ')', so a comm holding spaces,
//     parentheses or newlines cannot shift the fields.
//   - Liveness never reports a process as gone because it could not be read:
//     kill(pid, 0) decides existence (ESRCH gone, EPERM exists), a zombie or
//     dead process counts as gone, and anything unreadable is unknown.
//   - Pin opens the pin (a pidfd on Linux, a kqueue NOTE_EXIT registration on
//     macOS) before any identity read; Handle.Identity reports ErrUntrusted
//     when the pinned process had exited by the end of the read. On Linux,
//     Handle.Signal and Handle.Wait go through the pidfd and cannot reach a
//     process that reused the pid. On macOS Signal uses kill(2) right after
//     checking the kqueue (a tiny window remains: macOS has no pidfd).
//     Handle.SignalGroup signals the pinned process's group through the
//     pidfd (PIDFD_SIGNAL_PROCESS_GROUP, Linux >= 6.9), else ErrNotSupported.
//   - Handle.ExitStatus tells how a process that is not our child ended
//     (ioctl PIDFD_GET_INFO with PIDFD_INFO_EXIT, Linux >= 6.15), but only
//     once its parent has reaped it: a zombie gives no exit information,
//     and the handle must stay open until the reap. It reports false
//     otherwise: not reaped yet, older kernels, PinNone handles, and macOS
//     (NOTE_EXITSTATUS reports only to the parent).
//   - Where pidfd_open fails with ENOSYS or EPERM (old kernels, seccomp),
//     Pin returns PinNone handles: exits are found by polling with backoff
//     (10 ms to 500 ms) and a start-time comparison. Handle.Mode and
//     ExitWatcher.Mode say which path is in use; callers log it.
//   - One ExitWatcher goroutine serves any number of processes (one epoll
//     instance over pidfds on Linux, itself parked on the runtime poller;
//     one kqueue on macOS); Close ends it and waits for it. Handle.Wait
//     parks a goroutine on the runtime poller, not an OS thread.
//   - Ports (Linux): listening sockets from netlink sock_diag (only LISTEN
//     sockets are dumped; 20-60x cheaper than the text tables on a busy
//     machine), or /proc/net/tcp and tcp6 where sock_diag is unavailable
//     (dual-stack listeners appear only as IPv6 [::]); owners by reading the
//     /proc/*/fd socket links, only when a listener exists (one readlink per
//     descriptor on the machine: the cost of Listeners grows with it). When
//     fd folders cannot be read (another user's processes, no privilege) and
//     the holder was not found, OwnerVisible is false: the owner is unknown,
//     not absent. Only this network namespace is visible.
//   - ListeningOn (Linux) reports the LISTEN sockets on a set of ports, with
//     the cgroup id of each socket's maker, in one sock_diag query per
//     address family: the kernel filters by port (an inet_diag bytecode of
//     port ranges) and nothing connects. Elsewhere it reports
//     ErrNotSupported.
//   - Ports (macOS): without cgo there is no listener table, so Listeners
//     runs `lsof -nP -l -iTCP:PORT -sTCP:LISTEN -a -F pcun` and parses its
//     field output; PortAccepting (a TCP connect) stays the ground truth, and
//     a port that accepts while lsof shows nothing (another user's process)
//     is reported with OwnerVisible false.
//   - Handle.Env reads a variable of the environment a process was started
//     with (/proc/PID/environ; KERN_PROCARGS2 on macOS) through the pin.
//     Only the same uid (or root) may read it, and not of a non-dumpable
//     process; a program that retitles itself wipes it. An error that does
//     not wrap ErrUntrusted means "cannot tell", never "absent".
//     ScanProcesses lists every process with one such variable, read only
//     for processes started since a given time (one /proc scan).
//   - cgroup v2: FindCgroup2 finds the unified hierarchy wherever
//     /proc/self/mountinfo says it is mounted (never an assumed path);
//     ProcessCgroup and Handle.Cgroup tell a process's cgroup;
//     CgroupProcs, CgroupPopulated and CgroupOOMKills read cgroup.procs,
//     cgroup.events and memory.events; WaitCgroupEmpty wakes on the
//     kernel's notification that cgroup.events changed (inotify), not by
//     sleeping, and is bounded by its context.
//   - KernelOOMKill reports the OOM killer's line for a pid from the
//     kernel log (/dev/kmsg) only when it was logged after that process
//     started; no line, or no permission to read the log, is no claim.
//   - HolderOf returns who holds a port as data (PortHolder: pids, command
//     line, uid, visibility) with one String(); FormatCmdline renders
//     every command line in messages (trailing empty arguments dropped,
//     long ones cut with an ellipsis).
//   - Probes are bounded by their timeout: HTTP GET (2xx/3xx success, no
//     redirects followed, no keep-alives, no proxy), TCP connect, and exec
//     (exit 0; run in its own process group, killed as a group on timeout).
//     Messages are short: "GET /health: 503", "connect: connection refused",
//     "exit code 3: first line of output".
//
// Costs (Linux, 2 loaded cores; see the benchmarks): Handle.Exited is one
// poll(2), about 3 µs, and is what a periodic pass over many servers should
// use (ExitedAll asks about 64 pidfds per poll(2): a resync's look at 1,000
// went from 1.35 ms to 0.2 ms); ReadIdentity reads three /proc files (0.1-0.2 ms here); Listeners
// reads every /proc/*/fd link on the machine (tens to hundreds of ms with
// 1,000 processes), so it is for port conflicts and stop diagnostics, not a
// loop.
//
// Platforms: Linux is implemented and tested. The darwin code is
// compile-checked only (GOOS=darwin go build / go vet): no macOS machine was
// available. Other systems get ErrNotSupported for process observation;
// probes and PortAccepting work everywhere.
package observe
