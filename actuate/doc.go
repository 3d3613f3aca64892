// Package actuate changes the world: it starts servers, stops them with
// escalation, and keeps the ownership records that prove which processes are
// procfleet's to signal. It never signals a process it cannot prove it owns.
//
// # State folder
//
// OpenStateDir creates the folder 0700 with servers/ (records), logs/ (one
// log per server, plus its events) and a .gitignore of "*"; it refuses a
// folder (or sub-folder) owned by another user or writable by group or
// others, naming the path and the mode. StateDir.Lock takes an exclusive,
// non-blocking flock on "lock" and writes the holder's pid into it; a second
// taker gets *LockedError with that pid at once.
//
// # Records
//
//   - Written atomically: a temp file in servers/ (0600), write, fsync,
//     rename over servers/<name>.json, fsync of the folder. A reader sees the
//     old record or the new one.
//   - Refused before the open when Lstat shows a symlink or anything but a
//     regular file (opening a FIFO would block until a writer comes).
//   - Read with O_NOFOLLOW, then fstat of the opened file: trusted only when
//     it is a regular file owned by the effective uid that neither group nor
//     others may write (mode & 0o022 == 0), and when it parses and names
//     the server it is stored under. Anything else (rule 7) is renamed to
//     <name>.json.corrupt-<UTC time> and reported as *UntrustedRecordError;
//     no record is ever deleted unread. A record of a newer format version
//     is reported and left in place. Parsing never panics (fuzzed).
//   - Only the holder of the state folder's lock moves records aside
//     (ReadRecord, Records). A reader without the lock (status, describe,
//     diff) calls InspectRecord or InspectRecords, the same code with the
//     move switched off: it gets the same *UntrustedRecordError, with an
//     empty MovedTo, and the folder is left exactly as it was, so it never
//     races the lock holder's renames.
//
// # Ownership (DESIGN.md rules 1-7)
//
// Verify pins the process at the record's pid first (a pidfd on Linux, a
// kqueue NOTE_EXIT registration on macOS; unpinned where neither works, and
// logged), then reads its identity through the pin (an identity read after
// the pinned process exited is not trusted), then decides with the pure
// function Decide:
//
//   - gone, zombie or dead: Stale, the record is removed, nothing signalled;
//   - start time, boot id and command line equal, and the pidfd inode equal
//     where both sides have one: Owned;
//   - start time, boot id or pidfd inode differ: Reused, the record is
//     removed, nothing signalled;
//   - start time equal, command line different: Quarantine IdentityMismatch;
//   - no start time (or no boot id) in the record: Quarantine UnverifiedOwner
//     when the live process shows the recorded command line (the record is
//     kept byte for byte), else removed;
//   - identity unreadable: Quarantine UnverifiedOwner, record kept.
//
// A quarantine is a result, not an action: *QuarantineError carries the
// reason and a manual-stop instruction (ManualStopHint), and nothing is
// signalled. Stop also refuses records naming init, procfleet itself or its
// process group.
//
// # Starting
//
// Spawn refuses a port something listens on (*StartError PortConflict,
// naming the holder's pid and command when visible; nothing started or
// signalled). It starts the command in a new session (setsid: its own
// process group, no terminal), with the declared folder and environment
// added to procfleet's, stdin from /dev/null, stdout and stderr appended to
// logs/<name>.log (a file, never a pipe: the server neither blocks nor dies
// when procfleet goes away), and no other descriptor (every descriptor from
// 3 up is marked close-on-exec first: close_range on Linux, /dev/fd on
// macOS). The unreaped child is pinned, its identity read from the kernel,
// and its record written before Spawn returns. The child is reaped by a
// goroutine parked on a pidfd (no blanket wait4(-1) reaper that would steal
// other exec.Cmd statuses), which keeps its exit status.
//
// WaitReady checks readiness while watching the exit: a declared check every
// ReadyPeriod; by default the port accepting TCP, checked every 2 ms for
// the first second, then every ReadyPeriod (default 100 ms); with no port,
// running is ready. An exit first gives *StartError "exited with code N" or
// "killed by signal 9 (SIGKILL)" (with an out-of-memory hint) and the last
// 20 lines the run wrote to its log; a startup timeout runs the full stop
// sequence, then gives "not ready after Ns". Either way the process,
// whatever it left in its group, its record and every descriptor procfleet
// opened for it are gone when the error is returned.
//
// # Stopping
//
// Stop verifies (above), then collects the server's descendants before any
// signal (through the kernel's per-thread children lists on Linux, whose cost
// grows with the tree rather than with the machine; a /proc scan elsewhere),
// each pinned and kept only if its identity read through the pin shows it in
// the group or below a process of the tree, and not older than the server.
// SIGTERM goes to the group while the pinned leader lives (through the leader's
// pidfd with PIDFD_SIGNAL_PROCESS_GROUP on Linux >= 6.9, else killpg right
// after checking the pinned leader has not exited: a group id is not reused
// while its leader lives) and, one by one through their pins, to the pinned
// processes outside the group. Once the leader has exited, only pinned
// processes are signalled, never a bare group id: if kill(-pgid, 0) shows the
// group is not empty, its members are listed from /proc, pinned, checked and
// handled like the rest (this is how a member whose parent died, and which is
// therefore outside the tree, is caught). Stops running at the same time share
// that scan of the process table: one that starts after a stop asks serves it,
// so each sees the processes as they are after its leader exited, and 100
// servers stopping at once cost a few scans, not 100 (an exited leader stays in
// its group until its parent reaps it, which for an orphan is init, so the
// group is rarely empty yet). It waits on the pins up to Grace (it wakes on the
// exit, it does not sleep), re-reads the identities, sends SIGKILL likewise,
// waits up to KillTimeout, and returns *QuarantineError Unkillable ("failed to
// terminate even after SIGKILL", with the process state) if anything still
// lives. A process that has already exited is never signalled. Every signal
// sent is an event naming the evidence that allowed it and the path used.
// Finally it removes the record and waits up to 5 s until nothing accepts TCP
// on the port (no loopback connect succeeds and the kernel's socket tables list
// no listener on it); otherwise it fails naming who holds the port and whether
// that listener answers the readiness probe.
//
// # Grandchildren that leave the group
//
// A grandchild that calls setsid (or setpgid) leaves the server's process
// group, so the group signal misses it. While its parent chain still leads to
// the server, Stop finds it (the descendants walk), pins it before the first
// signal and signals it on its own: it gets SIGTERM, then SIGKILL, with the
// server. Its pin keeps it targeted even after its parent has died and it
// has been re-parented. What is not caught: a descendant that both left the
// group and was orphaned (its parent exited, as in a classic double fork)
// before Stop ran; it is re-parented to init and nothing links it to the
// server any more. It survives the stop; if it holds the server's port, the
// port check names it. PR_SET_CHILD_SUBREAPER is deliberately not used: it
// would make such orphans procfleet's children but still not say which
// server they came from, and reaping them would race the exec.Cmd waits of
// other packages in the same process. A cgroup per server would close the
// gap where cgroup v2 delegation is available (not on the target machines).
//
// # Platforms
//
// Linux is the tested platform. The macOS code (kqueue pins, /dev/fd,
// killpg) is compile-checked only: no macOS machine was available.
package actuate
