package reconciler

import (
	"fmt"
	"time"
)

// Restart policy defaults (DESIGN.md "Starting").
const (
	// DefaultBackoffBase is the wait before the second restart of a loop.
	DefaultBackoffBase = time.Second
	// DefaultBackoffMax caps the wait: Kubernetes' newer default; five
	// minutes is too long to wait on a dev machine once the cause is fixed.
	DefaultBackoffMax = 60 * time.Second
	// DefaultLoopWindow: an exit after the server had been Ready this long
	// is not part of a crash loop (supervisord's startsecs, PM2's
	// min_uptime, for the same reason).
	DefaultLoopWindow = 10 * time.Second
)

// Backoff is the restart policy's arithmetic. It holds no state: the count
// of crashes lives with the server, and each exit asks After what it means.
// The zero value is DESIGN.md's policy.
type Backoff struct {
	// Base is the wait before the second restart of a loop. Zero means
	// DefaultBackoffBase.
	Base time.Duration
	// Max caps the wait. Zero means DefaultBackoffMax.
	Max time.Duration
	// LoopWindow: an exit after this long Ready resets the count. Zero means
	// DefaultLoopWindow.
	LoopWindow time.Duration
}

// Restart is what one exit means for the next start.
type Restart struct {
	// Crashes is how many exits in a row came within LoopWindow of Ready
	// (this one included); 0 when this exit ended a long run.
	Crashes int
	// Delay is how long the restart waits after the exit.
	Delay time.Duration
	// Rule says which rule applied, for status, describe and events.
	Rule string
}

func (b *Backoff) base() time.Duration {
	if b == nil || b.Base <= 0 {
		return DefaultBackoffBase
	}
	return b.Base
}

func (b *Backoff) max() time.Duration {
	if b == nil || b.Max <= 0 {
		return DefaultBackoffMax
	}
	return b.Max
}

func (b *Backoff) window() time.Duration {
	if b == nil || b.LoopWindow <= 0 {
		return DefaultLoopWindow
	}
	return b.LoopWindow
}

// After decides the restart that follows an exit: crashes is the count
// before this exit, readyFor how long the process had been Ready when it
// exited (0 when it never was). An exit after at least LoopWindow of Ready
// restarts at once and resets the count; a sooner one counts: the first
// restart is immediate, the n-th waits Base x 2^(n-2), capped at Max.
func (b *Backoff) After(crashes int, readyFor time.Duration) Restart {
	if w := b.window(); readyFor >= w {
		return Restart{Rule: fmt.Sprintf("ran Ready for %s (at least %s): not a crash loop, restarted at once, count reset", round(readyFor), w)}
	}
	n := crashes + 1
	d := b.Delay(n)
	if n == 1 {
		return Restart{Crashes: n, Rule: fmt.Sprintf("exit 1 within %s of Ready: first restart at once", b.window())}
	}
	return Restart{Crashes: n, Delay: d, Rule: fmt.Sprintf("exit %d in a row within %s of Ready; back-off %s x 2^(n-2), capped at %s", n, b.window(), b.base(), b.max())}
}

// Delay is the wait before the restart after the n-th exit of a loop: 0 for
// the first, then Base x 2^(n-2), capped at Max.
func (b *Backoff) Delay(n int) time.Duration {
	if n <= 1 {
		return 0
	}
	d, limit := b.base(), b.max()
	for i := 2; i < n; i++ {
		d *= 2
		if d >= limit {
			return limit
		}
	}
	return min(d, limit)
}

// round shortens a duration for a sentence (12.345678s -> 12.3s).
func round(d time.Duration) time.Duration {
	switch {
	case d >= time.Second:
		return d.Round(100 * time.Millisecond)
	case d >= time.Millisecond:
		return d.Round(time.Millisecond)
	}
	return d
}
