//go:build unix

package observe

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"
)

// A Wait that nothing but the exit can end is the handle's waiter itself
// (no goroutine of its own); Waits with a deadline share it, end on their
// own deadline while the process runs, and all see the exit.
func TestWaitWithoutDeadlineSharesTheWaiter(t *testing.T) {
	cmd := startTestServer(t)
	h, err := Pin(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	if h.Mode() == PinNone {
		t.Skip("no pidfd or kqueue here: Wait polls")
	}
	bg := make(chan error, 1)
	go func() { bg <- h.Wait(context.Background()) }()
	waitFor(t, "the first Wait to be the waiter", h.waiting.Load)

	short, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := h.Wait(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait with a deadline, process running: %v, want the deadline", err)
	}
	select {
	case err := <-bg:
		t.Fatalf("the waiter returned %v while the process runs", err)
	default:
	}

	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := h.Wait(testCtx(t, 30*time.Second)); err != nil {
		t.Fatalf("Wait with a deadline after the kill: %v", err)
	}
	select {
	case err := <-bg:
		if err != nil {
			t.Fatalf("the waiter: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the waiter did not return within 30 s of the exit")
	}
}

// Close ends a Wait that has no deadline with os.ErrClosed.
func TestWaitWithoutDeadlineEndsOnClose(t *testing.T) {
	cmd := startTestServer(t)
	h, err := Pin(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	if h.Mode() == PinNone {
		_ = h.Close()
		t.Skip("no pidfd or kqueue here: Wait polls")
	}
	bg := make(chan error, 1)
	go func() { bg <- h.Wait(context.Background()) }()
	waitFor(t, "the first Wait to be the waiter", h.waiting.Load)
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-bg:
		if !errors.Is(err, os.ErrClosed) {
			t.Fatalf("Wait after Close: %v, want os.ErrClosed", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Wait did not return within 30 s of Close")
	}
}
