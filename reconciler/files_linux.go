package reconciler

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"
)

// The kernel's filter: folders are asked only for names created, moved and
// removed (and for their own removal or move); files only for content
// written, closed by a writer, and metadata.
const (
	inotifyFolderMask = unix.IN_CREATE | unix.IN_DELETE | unix.IN_MOVED_FROM | unix.IN_MOVED_TO |
		unix.IN_DELETE_SELF | unix.IN_MOVE_SELF | unix.IN_ONLYDIR
	inotifyFileMask = unix.IN_MODIFY | unix.IN_CLOSE_WRITE | unix.IN_ATTRIB
)

// inotifyBuffer is the size of one read of the inotify descriptor: room for
// at least 200 events with the longest names.
const inotifyBuffer = 200 * (unix.SizeofInotifyEvent + unix.NAME_MAX + 1)

// inotifyBackend watches through raw inotify, which lets the kernel drop
// events nobody asked for (fsnotify asks every folder for every event) and
// reports IN_CLOSE_WRITE (which fsnotify 1.10 does not export).
//
// Everything but the notifier goroutine runs on Run's goroutine: the
// goroutine only waits until the descriptor is readable and says so; take
// reads the descriptor itself, so it returns every event queued before the
// call, and the kernel's queue (fs.inotify.max_queued_events, then
// IN_Q_OVERFLOW) is the only bound.
type inotifyBackend struct {
	file    *os.File
	rc      syscall.RawConn
	signal  chan struct{} // events may be waiting
	taken   chan struct{} // take has read the descriptor
	closing chan struct{}
	done    chan struct{} // notify has returned
	probes  bool          // the writer probe is on

	buf     []byte
	watches map[int32]*inotifyWatch
	folders map[string]int32
	files   map[string]fileWatch

	kernelEvents atomic.Int64 // events read from the kernel (tests)
}

// inotifyWatch is one watch descriptor: a folder, or the files (names of
// one inode: a file and its symlinks) whose content it watches.
type inotifyWatch struct {
	folder string
	files  []string
}

// fileWatch is a file's content watch and the inode it was added on.
type fileWatch struct {
	wd       int32
	dev, ino uint64
}

// newNativeBackend returns the Linux watch: raw inotify, with the writer
// probe when probes is true.
func newNativeBackend(probes bool) (watchBackend, error) {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("watch fleet files: inotify_init1: %w", err)
	}
	file := os.NewFile(uintptr(fd), "inotify")
	rc, err := file.SyscallConn()
	if err != nil {
		_ = file.Close()
		return nil, fmt.Errorf("watch fleet files: %w", err)
	}
	b := &inotifyBackend{
		file:    file,
		rc:      rc,
		signal:  make(chan struct{}, 1),
		taken:   make(chan struct{}, 1),
		closing: make(chan struct{}),
		done:    make(chan struct{}),
		probes:  probes,
		buf:     make([]byte, inotifyBuffer),
		watches: map[int32]*inotifyWatch{},
		folders: map[string]int32{},
		files:   map[string]fileWatch{},
	}
	go b.notify()
	return b, nil
}

func (b *inotifyBackend) closes() bool { return true }

func (b *inotifyBackend) ready() <-chan struct{} { return b.signal }

func (b *inotifyBackend) close() error {
	close(b.closing)
	err := b.file.Close()
	<-b.done
	return err
}

// notify signals b.signal when events are waiting, then waits for take to
// read them, until the backend is closed. It reads nothing itself: its
// poller callback asks how many bytes are queued (FIONREAD), and the
// runtime poller waits for the descriptor to become readable while none
// are.
func (b *inotifyBackend) notify() {
	defer close(b.done)
	defer close(b.signal)
	for {
		err := b.rc.Read(func(fd uintptr) bool {
			n, err := unix.IoctlGetInt(int(fd), unix.TIOCINQ) // FIONREAD
			return err != nil || n > 0
		})
		if err != nil {
			return // closed
		}
		select {
		case b.signal <- struct{}{}:
		default:
		}
		select {
		case <-b.taken:
		case <-b.closing:
			return
		}
	}
}

// control runs f with the descriptor; false when it is closed.
func (b *inotifyBackend) control(f func(fd int)) bool {
	return b.rc.Control(func(fd uintptr) { f(int(fd)) }) == nil
}

func (b *inotifyBackend) take() []fileEvent {
	var evs []fileEvent
	b.control(func(fd int) {
		for {
			n, err := unix.Read(fd, b.buf)
			if errors.Is(err, unix.EINTR) {
				continue
			}
			if errors.Is(err, unix.EAGAIN) {
				return
			}
			if err != nil {
				evs = append(evs, fileEvent{op: opLost, err: fmt.Errorf("read inotify events: %w", err)})
				return
			}
			if n <= 0 {
				return
			}
			evs = b.parse(fd, b.buf[:n], evs)
		}
	})
	select {
	case b.taken <- struct{}{}:
	default:
	}
	return evs
}

// parse appends the events in buf to evs.
func (b *inotifyBackend) parse(fd int, buf []byte, evs []fileEvent) []fileEvent {
	for len(buf) >= unix.SizeofInotifyEvent {
		wd := int32(binary.NativeEndian.Uint32(buf[0:4]))
		mask := binary.NativeEndian.Uint32(buf[4:8])
		end := unix.SizeofInotifyEvent + int(binary.NativeEndian.Uint32(buf[12:16]))
		if end > len(buf) {
			break
		}
		name := string(bytes.TrimRight(buf[unix.SizeofInotifyEvent:end], "\x00"))
		buf = buf[end:]
		b.kernelEvents.Add(1)
		evs = b.event(fd, wd, mask, name, evs)
	}
	return evs
}

// event appends what one kernel event means to evs.
func (b *inotifyBackend) event(fd int, wd int32, mask uint32, name string, evs []fileEvent) []fileEvent {
	if mask&unix.IN_Q_OVERFLOW != 0 {
		return append(evs, fileEvent{op: opLost})
	}
	w, ok := b.watches[wd]
	if !ok {
		return evs // a watch already removed
	}
	if mask&unix.IN_IGNORED != 0 {
		b.forget(wd) // the kernel removed it: its inode is gone
		return evs
	}
	if w.folder != "" {
		switch {
		case mask&(unix.IN_MOVE_SELF|unix.IN_UNMOUNT) != 0:
			// Its files are no longer where they were, with no event of
			// their own. The watch would follow it: drop it, so that the
			// next watch finds the folder by its path again.
			_, _ = unix.InotifyRmWatch(fd, uint32(wd))
			b.forget(wd)
			return append(evs, fileEvent{name: w.folder, op: opLost})
		case mask&unix.IN_DELETE_SELF != 0:
			return evs // its files were removed first, each with its event
		case mask&unix.IN_MOVED_TO != 0:
			return append(evs, fileEvent{name: filepath.Join(w.folder, name), op: opPlaced})
		case mask&unix.IN_CREATE != 0:
			return append(evs, fileEvent{name: filepath.Join(w.folder, name), op: opCreated})
		case mask&(unix.IN_DELETE|unix.IN_MOVED_FROM) != 0:
			return append(evs, fileEvent{name: filepath.Join(w.folder, name), op: opRemoved})
		}
		return evs
	}
	for _, f := range w.files {
		switch {
		case mask&unix.IN_MODIFY != 0:
			evs = append(evs, fileEvent{name: f, op: opWritten})
		case mask&unix.IN_CLOSE_WRITE != 0:
			evs = append(evs, fileEvent{name: f, op: opClosed})
		case mask&unix.IN_ATTRIB != 0:
			evs = append(evs, fileEvent{name: f, op: opAttrib})
		}
	}
	return evs
}

// forget drops the bookkeeping of watch wd.
func (b *inotifyBackend) forget(wd int32) {
	w := b.watches[wd]
	if w == nil {
		return
	}
	delete(b.watches, wd)
	if w.folder != "" {
		delete(b.folders, w.folder)
	}
	for _, f := range w.files {
		delete(b.files, f)
	}
}

func (b *inotifyBackend) watch(folders, files []string) error {
	var errs []error
	ok := b.control(func(fd int) {
		want := make(map[string]bool, len(folders))
		for _, f := range folders {
			want[f] = true
		}
		for f, wd := range b.folders {
			if !want[f] {
				_, _ = unix.InotifyRmWatch(fd, uint32(wd))
				b.forget(wd)
			}
		}
		for _, f := range folders {
			if _, ok := b.folders[f]; ok {
				continue
			}
			wd, err := unix.InotifyAddWatch(fd, f, inotifyFolderMask)
			if err != nil {
				errs = append(errs, fmt.Errorf("watch fleet folder %s: %w", f, err))
				continue
			}
			b.folders[f] = int32(wd)
			b.watches[int32(wd)] = &inotifyWatch{folder: f}
		}
		wantFiles := make(map[string]bool, len(files))
		for _, f := range files {
			wantFiles[f] = true
		}
		for f := range b.files {
			if !wantFiles[f] {
				b.unwatchFile(fd, f)
			}
		}
		// Every file again: a name may name another inode by now (a
		// symlink retargeted, a ConfigMap swap).
		for _, f := range files {
			if err := b.watchFile(fd, f); err != nil {
				errs = append(errs, err)
			}
		}
	})
	if !ok {
		return errors.New("watch fleet files: watcher closed")
	}
	return errors.Join(errs...)
}

func (b *inotifyBackend) rewatch(file string) error {
	var err error
	if !b.control(func(fd int) { err = b.watchFile(fd, file) }) {
		return errors.New("watch fleet files: watcher closed")
	}
	return err
}

// watchFile moves file's content watch to the inode its name names now. A
// file that does not exist is no error: its folder's watch says when it
// does.
func (b *inotifyBackend) watchFile(fd int, file string) error {
	wd, err := unix.InotifyAddWatch(fd, file, inotifyFileMask)
	if err != nil {
		b.unwatchFile(fd, file)
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) {
			return nil
		}
		return fmt.Errorf("watch fleet file %s: %w", file, err)
	}
	var st unix.Stat_t
	if err := unix.Stat(file, &st); err != nil {
		st = unix.Stat_t{} // replaced since: the probe will not match it
	}
	if old, ok := b.files[file]; ok && old.wd != int32(wd) {
		b.unwatchFile(fd, file)
	}
	w := b.watches[int32(wd)]
	if w == nil {
		w = &inotifyWatch{}
		b.watches[int32(wd)] = w
	}
	if !slices.Contains(w.files, file) {
		w.files = append(w.files, file)
	}
	b.files[file] = fileWatch{wd: int32(wd), dev: uint64(st.Dev), ino: st.Ino}
	return nil
}

// unwatchFile drops file's content watch, and the watch itself when no
// other name of its inode uses it.
func (b *inotifyBackend) unwatchFile(fd int, file string) {
	fw, ok := b.files[file]
	if !ok {
		return
	}
	delete(b.files, file)
	w := b.watches[fw.wd]
	if w == nil {
		return
	}
	w.files = slices.DeleteFunc(w.files, func(f string) bool { return f == file })
	if len(w.files) == 0 {
		_, _ = unix.InotifyRmWatch(fd, uint32(fw.wd))
		delete(b.watches, fw.wd)
	}
}

// probe asks the kernel whether anybody has file open for writing: a read
// lease (F_SETLEASE, F_RDLCK) is refused with EAGAIN while a writer has the
// inode open, and granted otherwise; it is released at once by closing the
// descriptor. The answer counts only for the inode that file's content
// watch is on, so that the writer's close is reported (see confirmer).
// Unavailable: probes off, no content watch, another inode, not a regular
// file, not the file's owner without CAP_LEASE, leases disabled
// (fs.leases-enable) or not supported by the file system.
func (b *inotifyBackend) probe(file string) probeResult {
	fw, ok := b.files[file]
	if !b.probes || !ok {
		return probeUnavailable
	}
	fd, err := unix.Open(file, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NONBLOCK|unix.O_NOCTTY, 0)
	if err != nil {
		return probeUnavailable
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG ||
		uint64(st.Dev) != fw.dev || st.Ino != fw.ino {
		return probeUnavailable
	}
	switch _, err := unix.FcntlInt(uintptr(fd), unix.F_SETLEASE, unix.F_RDLCK); {
	case err == nil:
		return probeNoWriter
	case errors.Is(err, unix.EAGAIN):
		return probeWriter
	}
	return probeUnavailable
}
