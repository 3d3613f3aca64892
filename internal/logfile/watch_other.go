//go:build !linux

package logfile

import (
	"fmt"
	"path/filepath"
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
	tick *time.Ticker
	poke chan struct{}
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
	return &dirWatch{w: w, tick: time.NewTicker(backstopPoll), poke: make(chan struct{}, 1)}, nil
}

// wait blocks until an event comes and reports it: changed(name, renamed),
// renamed being true for a name that appeared, moved or went; overflow when
// events may have been missed, and every backstopPoll. It returns early,
// with nil, after wake.
func (d *dirWatch) wait(changed func(name []byte, renamed bool), overflow func()) error {
	select {
	case <-d.poke:
	case ev, ok := <-d.w.Events:
		if !ok {
			return fmt.Errorf("watch: closed")
		}
		changed([]byte(filepath.Base(ev.Name)), !ev.Has(fsnotify.Write))
	case _, ok := <-d.w.Errors:
		if !ok {
			return fmt.Errorf("watch: closed")
		}
		overflow()
	case <-d.tick.C:
		overflow()
	}
	return nil
}

// wake makes the current or next wait return at once.
func (d *dirWatch) wake() {
	select {
	case d.poke <- struct{}{}:
	default:
	}
}

func (d *dirWatch) close() error {
	d.tick.Stop()
	return d.w.Close()
}
