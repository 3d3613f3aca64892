package reconciler

import (
	"sync"
	"time"

	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
)

// Restart backoff defaults (DESIGN.md "Starting").
const (
	DefaultBackoffBase       = time.Second
	DefaultBackoffMax        = 5 * time.Minute
	DefaultBackoffResetAfter = 10 * time.Minute
)

// Backoff is the per-server restart backoff, a pure rate limiter over an
// injected clock: the first restart after a reset is immediate, the n-th
// waits Base x 2^(n-2), capped at Max; the count resets once the server has
// been Ready for ResetAfter. It does no I/O and starts no goroutine, so it is
// tested as arithmetic on a fake clock.
//
// It satisfies workqueue.TypedRateLimiter[string].
type Backoff struct {
	// Base is the second restart's delay. Zero means DefaultBackoffBase.
	Base time.Duration
	// Max caps the delay. Zero means DefaultBackoffMax.
	Max time.Duration
	// ResetAfter is how long a server must stay Ready for the count to
	// reset. Zero means DefaultBackoffResetAfter.
	ResetAfter time.Duration
	// Clock tells the time. Nil means the real clock.
	Clock clock.PassiveClock

	mu    sync.Mutex
	items map[string]*backoffItem
}

type backoffItem struct {
	restarts   int
	readySince time.Time // zero when not Ready
}

var _ workqueue.TypedRateLimiter[string] = (*Backoff)(nil)

func (b *Backoff) now() time.Time {
	if b.Clock == nil {
		return time.Now()
	}
	return b.Clock.Now()
}

func (b *Backoff) item(key string) *backoffItem {
	if b.items == nil {
		b.items = make(map[string]*backoffItem)
	}
	it := b.items[key]
	if it == nil {
		it = &backoffItem{}
		b.items[key] = it
	}
	return it
}

func (b *Backoff) resetIfReadyLongEnough(it *backoffItem, now time.Time) {
	reset := b.ResetAfter
	if reset <= 0 {
		reset = DefaultBackoffResetAfter
	}
	if !it.readySince.IsZero() && now.Sub(it.readySince) >= reset {
		it.restarts = 0
	}
}

// When records one more restart of key and returns how long it must wait.
func (b *Backoff) When(key string) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	it := b.item(key)
	b.resetIfReadyLongEnough(it, b.now())
	it.readySince = time.Time{}
	it.restarts++
	return b.delay(it.restarts)
}

func (b *Backoff) delay(n int) time.Duration {
	if n <= 1 {
		return 0
	}
	base, limit := b.Base, b.Max
	if base <= 0 {
		base = DefaultBackoffBase
	}
	if limit <= 0 {
		limit = DefaultBackoffMax
	}
	d := base
	for i := 2; i < n; i++ {
		d *= 2
		if d >= limit {
			return limit
		}
	}
	return min(d, limit)
}

// Forget resets key: the next restart is immediate.
func (b *Backoff) Forget(key string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.items, key)
}

// NumRequeues returns how many restarts of key count toward its backoff now.
func (b *Backoff) NumRequeues(key string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	it := b.items[key]
	if it == nil {
		return 0
	}
	b.resetIfReadyLongEnough(it, b.now())
	return it.restarts
}

// Ready records that key became Ready now; once it has stayed Ready for
// ResetAfter, its count resets. Calling it again while Ready keeps the
// original time.
func (b *Backoff) Ready(key string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	it := b.item(key)
	if it.readySince.IsZero() {
		it.readySince = b.now()
	}
}

// NotReady records that key stopped being Ready.
func (b *Backoff) NotReady(key string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if it := b.items[key]; it != nil {
		it.readySince = time.Time{}
	}
}
