// Package actuate changes the world: it starts servers, stops them with
// escalation, cleans up what a server leaves when its main process exits,
// and keeps the ownership records that prove which processes are
// procfleet's to signal. It never signals a process it cannot prove it
// owns.
//
// # State folder
//
// OpenStateDir creates the folder 0700 with servers/ (records), logs/ (one
// log per server, plus its events) and a .gitignore of "*"; it refuses a
// folder (or sub-folder) owned by another user or writable by group or
// others, naming the path and the mode. It keeps the folder open: ID names
// it by device and inode, and Check tells, with one stat, whether its path
// still names it (a folder deleted or replaced under a running up gives
// *StateDirChangedError; the held descriptor keeps a new folder from
// getting the old inode back). StateDir.Lock takes an exclusive,
// non-blocking flock on "lock" and writes the holder's pid into it; a
// second taker gets *LockedError with that pid at once.
//
// Every file procfleet opens in the folder is opened without following a
// symlink and without blocking, and used only if it is a regular file
// (internal/safefile): a log path holding something else is moved aside
// (.corrupt-<time>) and a fresh log started, and a FIFO never hangs a
// start or a lock.
//
// # Records
//
//   - Written atomically: a temp file in servers/ (0600), write, fsync,
//     rename over servers/<name>.json, fsync of the folder. A reader sees the
//     old record or the new one.
//   - Version 2 holds the instance token (128 random bits, also put in the
//     server's environment as PROCFLEET_INSTANCE, with PROCFLEET_SERVER),
//     the state folder's device and inode, the first command line
//     (spawnCmdline) beside the latest, and the server's cgroup when it has
//     one. Version 1 records are read as before.
//   - A spawn writes an intent record (name, token, cgroup; no pid) before
//     the exec and the full record right after it; a crash in between
//     leaves the token on disk (ResolveIntent). The intent record's data is
//     synced before its rename; the folder is synced once, after the full
//     record's rename (a crash of the machine before it ends the process
//     too).
//   - A restart's intent record is prepared while the server runs
//     (PrepareNext, called by up at Ready once the server has restarted),
//     or from the moment its exit is seen (PrepareRestart, called by up as
//     it handles an exit, a first crash's too): its token drawn, the record
//     written and synced under a temp name (".<name>.json.tmp-next-*"), so
//     that after a crash only its rename remains before the exec. What
//     this can leave on disk is safe: the temp file is never read as a
//     record (readers take "<name>.json" only), its token was given to no
//     process, and it is removed by DropPrepared (a stop), by a Spawn that
//     cannot use it (another spec hash, port, membership or folder), by
//     the next holder of the lock whatever its age (only a lock holder
//     prepares), and by the age sweep. Once renamed it is the intent
//     record a spawn writes, but for its start time (none: the full
//     record, or an adoption, gives it), with the same rule 8.
//   - A removal is not synced: a record a crash of the machine brings back
//     names a process of an earlier boot (stale or reused: removed without
//     a signal).
//   - Read with O_NOFOLLOW and O_NONBLOCK, then fstat of the opened file:
//     trusted only when it is a regular file owned by the effective uid that
//     neither group nor others may write, that parses, names the server it
//     is stored under, has pgid equal to pid (an absent pgid is read as the
//     pid), and names no cgroup but this folder's for that server. Anything
//     else (rule 7) is renamed to <name>.json.corrupt-<UTC time> and
//     reported as *UntrustedRecordError; no record is ever deleted unread.
//     A record of a newer format version is reported and left in place.
//     Parsing never panics (fuzzed).
//   - A record written in another state folder (a copied project) is
//     foreign: renamed to <name>.json.foreign-<time>, never acted on,
//     quarantining nothing; *ForeignRecordError wraps fs.ErrNotExist, so
//     the server counts as having no record. ReadAll reports it.
//   - Only the holder of the state folder's lock moves records aside
//     (ReadRecord, Records, ReadAll). A reader without the lock (status,
//     describe, diff) calls the Inspect forms, the same code with the move
//     switched off: it gets the same errors with an empty MovedTo, and the
//     folder is left as it was.
//   - The UntrustedRecord quarantine is kept on disk: UntrustedQuarantines
//     lists, for every server, the newest moved-aside record unless a later
//     one was resolved; every reader sees it. DecideLift (pure) says when it
//     may be lifted: the pid it named gone or another process, the port
//     free, no live process of procfleet's running the declared command
//     line or carrying its token. CheckUntrusted gathers those facts;
//     ResolveUntrusted renames the file to .resolved-<time> with a
//     QuarantineLifted event. Nothing is ever signalled on the word of such
//     a record.
//
// # Ownership (DESIGN.md rules 1-8)
//
// Verify pins the process at the record's pid first (a pidfd on Linux, a
// kqueue NOTE_EXIT registration on macOS; unpinned where neither works, and
// logged), then reads through the pin its identity and, unless equal
// pidfd inodes already prove it, the instance token in its environment and
// its cgroup (an identity read after the pinned process exited is not
// trusted), then decides with the pure function Decide:
//
//   - gone, zombie or dead: Stale, the record is removed, nothing signalled;
//   - start time, boot id or pidfd inode differ, or another instance's
//     token: Reused, the record is removed, nothing signalled;
//   - start time and boot id equal, and the pidfd inode equal, or the token
//     ours, or the process in the recorded cgroup, or the command line the
//     recorded one: Owned, whatever uid it runs as now;
//   - none of those: Quarantine IdentityMismatch;
//   - no start time (or boot id) in the record: Quarantine UnverifiedOwner
//     when the live process shows the recorded command line (the record is
//     kept byte for byte), else removed;
//   - identity unreadable: Quarantine UnverifiedOwner, record kept;
//   - an intent record: left to ResolveIntent, which adopts the live
//     process carrying its token (or in its cgroup) that leads its own
//     session, writing its full record, or removes the intent record when
//     none does (stopping leftovers that carry the token).
//
// The uid is evidence, never a verdict: servers drop privileges. A
// quarantine is a result, not an action: *QuarantineError carries the
// reason and a manual-stop instruction (ManualStopHint), and nothing is
// signalled. Stop refuses records naming init, procfleet itself or its
// process group.
//
// A process procfleet has held since it spawned or adopted it is its own
// whatever it shows: Stop with StopOptions.Held signals it without judging
// it again, and RefreshCmdline rewrites its record when its command line or
// uid changed (spawnCmdline kept, a CommandLineChanged event naming both).
//
// # Membership
//
// Where procfleet can make cgroup v2 groups (the unified hierarchy found in
// /proc/self/mountinfo; root, or a subtree systemd delegated to the user;
// a kernel with cgroup.kill), each server runs in
// <procfleet's own cgroup>/procfleet-<StateDir.ID>/<name>, made fresh for
// each spawn, its path in the record; the child is created straight in it
// (clone3 CLONE_INTO_CGROUP). No member can leave it by forking, setsid,
// double fork, exec, retitling or dropping privileges. Elsewhere, or with
// PROCFLEET_CGROUP=off, membership is the server's session and process
// group (its pgid and sid are its pid), its descendants while their parent
// chain leads to it, and the processes whose environment carries its
// token, where that can be read. StateDir.Membership names the mode a
// spawn would use and why; MembershipOf names a record's.
//
// # Starting
//
// Spawn refuses a port something listens on (*StartError PortConflict, the
// holder as data in Holder; nothing started or signalled). It starts the
// command in a new session, with the declared folder and environment added
// to procfleet's and the token after them, stdin from /dev/null, stdout and
// stderr appended to logs/<name>.log (a file, never a pipe), and no other
// descriptor (every descriptor from 3 up is marked close-on-exec first:
// close_range on Linux, /dev/fd on macOS). The unreaped child is pinned,
// its identity read from the kernel, and its record written before Spawn
// returns. The child is reaped once its pidfd says it exited (no blanket
// wait4(-1) reaper): one watcher for every child of the process (epoll
// over their pidfds, no goroutine per child), which keeps its exit status
// and, when the child's cgroup is empty at its exit, its oom_kill count,
// and removes the cgroup.
//
// WaitReady checks readiness while watching the exit. The default check
// (a port, no declared probe) is that the port accepts TCP: on Linux, a
// LISTEN socket on it that a loopback connect reaches, made in the
// server's cgroup when it has one (the port was free at the spawn: a
// listener of another cgroup is someone else's). One loop of the process
// serves every start with one sock_diag query per tick (2 ms, stretched
// to keep its CPU time under 1/50 of the time), so readiness costs the
// same for one server or 1,000 starting together. Without sock_diag it
// connects (observe.PortAccepting), every 2 ms for the first second.
// An exit first gives
// *StartError: "exited with code N" or "killed by signal 9 (SIGKILL)",
// with the out-of-memory killer named only when the kernel says so
// (OOMEvidence: the cgroup's memory.events, or the kernel log), and the
// last 20 lines the run wrote to its log. A first process that exits 0
// leaving a member of the server running has daemonized: Reason
// Daemonized, naming the daemon, what it holds and how to run the program
// in the foreground; the daemon is stopped. A startup timeout runs the full
// stop sequence, then gives "not ready after Ns". Either way the process,
// whatever it left, its record and every descriptor procfleet opened for
// it are gone when the error is returned.
//
// # Stopping and cleaning up
//
// Stop verifies (or takes the held pin), then, with a cgroup, sends
// SIGTERM to every member through its pin (members that appear meanwhile
// too), waits on the pins up to Grace, sends SIGKILL by cgroup.kill, waits
// on cgroup.events up to KillTimeout, and removes the empty cgroup; no
// process table is scanned. In the session mode it pins the tree and the
// token carriers before any signal (one /proc scan shared by every stop
// running at once, so stopping a fleet costs a few scans, not one per
// server), sends SIGTERM to the group while the pinned leader lives
// (through the leader's pidfd with PIDFD_SIGNAL_PROCESS_GROUP on Linux >=
// 6.9, else killpg right after checking the pinned leader has not exited)
// and to each pinned process outside it, waits up to Grace, re-reads the
// identities, sends SIGKILL likewise and waits up to KillTimeout; once the
// leader has exited, the rest of its group is listed, pinned, checked and
// signalled one by one. Anything alive after that gives *QuarantineError
// Unkillable ("failed to terminate even after SIGKILL", with its state). A
// process the kernel does not let procfleet signal fails the stop, naming
// it. A process that has already exited is never signalled; every signal
// is an event naming the evidence that allowed it and the path used. Stop
// then removes the record and waits up to 5 s until nothing accepts TCP on
// the port, else fails naming who holds it and whether it answers the
// readiness probe. On Linux that is no LISTEN socket on the port, at any
// address, in the kernel's listener table (sock_diag), asked in rounds
// shared by the stops waiting at the same time, spaced so that the
// queries take under 1/20 of the time; a connect could reach nothing more. Without
// sock_diag it connects to loopback and reads the /proc tables.
//
// Cleanup stops what a server left once its leader exited: its cgroup's
// members, or the processes carrying its token and, when the caller held
// the leader until its exit, the rest of its process group (a group id is
// not reused while it has members). Each is pinned, of a uid procfleet may
// signal (its own; any as root), and signalled with the stop sequence.
// With a cgroup it returns at once, after one read of cgroup.events, when
// nothing is left; in the session mode that takes one shared scan. Stop of
// a record whose process has exited or whose pid was reused does the same
// without a held pin, then removes the record.
//
// What the session mode cannot catch: a descendant that left the session
// and group and whose environment no longer carries the token (a
// retitling program wipes it; env -i, sudo and su - drop it), once its
// parent chain no longer leads to the server. The port check after a stop
// names it if it holds the port.
//
// # Messages
//
// Command lines in messages go through observe.FormatCmdline (trailing
// empty arguments dropped, long ones cut). Port holders are
// observe.PortHolder values, carried as data (StartError.Holder).
//
// # Platforms
//
// Linux is the tested platform, in both membership modes. The macOS code
// (kqueue pins, /dev/fd, killpg, KERN_PROCARGS2 for the token) is
// compile-checked only: no macOS machine was available. macOS has no
// cgroups: its membership is always the session mode.
package actuate
