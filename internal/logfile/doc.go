// Package logfile rotates, tails and follows the servers' logs,
// logs/<name>.log in the state folder, which each server writes through the
// O_APPEND descriptor it was started with (its stdout and stderr; never a
// pipe, so it neither blocks nor dies when procfleet is gone).
//
// # Rotation
//
// Rotate copies and then cuts, because the server keeps its descriptor:
// renaming the file would leave it writing to the renamed file forever.
// Rotate copies the live file to <name>.log.1.tmp, removes what it copied
// from the live file, shifts <name>.log.1 -> .2 -> ... (dropping the oldest
// beyond Keep), and renames the copy to <name>.log.1; the server's next
// O_APPEND write lands at the new end.
//
//   - On Linux file systems that support fallocate(FALLOC_FL_COLLAPSE_RANGE)
//     (ext4, xfs), nothing is lost: the copied prefix, up to a file system
//     block boundary, is removed from the live file in one atomic step, and
//     whatever was written meanwhile stays in it. The cut is at a block
//     boundary, not at a line feed (the kernel removes whole blocks only), so
//     a copy can begin and end in the middle of a line: <name>.log.1 followed
//     by <name>.log is exactly what the server wrote, and Tail, TailFiles,
//     Cat and Fleet read them joined, lines whole.
//   - Elsewhere (tmpfs, btrfs, macOS: compile-checked only) it is
//     copy-then-truncate: everything up to the last read of the live file is
//     in <name>.log.1, in order; the bytes written between that read (which
//     returned end of file) and the truncate, two system calls apart, are
//     lost, and a write in progress at that moment can be cut, its beginning
//     ending the copy. The kernel has no "truncate and return what you
//     removed". A test measures the loss under a continuous writer (on a
//     2-core machine at load 26: up to 4,764 35-byte lines at one rotation).
//     Writes that land after the truncate are never lost nor split.
//   - The copy appears under its final name only when complete, so a reader
//     of <name>.log.1 never sees half of it. A crash in the middle leaves the
//     copy as <name>.log.1.tmp, which the next Rotate moves into place first.
//     The cut and the shift happen while <name>.log.1.tmp exists, and end
//     with a new <name>.log.1: without the tmp file, <name>.log.1 is the
//     newest copy. That is what lets a follower tell a cut from a write.
//   - The caller must be the only rotator of a file (the state folder's lock
//     holder); Rotate is not safe to call concurrently on one path.
//   - A writer that does not use O_APPEND (a server reopening its output
//     without it) keeps its own offset and leaves a hole of zero bytes after
//     a cut; procfleet's servers are started with O_APPEND.
//
// RemoveStale removes the logs and events files of servers that left the
// fleet once nothing has been written to them for a week.
// Maintain does both, stale files first, from one listing of the folder.
//
// # Reading
//
// Tail reads a file backwards from its end in fixed chunks, so the last
// lines of a large log cost a few reads, not the whole file.
//
// Fleet prints the logs of several servers, and Follow one log, as they are
// written, with the guarantees listed at Fleet: every line whole and exactly
// once, in order, across rotations and restarts, however slowly its output
// is read; a skip (more rotations than Keep while the reader was behind) is
// said by a marker line with the number of bytes skipped, never a silent
// gap. A follower holds the rotated copies it has not finished open, and a
// goroutine that never waits on the output takes in each rotation as it
// happens, so a stalled output neither loses its place nor reads bytes that
// a cut moved: each read of the live file is checked afterwards against the
// rotation's files (see Rotate above). It wakes on the kernel's events for
// the logs folder (one inotify instance for all servers on Linux; fsnotify
// and a once-a-second look elsewhere) and costs nothing while nothing is
// written.
//
// There is no "since": the log holds the server's raw output, with no
// timestamps of procfleet's, and a file's modification time says only when
// its last line was written; filtering by time would be a guess.
//
// Every file is opened through internal/safefile: without following a
// symlink and without blocking, and used only when it is a regular file.
package logfile
