package reconciler

import (
	"os"
	"strings"

	"github.com/procfleet/procfleet/actuate"
	"github.com/procfleet/procfleet/internal/logfile"
)

// logSize is the size of the server's log now (0 when it has none): what a
// process spawned next writes comes after it.
func (r *Reconciler) logSize(name string) int64 {
	if r.cfg.StateDir == nil {
		return 0
	}
	fi, err := os.Lstat(r.cfg.StateDir.LogPath(name))
	if err != nil || !fi.Mode().IsRegular() {
		return 0
	}
	return fi.Size()
}

// logTail is the last lines (at most actuate.LogTailLines) the server wrote
// to its log after offset, "" when none: what an exit is reported with. A
// log shorter than offset was rotated; its tail is taken whole.
func (r *Reconciler) logTail(name string, offset int64) string {
	if r.cfg.StateDir == nil {
		return ""
	}
	path := r.cfg.StateDir.LogPath(name)
	fi, err := os.Lstat(path)
	if err != nil || !fi.Mode().IsRegular() {
		return "" // never a FIFO or a link: reading must not block or leave the folder
	}
	lines, err := logfile.Tail(path, actuate.LogTailLines)
	if err != nil {
		return ""
	}
	budget := fi.Size() - offset
	if budget < 0 {
		budget = fi.Size()
	}
	// Keep the lines written after offset: counted from the end, with
	// their line feeds, they fit in what was appended since.
	if len(lines) > 0 && !endsWithLineFeed(path, fi.Size()) {
		budget++ // the last line has no line feed of its own
	}
	keep := 0
	for i := len(lines) - 1; i >= 0; i-- {
		n := int64(len(lines[i]) + 1)
		if n > budget {
			break
		}
		budget -= n
		keep++
	}
	return strings.Join(lines[len(lines)-keep:], "\n")
}

// endsWithLineFeed reports whether the file at path, of the given size,
// ends with a line feed.
func endsWithLineFeed(path string, size int64) bool {
	f, err := os.Open(path)
	if err != nil || size == 0 {
		return false
	}
	defer f.Close()
	b := make([]byte, 1)
	_, err = f.ReadAt(b, size-1)
	return err == nil && b[0] == '\n'
}
