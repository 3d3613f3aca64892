//go:build !linux

package logfile

import (
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"
)

// backstopPoll: where the folder is watched through fsnotify (kqueue on
// macOS, compile-checked only), everything is looked at again this often as
// well, for what the backend does not report.
const backstopPoll = time.Second

// dirWatch reports the changes in one folder by file name through fsnotify.
type dirWatch struct {
	w    *fsnotify.Watcher
	done chan struct{}
	once sync.Once
}

func newDirWatch(dir string) (*dirWatch, error) {
	w, err := fsnotify.NewBufferedWatcher(1024)
	if err != nil {
		return nil, fmt.Errorf("watch %s: %w", dir, err)
	}
	if err := w.Add(dir); err != nil {
		_ = w.Close()
		return nil, fmt.Errorf("watch %s: %w", dir, err)
	}
	return &dirWatch{w: w, done: make(chan struct{})}, nil
}

// run reports each event until close: changed(name, renamed), renamed being
// true for a name that appeared, moved or went; overflow when events may
// have been missed, and every backstopPoll. It returns nil after close.
func (d *dirWatch) run(changed func(name []byte, renamed bool), overflow func()) error {
	tick := time.NewTicker(backstopPoll)
	defer tick.Stop()
	for {
		select {
		case <-d.done:
			return nil
		case ev, ok := <-d.w.Events:
			if !ok {
				return nil
			}
			changed([]byte(filepath.Base(ev.Name)), !ev.Has(fsnotify.Write))
		case _, ok := <-d.w.Errors:
			if !ok {
				return nil
			}
			overflow()
		case <-tick.C:
			overflow()
		}
	}
}

func (d *dirWatch) close() error {
	d.once.Do(func() { close(d.done) })
	return d.w.Close()
}
