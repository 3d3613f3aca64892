package actuate

import (
	"os"
	"sync"

	"github.com/go-logr/logr"

	"github.com/procfleet/procfleet/observe"
)

// exits tells every Actuator of this process when one of its children
// exits: one goroutine waits on all their pins (epoll over pidfds, a
// kqueue on macOS) in place of one parked goroutine per child, whose
// stacks were most of the memory a large fleet's reaping cost (about 5 MB
// at 1,000 servers).
var exits struct {
	once sync.Once
	w    *observe.ExitWatcher
	err  error
}

// exitWatcher returns the process's reaping watcher, made at first use
// with log (it logs only a pin it cannot watch).
func exitWatcher(log logr.Logger) (*observe.ExitWatcher, error) {
	exits.once.Do(func() { exits.w, exits.err = observe.NewExitWatcher(log) })
	return exits.w, exits.err
}

// reap reaps our child p once it has exited and keeps its exit status.
// Only the os.Process is kept, not the exec.Cmd: its descriptors are plain
// files the child was given, so Process.Wait is all cmd.Wait would do.
// The wait for the exit is a registration of a pin of the child's own
// (the caller may close its pin) with the shared watcher; Process.Wait
// runs once the child has exited, so it never holds a thread. When the
// child cannot be pinned or only PinNone is available, a goroutine blocks
// in Process.Wait instead, as promptly as the kernel reports the exit.
// When the child had a cgroup of its own that is empty once it exited
// (nothing was left behind), the reaper reads its out-of-memory count
// into the status and removes it, so that a server's crash leaves no
// empty cgroup; one that still holds processes is Cleanup's.
//
// Nothing else reaps the child (no wait4(-1)), so its pid is not reused
// before this reap: the pin taken here holds this very process.
func (a *Actuator) reap(p *os.Process, sc *serverCgroup, cgLock *sync.Mutex) *child {
	ch := &child{pid: p.Pid, done: make(chan struct{})}
	var cgIno uint64
	if sc != nil {
		if fi, err := sc.fd.Stat(); err == nil {
			if id, ok := fileID(fi); ok {
				cgIno = id.Ino
			}
		}
	}
	a.mu.Lock()
	if a.children == nil {
		a.children = make(map[int]*child)
	}
	a.children[ch.pid] = ch
	a.mu.Unlock()
	finish := func() {
		defer close(ch.done)
		ps, werr := p.Wait()
		ch.status = exitStatusOf(ps, werr)
		if sc != nil && cgIno != 0 {
			cgLock.Lock()
			ch.status.OOM = dropExitedCgroup(sc, cgIno, ch.status)
			cgLock.Unlock()
		}
		a.mu.Lock()
		delete(a.children, ch.pid)
		a.mu.Unlock()
	}
	hw, err := observe.Pin(ch.pid)
	if err != nil {
		go finish()
		return ch
	}
	w, werr := exitWatcher(a.Log)
	if werr != nil || hw.Mode() == observe.PinNone {
		_ = hw.Close()
		go finish()
		return ch
	}
	// fn runs once, on a goroutine of its own, after the exit (or at once
	// when the pin cannot be watched: Process.Wait then waits).
	w.Watch(hw, func() {
		_ = hw.Close()
		finish()
	})
	return ch
}
