// Package logfile rotates, tails and follows a server's log,
// logs/<name>.log in the state folder, which the server writes through the
// O_APPEND descriptor it was started with (its stdout and stderr; never a
// pipe, so it neither blocks nor dies when procfleet is gone).
//
// Rotation copies and then cuts, because the server keeps its descriptor:
// renaming the file would leave it writing to the renamed file forever.
// Rotate shifts <name>.log.1 -> .2 -> ... (dropping the oldest beyond Keep),
// copies the live file to <name>.log.1, and removes what it copied from the
// live file; the server's next O_APPEND write lands at the new end.
//
// What Rotate guarantees:
//   - On Linux file systems that support fallocate(FALLOC_FL_COLLAPSE_RANGE)
//     (ext4, xfs), nothing is lost: the copied prefix, up to a file system
//     block boundary, is removed from the live file in one atomic step, and
//     whatever was written meanwhile stays in it. The copy ends and the live
//     file starts at that boundary, so the one line that spans it is split:
//     <name>.log.1 followed by <name>.log is exactly what the server wrote.
//   - Elsewhere (tmpfs, btrfs, macOS: compile-checked only) it is
//     copy-then-truncate: everything up to the last read of the live file is
//     in <name>.log.1, in order; the bytes written between that read (which
//     returned end of file) and the truncate, two system calls apart, are
//     lost, and a write in progress at that moment can be cut, its beginning
//     ending the copy. The kernel has no "truncate and return what you
//     removed". Two system calls apart is microseconds on an idle machine;
//     a test measures it under a continuous writer (on a 2-core machine at
//     load 26: up to 4,764 35-byte lines at one rotation). Writes
//     that land after the truncate are never lost nor split.
//   - The copy appears under its final name only when complete, so a reader
//     of <name>.log.1 never sees half of it. A crash in the middle leaves the
//     copy as <name>.log.1.tmp, which the next Rotate moves into place first.
//   - The caller must be the only rotator of a file (the state folder's lock
//     holder); Rotate is not safe to call concurrently on one path.
//   - A writer that does not use O_APPEND (a server reopening its output
//     without it) keeps its own offset and leaves a hole of zero bytes after
//     a cut; procfleet's servers are started with O_APPEND.
//
// Tail reads a file backwards from its end in fixed chunks, so the last
// lines of a large log cost a few reads, not the whole file.
//
// Follow prints what is written to a log as it arrives and keeps following
// across rotation: a cut (a new <name>.log.1 appears, the size shrinks, or
// the bytes before the read offset change) and a rename or re-creation (the
// path names another file) are all detected. After a cut it finds its place
// again through <name>.log.1: it prints the part of the copy it had not read
// yet, or resumes the live file where its old offset moved to, checking the
// bytes before that place against the ones it last read. So nothing the
// rotation kept is skipped or printed twice, unless the copy was replaced
// again before Follow looked (two rotations within one of its wake-ups, or
// the copy not in place within 2 s): then it starts the live file over. It
// wakes on fsnotify events for the log's folder and, as a bound for anything
// fsnotify misses (overflow, network file systems), polls at a fixed
// interval.
//
// There is no "since": the log holds the server's raw output, with no
// timestamps of procfleet's, and a file's modification time says only when
// its last line was written; filtering by time would be a guess.
package logfile
