package testutil

import (
	"bytes"
	"context"
	"io"
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

// StallWriter is an io.Writer whose Writes wait while it is stalled: the
// reader of a pipe who stops reading. Each Write that has to wait is
// reported on Blocked. A test that stalls one registers Resume with
// t.Cleanup (after the cleanup that stops its writer), so the writer can
// return.
type StallWriter struct {
	out     io.Writer
	mu      sync.Mutex
	gate    chan struct{} // non-nil while stalled; closed by Resume
	blocked chan struct{}
}

// NewStallWriter returns a StallWriter onto out, not stalled.
func NewStallWriter(out io.Writer) *StallWriter {
	return &StallWriter{out: out, blocked: make(chan struct{}, 1)}
}

// Write waits while s is stalled, then writes p to out.
func (s *StallWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	g := s.gate
	s.mu.Unlock()
	if g != nil {
		select {
		case s.blocked <- struct{}{}:
		default:
		}
		<-g
	}
	return s.out.Write(p)
}

// Stall makes the next Writes wait until Resume.
func (s *StallWriter) Stall() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gate == nil {
		s.gate = make(chan struct{})
	}
}

// Resume lets the waiting and the next Writes through.
func (s *StallWriter) Resume() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gate != nil {
		close(s.gate)
		s.gate = nil
	}
}

// Blocked receives a value when a Write waits (at most one pending).
func (s *StallWriter) Blocked() <-chan struct{} { return s.blocked }

// WaitBlocked waits until a Write waits, for at most 30 s, and fails the
// test if none does.
func (s *StallWriter) WaitBlocked(t testing.TB) {
	t.Helper()
	select {
	case <-s.blocked:
	case <-time.After(waitBound):
		t.Fatal("nothing was written to the stalled writer")
	}
}
