package actuate

import (
	"errors"
	"io/fs"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestSyncDirGroupsCallers holds a folder's first fsync while more callers
// arrive: they share one fsync that begins after they called, and none
// returns before it has ended.
func TestSyncDirGroupsCallers(t *testing.T) {
	dir := t.TempDir()
	var (
		calls   atomic.Int32
		began   = make(chan int32, 8)
		release = make(chan struct{})
	)
	fsyncFolder = func(d string) error {
		n := calls.Add(1)
		began <- n
		if n == 1 {
			<-release
		}
		return fsyncDir(d)
	}
	t.Cleanup(func() { fsyncFolder = fsyncDir })

	first := make(chan error, 1)
	go func() { first <- syncDir(dir) }()
	if n := recvWithin(t, began); n != 1 {
		t.Fatalf("first fsync is number %d", n)
	}
	const waiters = 5
	var wg sync.WaitGroup
	var returned atomic.Int32
	errs := make(chan error, waiters)
	for range waiters {
		wg.Go(func() {
			err := syncDir(dir)
			returned.Add(1)
			errs <- err
		})
	}
	// Every waiter is blocked while the first fsync is held: none may be
	// answered by it, since it began before they called.
	waitBlocked(t, dir, waiters)
	if n := returned.Load(); n != 0 {
		t.Fatalf("%d callers returned while the fsync before their call ran", n)
	}
	close(release)
	if err := recvWithin(t, first); err != nil {
		t.Fatalf("first syncDir: %v", err)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("syncDir: %v", err)
		}
	}
	// All of them called before the second fsync began: it serves them all.
	if n := calls.Load(); n != 2 {
		t.Fatalf("%d fsyncs for 1 + %d callers, want 2", n, waiters)
	}
}

// waitBlocked waits, at most 10 s, until n callers of syncDir(dir) are
// blocked waiting for a later fsync.
func waitBlocked(t *testing.T, dir string, n int) {
	t.Helper()
	v, ok := folderSyncs.Load(dir)
	if !ok {
		t.Fatalf("no fsync of %s began", dir)
	}
	s := v.(*folderSync)
	deadline := time.Now().Add(10 * time.Second)
	for {
		s.mu.Lock()
		got := s.waiting
		s.mu.Unlock()
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d callers blocked after 10 s", got, n)
		}
		runtime.Gosched()
	}
}

// TestSyncDirError: a folder that cannot be opened is an error, for every
// caller.
func TestSyncDirError(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing")
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			if err := syncDir(missing); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("syncDir of a missing folder: %v, want fs.ErrNotExist", err)
			}
		})
	}
	wg.Wait()
}

func recvWithin[T any](t *testing.T, c <-chan T) T {
	t.Helper()
	select {
	case v := <-c:
		return v
	case <-time.After(10 * time.Second):
		t.Fatal("nothing received within 10 s")
		panic("unreachable")
	}
}
