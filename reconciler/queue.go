package reconciler

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/utils/clock"
)

// Result tells the worker what to do with a server after one reconcile.
type Result struct {
	// RequeueAfter > 0: look at the server again after that long (a backoff
	// that expires, a dependency that may become Ready).
	RequeueAfter time.Duration
}

// TerminalError marks an error that retrying cannot fix (an invalid spec):
// the worker logs it and does not requeue.
type TerminalError struct{ Err error }

func (e *TerminalError) Error() string { return e.Err.Error() }
func (e *TerminalError) Unwrap() error { return e.Err }

// reconcileFunc reconciles one server, by name.
type reconcileFunc func(ctx context.Context, name string) (Result, error)

// errorBackoffBase and errorBackoffMax bound the retry after a reconcile
// error: 50 ms, doubling per consecutive error of the key, to 30 s. Short
// enough that a transient error (a busy /proc, a full disk freed) costs
// little; capped so a persistent one is retried twice a minute.
const (
	errorBackoffBase = 50 * time.Millisecond
	errorBackoffMax  = 30 * time.Second
)

// newQueue returns an empty queue on clk (nil: the real clock).
func newQueue(clk clock.WithTicker) *queue {
	if clk == nil {
		clk = clock.RealClock{}
	}
	q := &queue{
		clock:      clk,
		dirty:      map[string]struct{}{},
		processing: map[string]struct{}{},
		urgent:     map[string]struct{}{},
		delayed:    map[string]*delayedKey{},
		failures:   map[string]int{},
		wake:       make(chan struct{}, 1),
		stop:       make(chan struct{}),
	}
	q.cond = sync.NewCond(&q.mu)
	return q
}

// runWorkers runs n workers over q until q shuts down, and returns when all
// have finished their current item.
func runWorkers(ctx context.Context, q *queue, n int, log logr.Logger, fn reconcileFunc) {
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			for processNext(ctx, q, log, fn) {
			}
		})
	}
	wg.Wait()
}

var reconcileIDs struct {
	mu sync.Mutex
	n  uint64
}

func nextReconcileID() uint64 {
	reconcileIDs.mu.Lock()
	defer reconcileIDs.mu.Unlock()
	reconcileIDs.n++
	return reconcileIDs.n
}

// processNext takes one key, reconciles it and decides, in one switch,
// between retry-with-backoff, requeue-after and forget.
func processNext(ctx context.Context, q *queue, log logr.Logger, fn reconcileFunc) bool {
	name, shutdown := q.Get()
	if shutdown {
		return false
	}
	defer q.Done(name)
	rlog := passLogger(log, "server", name, "reconcileID", nextReconcileID())
	res, err := safeReconcile(logr.NewContext(ctx, rlog), fn, name)
	var terminal *TerminalError
	switch {
	case err != nil && errors.As(err, &terminal):
		q.Forget(name)
		rlog.Error(err, "Reconcile failed; not retrying")
	case err != nil:
		q.AddRateLimited(name)
		rlog.Error(err, "Reconcile failed; retrying", "retries", q.NumRequeues(name))
	case res.RequeueAfter > 0:
		q.Forget(name)
		q.AddAfter(name, res.RequeueAfter)
	default:
		q.Forget(name)
	}
	return true
}

func safeReconcile(ctx context.Context, fn reconcileFunc, name string) (res Result, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("reconcile %s: panic: %v", name, r)
		}
	}()
	return fn(ctx, name)
}
