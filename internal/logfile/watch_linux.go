package logfile

import (
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// watchMask: names appearing, moving and going (rotation, re-creation) and
// writes (new output); nothing else is asked of the kernel.
const watchMask = unix.IN_MODIFY | unix.IN_CREATE | unix.IN_MOVED_TO | unix.IN_MOVED_FROM |
	unix.IN_DELETE | unix.IN_DELETE_SELF | unix.IN_MOVE_SELF | unix.IN_ONLYDIR

// inotifyBuf holds many events per read: a burst of writes costs one read.
const inotifyBuf = 64 << 10

// dirWatch reports the changes in one folder by file name through one
// inotify instance (however many files are followed; the per-user limit of
// instances is small, 128 by default), and wakes nobody while nothing
// changes.
type dirWatch struct {
	f     *os.File
	buf   []byte
	poked atomic.Bool
}

func newDirWatch(dir string) (*dirWatch, error) {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("watch %s: inotify: %w", dir, err)
	}
	if _, err := unix.InotifyAddWatch(fd, dir, watchMask); err != nil {
		_ = unix.Close(fd)
		return nil, fmt.Errorf("watch %s: %w", dir, err)
	}
	// A non-blocking descriptor is read through the runtime's poller, so a
	// read deadline (wake) ends a blocked read.
	return &dirWatch{f: os.NewFile(uintptr(fd), "inotify:"+dir), buf: make([]byte, inotifyBuf)}, nil
}

// wait blocks until events come, and reports each: changed(name, renamed),
// renamed being true for a name that appeared, moved or went (name is valid
// only during the call); overflow when the kernel dropped events (look at
// everything again). It returns early, with nil, after wake. Only one
// goroutine waits at a time.
func (w *dirWatch) wait(changed func(name []byte, renamed bool), overflow func()) error {
	if err := w.f.SetReadDeadline(time.Time{}); err != nil {
		return fmt.Errorf("read %s: %w", w.f.Name(), err)
	}
	if w.poked.Swap(false) {
		return nil
	}
	n, err := w.f.Read(w.buf)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read %s: %w", w.f.Name(), err)
	}
	buf := w.buf[:n]
	for off := 0; off+unix.SizeofInotifyEvent <= n; {
		ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
		nameEnd := off + unix.SizeofInotifyEvent + int(ev.Len)
		if nameEnd > n {
			break
		}
		name := cString(buf[off+unix.SizeofInotifyEvent : nameEnd])
		off = nameEnd
		switch {
		case ev.Mask&unix.IN_Q_OVERFLOW != 0:
			overflow()
		case ev.Mask&(unix.IN_DELETE_SELF|unix.IN_MOVE_SELF|unix.IN_IGNORED) != 0:
			// The folder itself went: files already open are read to
			// their end; nothing new can be seen here.
			overflow()
		case len(name) > 0:
			changed(name, ev.Mask&unix.IN_MODIFY == 0)
		}
	}
	return nil
}

// wake makes the current or next wait return at once.
func (w *dirWatch) wake() {
	w.poked.Store(true)
	_ = w.f.SetReadDeadline(time.Unix(1, 0))
}

func (w *dirWatch) close() error { return w.f.Close() }

// cString is b up to its first NUL (inotify pads names with NULs).
func cString(b []byte) []byte {
	for i, c := range b {
		if c == 0 {
			return b[:i]
		}
	}
	return b
}
