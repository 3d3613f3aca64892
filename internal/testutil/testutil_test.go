package testutil

import (
	"context"
	"errors"
	"fmt"
	"testing"
)

// TestSyncBufferWaitFor: WaitFor returns once a concurrent writer has
// written what it waits for, and String holds all of it.
func TestSyncBufferWaitFor(t *testing.T) {
	b := NewSyncBuffer()
	go func() {
		for i := 0; i < 100; i++ {
			fmt.Fprintf(b, "line %d\n", i)
		}
	}()
	b.WaitFor(t, "line 99\n")
	if got := b.String(); len(got) == 0 || got[:7] != "line 0\n" {
		t.Errorf("String() = %q, want it to begin with line 0", got)
	}
}

// TestRunUntilCleanup: run gets a context that ends at cleanup, and its
// error is reported.
func TestRunUntilCleanup(t *testing.T) {
	ended := make(chan error, 1)
	t.Run("inner", func(t *testing.T) {
		RunUntilCleanup(t, "run", func(ctx context.Context) error {
			<-ctx.Done()
			ended <- ctx.Err()
			return nil
		})
	})
	select {
	case err := <-ended:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("run's context ended with %v, want context.Canceled", err)
		}
	default:
		t.Errorf("run had not returned when the test's cleanup finished")
	}
}
