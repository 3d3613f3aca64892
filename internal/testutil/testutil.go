package testutil

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"
)

// waitBound is how long a helper waits for an event before failing the test.
const waitBound = 30 * time.Second

// SyncBuffer is an io.Writer safe for a writing goroutine and the test, which
// signals each write so that WaitFor waits on the event, not on a sleep.
type SyncBuffer struct {
	mu     sync.Mutex
	b      bytes.Buffer
	notify chan struct{}
}

// NewSyncBuffer returns an empty SyncBuffer.
func NewSyncBuffer() *SyncBuffer { return &SyncBuffer{notify: make(chan struct{}, 1)} }

// Write appends p and signals a waiting WaitFor.
func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case s.notify <- struct{}{}:
	default:
	}
	return s.b.Write(p)
}

// String returns everything written so far.
func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// WaitFor waits until the output contains want, for at most 30 s, and fails
// the test if it never does.
func (s *SyncBuffer) WaitFor(t testing.TB, want string) {
	t.Helper()
	deadline := time.After(waitBound)
	for !strings.Contains(s.String(), want) {
		select {
		case <-s.notify:
		case <-deadline:
			got := s.String()
			t.Fatalf("output never contained %q; got %d bytes ending %q", want, len(got), got[max(len(got)-200, 0):])
		}
	}
}

// RunUntilCleanup runs run in a goroutine with a context that ends when the
// test does; at cleanup it cancels that context and waits at most 30 s for run
// to return, failing the test if run returns an error or does not return.
// what names run in those failures ("Serve", "Follow").
func RunUntilCleanup(t testing.TB, what string, run func(ctx context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("%s: %v", what, err)
			}
		case <-time.After(waitBound):
			t.Errorf("%s did not return 30 s after its context ended", what)
		}
	})
}
