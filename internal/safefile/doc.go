// Package safefile opens the files procfleet keeps in its state folder
// (logs, events, records, status) so that whatever sits at their paths
// cannot hang procfleet, lead it out of the folder, or make it write into
// something that is not a plain file.
//
// Guarantees:
//   - Open never follows a symbolic link (O_NOFOLLOW) and never blocks on
//     the open (O_NONBLOCK: a FIFO with no writer, or no reader, does not
//     wait); it then checks the opened descriptor (fstat, not the path) and
//     returns it only when it is a regular file, with O_NONBLOCK cleared, so
//     reads and writes, and a child process given the descriptor, see an
//     ordinary file. Anything else is *NotRegularError naming the path and
//     what was there; the descriptor is closed.
//   - OpenAppend repairs: a path that holds something else (a symlink, a
//     FIFO, a socket, a folder, a device) is renamed aside to
//     <path>.corrupt-<UTC time>, nothing in it read or deleted, and a fresh
//     file is created in its place with O_EXCL (it cannot open something
//     planted between the rename and the create). A path that cannot be
//     moved aside fails, naming it.
//   - Every descriptor is close-on-exec.
//
// On systems other than Unix the flags do not exist: the files are opened
// plainly and checked after the open.
package safefile
