package logfile

import (
	"bytes"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"strings"
	"time"
)

// maxLine bounds the part of a line held while its line feed has not
// arrived; a longer line is printed in pieces of this size.
const maxLine = 1 << 20

// palette is the colors of the prefixes (ANSI SGR codes: cyan, yellow,
// green, magenta, blue and their bright forms; no red, which reads as an
// error).
var palette = []string{"36", "33", "32", "35", "34", "96", "93", "92", "95", "94"}

// colorOf is the palette entry of a server: chosen by its name, so a server
// keeps its color from one run to the next, whatever else is printed.
func colorOf(name string) string {
	h := fnv.New32a()
	_, _ = h.Write([]byte(name))
	return palette[h.Sum32()%uint32(len(palette))]
}

// linePrefix is what starts each of a server's lines: "name | " with the
// name padded to width, in its color when color is set; empty without
// prefix.
func linePrefix(name string, width int, prefix, color bool) []byte {
	if !prefix {
		return nil
	}
	p := name + strings.Repeat(" ", max(width-len(name), 0)) + " | "
	if color {
		p = "\x1b[" + colorOf(name) + "m" + p + "\x1b[0m"
	}
	return []byte(p)
}

// lineBuf assembles a server's output into whole lines: the bytes after the
// last line feed are held until their line feed arrives.
type lineBuf struct {
	partial []byte
}

// appendLines appends to dst the whole lines of data, each after prefix,
// and holds the rest. A held part that reaches maxLine is let out in
// pieces of maxLine, each as a line of its own.
func (b *lineBuf) appendLines(dst, prefix, data []byte) []byte {
	if len(b.partial) > 0 {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			b.partial = append(b.partial, data...)
			return b.spill(dst, prefix)
		}
		dst = append(dst, prefix...)
		dst = append(dst, b.partial...)
		dst = append(dst, data[:i+1]...)
		b.partial = b.partial[:0]
		data = data[i+1:]
	}
	end := bytes.LastIndexByte(data, '\n') + 1
	if len(prefix) == 0 {
		dst = append(dst, data[:end]...)
	} else {
		for rest := data[:end]; len(rest) > 0; {
			i := bytes.IndexByte(rest, '\n')
			dst = append(dst, prefix...)
			dst = append(dst, rest[:i+1]...)
			rest = rest[i+1:]
		}
	}
	b.partial = append(b.partial, data[end:]...)
	return b.spill(dst, prefix)
}

// spill lets out the held part in pieces of maxLine while it is that long.
func (b *lineBuf) spill(dst, prefix []byte) []byte {
	for len(b.partial) >= maxLine {
		dst = appendLine(dst, prefix, b.partial[:maxLine])
		b.partial = b.partial[:copy(b.partial, b.partial[maxLine:])]
	}
	return dst
}

// flush appends the held part, if any, as a line; lf adds the line feed it
// lacks.
func (b *lineBuf) flush(dst, prefix []byte, lf bool) []byte {
	if len(b.partial) == 0 {
		return dst
	}
	dst = append(dst, prefix...)
	dst = append(dst, b.partial...)
	if lf {
		dst = append(dst, '\n')
	}
	b.partial = b.partial[:0]
	return dst
}

// drop forgets the held part and returns its length.
func (b *lineBuf) drop() int {
	n := len(b.partial)
	b.partial = b.partial[:0]
	return n
}

func appendLine(dst, prefix, line []byte) []byte {
	dst = append(dst, prefix...)
	dst = append(dst, line...)
	return append(dst, '\n')
}

// Marker lines: procfleet's own lines among a server's output, never
// written into the log itself.
const markerTime = "2006-01-02 15:04:05"

// startMarker is the line shown where a server was (re)started.
func startMarker(at time.Time, pid int) string {
	if pid <= 0 {
		return fmt.Sprintf("--- procfleet: started at %s ---", at.Local().Format(markerTime))
	}
	return fmt.Sprintf("--- procfleet: started pid %d at %s ---", pid, at.Local().Format(markerTime))
}

// skipMarker is the line shown where output was rotated away (beyond the
// kept copies) before it was read.
func skipMarker(n int64) string {
	return fmt.Sprintf("--- procfleet: %d bytes skipped: rotated away before they were read ---", n)
}

// truncatedMarker is the line shown where the log was cut without a
// rotated copy (truncated by hand), and is read again from its start.
const truncatedMarker = "--- procfleet: the log was truncated without a copy; reading it again from its start ---"

// eventsExt ends the name of a server's events file.
const eventsExt = ".events.jsonl"

// EventsFile is the name of a server's events file in the logs folder: the
// reconciler appends one JSON object a line (actuate.StateDir.EventsPath).
func EventsFile(name string) string { return name + eventsExt }

// startReason is the reason of the event that the actuator appends right
// after it spawned a server (actuate.EventStarted), with a message that
// begins "started pid N".
const startReason = "Started"

// event is the part of a reconciler event (reconciler.Event) that the
// start markers need.
type event struct {
	Time    time.Time `json:"time"`
	Reason  string    `json:"reason"`
	Message string    `json:"message"`
}

// parseStart reads one line of an events file: ok for a start event, with
// its time and the pid its message names (0 when it names none).
func parseStart(line []byte) (at time.Time, pid int, ok bool) {
	var e event
	if err := json.Unmarshal(line, &e); err != nil || e.Reason != startReason {
		return time.Time{}, 0, false
	}
	if _, err := fmt.Sscanf(e.Message, "started pid %d", &pid); err != nil {
		pid = 0
	}
	return e.Time, pid, true
}
