//go:build linux || darwin

package observe

import (
	"os/exec"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
)

// waitGoroutines waits (bounded) until at most n goroutines run.
func waitGoroutines(t *testing.T, n int) int {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := runtime.NumGoroutine()
		if got <= n || time.Now().After(deadline) {
			return got
		}
		// Goroutines that ran callbacks end on their own; no event says so.
		time.Sleep(5 * time.Millisecond)
	}
}

func TestExitWatcherManyProcesses(t *testing.T) {
	const n = 200
	cmds := make([]*exec.Cmd, n)
	handles := make([]*Handle, n)
	for i := range cmds {
		cmds[i] = startSleep(t)
		h, err := Pin(cmds[i].Process.Pid)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { h.Close() })
		handles[i] = h
	}
	before := runtime.NumGoroutine()
	w, err := NewExitWatcher(testr.New(t))
	if err != nil {
		t.Fatal(err)
	}
	if w.Mode() != nativePinMode() {
		t.Fatalf("Mode() = %v, want %v", w.Mode(), nativePinMode())
	}
	var fired [n]atomic.Int32
	var wg sync.WaitGroup
	wg.Add(n)
	for i, h := range handles {
		w.Watch(h, func() {
			fired[i].Add(1)
			wg.Done()
		})
	}
	if w.Len() != n {
		t.Fatalf("Len() = %d, want %d", w.Len(), n)
	}
	watching := runtime.NumGoroutine()
	// The watcher adds one goroutine, not one per process (a little slack
	// for the runtime's and testing's own).
	if watching > before+5 {
		t.Errorf("goroutines: %d before watching %d processes, %d while watching", before, n, watching)
	}
	for _, c := range cmds {
		if err := c.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		missing := 0
		for i := range fired {
			if fired[i].Load() == 0 {
				missing++
			}
		}
		t.Fatalf("%d of %d exits not seen", missing, n)
	}
	for i := range fired {
		if got := fired[i].Load(); got != 1 {
			t.Errorf("process %d: fn ran %d times", i, got)
		}
	}
	if w.Len() != 0 {
		t.Errorf("Len() = %d after all exits", w.Len())
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if got := waitGoroutines(t, before); got > before {
		t.Errorf("goroutines: %d before the watcher, %d after Close", before, got)
	}
}

func TestExitWatcherAlreadyExitedAndUnwatch(t *testing.T) {
	w, err := NewExitWatcher(testr.New(t))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()

	dead := startSleep(t)
	hd, err := Pin(dead.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	defer hd.Close()
	_ = dead.Process.Kill()
	if err := hd.Wait(testCtx(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	fired := make(chan string, 4)
	w.Watch(hd, func() { fired <- "dead" })

	live := startSleep(t)
	hl, err := Pin(live.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	w.Watch(hl, func() { fired <- "unwatched" })
	w.Unwatch(hl)

	closed := startSleep(t)
	hc, err := Pin(closed.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	w.Watch(hc, func() { fired <- "closed-after-watch" })
	hc.Close() // removes it from the watcher

	hc2, err := Pin(closed.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	hc2.Close()
	w.Watch(hc2, func() { fired <- "closed-before-watch" })

	got := map[string]bool{}
	for len(got) < 2 {
		select {
		case s := <-fired:
			got[s] = true
		case <-time.After(10 * time.Second):
			t.Fatalf("fired %v, want dead and closed-before-watch", got)
		}
	}
	if !got["dead"] || !got["closed-before-watch"] {
		t.Errorf("fired %v", got)
	}
	// The unwatched and the closed handle must not fire when they exit.
	_ = live.Process.Kill()
	_ = closed.Process.Kill()
	if err := mustPin(t, live.Process.Pid).Wait(testCtx(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	// Watch one more exit through the watcher and make sure nothing else
	// arrived before it (events are delivered in one loop).
	last := startSleep(t)
	hlast := mustPin(t, last.Process.Pid)
	w.Watch(hlast, func() { fired <- "last" })
	_ = last.Process.Kill()
	select {
	case s := <-fired:
		if s != "last" {
			t.Errorf("unexpected callback %q", s)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("last exit not seen")
	}
	if w.Len() != 0 {
		t.Errorf("Len() = %d", w.Len())
	}
	hl.Close()
}

func mustPin(t *testing.T, pid int) *Handle {
	t.Helper()
	h, err := Pin(pid)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

// PinNone handles are polled by the watcher's goroutine. (pinNone is called
// directly: see TestPinNoneFallback.)
func TestExitWatcherPolled(t *testing.T) {
	w, err := NewExitWatcher(testr.New(t))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	const n = 20
	var wg sync.WaitGroup
	wg.Add(n)
	var cmds []*exec.Cmd
	for range n {
		c := startSleep(t)
		cmds = append(cmds, c)
		h, err := pinNone(c.Process.Pid)
		if err != nil {
			t.Fatal(err)
		}
		var once atomic.Int32
		w.Watch(h, func() {
			if once.Add(1) == 1 {
				wg.Done()
			}
		})
	}
	for _, c := range cmds {
		_ = c.Process.Kill()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("polled exits not seen")
	}
	if w.Len() != 0 {
		t.Errorf("Len() = %d", w.Len())
	}
}
