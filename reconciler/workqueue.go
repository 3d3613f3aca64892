package reconciler

import (
	"container/heap"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// queue is the reconciler's work queue of server names. Its guarantees:
//
//   - Stingy: a name is in the queue at most once; adding it again before
//     a worker takes it changes nothing.
//   - One at a time: a name a worker holds (between Get and Done) is only
//     marked dirty by Add, and handed out once more after Done; no two
//     workers ever hold the same name.
//   - Fair: names are handed out in the order they were first added,
//     except that a name added by AddFirst (a result posted for it: a
//     readiness, an exit) goes before the names added by Add, in its own
//     first-added order. A cold start of 1,000 servers adds them all at
//     once; without this, each server's Ready waited for every other
//     server's first pass.
//   - Delays on the injected clock: AddAfter adds the name once the clock
//     has passed the delay (the earliest of several pending delays of one
//     name wins); AddRateLimited delays by the name's error backoff
//     (errorBackoffBase doubling per call, to errorBackoffMax) until Forget.
//   - ShutDown: Add and AddAfter do nothing from then on, pending delays are
//     dropped, and Get hands out what is left and then reports shutdown.
//
// One goroutine waits for the delays; it starts with the first AddAfter
// and ends at ShutDown.
type queue struct {
	clock clock.WithTicker

	mu         sync.Mutex
	cond       *sync.Cond
	order      []string            // names to hand out, first added first
	first      []string            // names added by AddFirst, handed out before order
	dirty      map[string]struct{} // names to hand out (in order or first, or when Done)
	urgent     map[string]struct{} // dirty names AddFirst marked while held
	processing map[string]struct{} // names a worker holds
	delayed    map[string]*delayedKey
	due        delayHeap // delayed, earliest first
	failures   map[string]int
	shutdown   bool
	waiting    bool          // the delay goroutine runs
	wake       chan struct{} // a new earliest delay
	stop       chan struct{} // closed by ShutDown
}

// delayedKey is a name waiting for its time in queue.due.
type delayedKey struct {
	name  string
	at    time.Time
	index int // in queue.due
}

// Add marks name to be reconciled.
func (q *queue) Add(name string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.addLocked(name, false)
}

// AddFirst marks name to be reconciled before the names Add marked. A
// name already waiting keeps its place.
func (q *queue) AddFirst(name string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.addLocked(name, true)
}

func (q *queue) addLocked(name string, first bool) {
	if q.shutdown {
		return
	}
	if _, ok := q.dirty[name]; ok {
		if _, held := q.processing[name]; held && first {
			q.urgent[name] = struct{}{}
		}
		return
	}
	q.dirty[name] = struct{}{}
	if _, ok := q.processing[name]; ok {
		if first {
			q.urgent[name] = struct{}{}
		}
		return // handed out again at Done
	}
	q.push(name, first)
}

// push puts name in its line and wakes a worker.
func (q *queue) push(name string, first bool) {
	if first {
		q.first = append(q.first, name)
	} else {
		q.order = append(q.order, name)
	}
	q.cond.Signal()
}

// Get waits for a name and hands it out; the caller must call Done with it.
// shutdown is true, and name empty, once the queue is shut down and empty.
func (q *queue) Get() (name string, shutdown bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.first)+len(q.order) == 0 && !q.shutdown {
		q.cond.Wait()
	}
	line := &q.first
	if len(q.first) == 0 {
		line = &q.order
	}
	if len(*line) == 0 {
		return "", true
	}
	name = (*line)[0]
	(*line)[0] = ""
	*line = (*line)[1:]
	if len(*line) == 0 {
		*line = (*line)[:0:0] // let go of the array a burst grew
	}
	q.processing[name] = struct{}{}
	delete(q.dirty, name)
	return name, false
}

// Done ends the worker's hold on name; a name added meanwhile is handed out
// again.
func (q *queue) Done(name string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.processing, name)
	_, first := q.urgent[name]
	delete(q.urgent, name)
	if _, ok := q.dirty[name]; ok {
		q.push(name, first)
	}
}

// Len is the number of names waiting to be handed out (not those held, nor
// those delayed).
func (q *queue) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.first) + len(q.order)
}

// AddAfter adds name once d has passed on the queue's clock; d <= 0 adds
// it now.
func (q *queue) AddAfter(name string, d time.Duration) {
	if d <= 0 {
		q.Add(name)
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.shutdown {
		return
	}
	at := q.clock.Now().Add(d)
	if k, ok := q.delayed[name]; ok {
		if !at.Before(k.at) {
			return
		}
		k.at = at
		heap.Fix(&q.due, k.index)
	} else {
		k = &delayedKey{name: name, at: at}
		q.delayed[name] = k
		heap.Push(&q.due, k)
	}
	if q.delayed[name].index != 0 {
		return // the waiter's timer is due earlier already
	}
	if !q.waiting {
		q.waiting = true
		go q.waitDelays()
		return
	}
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// waitDelays adds each delayed name when its time comes, until ShutDown.
func (q *queue) waitDelays() {
	for {
		q.mu.Lock()
		if q.shutdown {
			q.mu.Unlock()
			return
		}
		now := q.clock.Now()
		for len(q.due) > 0 && !q.due[0].at.After(now) {
			k := heap.Pop(&q.due).(*delayedKey)
			delete(q.delayed, k.name)
			q.addLocked(k.name, false)
		}
		var timer clock.Timer
		var fire <-chan time.Time
		if len(q.due) > 0 {
			timer = q.clock.NewTimer(q.due[0].at.Sub(now))
			fire = timer.C()
		}
		q.mu.Unlock()
		select {
		case <-q.stop:
		case <-q.wake:
		case <-fire:
		}
		if timer != nil {
			timer.Stop()
		}
	}
}

// AddRateLimited adds name after its error backoff, and lengthens it.
func (q *queue) AddRateLimited(name string) {
	q.AddAfter(name, q.backoff(name))
}

// backoff returns name's next error delay and counts the error.
func (q *queue) backoff(name string) time.Duration {
	q.mu.Lock()
	defer q.mu.Unlock()
	n := q.failures[name]
	q.failures[name] = n + 1
	return errorBackoff(n)
}

// errorBackoff is the delay after the n+1th consecutive error.
func errorBackoff(n int) time.Duration {
	d := errorBackoffBase
	for range n {
		if d >= errorBackoffMax/2 {
			return errorBackoffMax
		}
		d *= 2
	}
	return min(d, errorBackoffMax)
}

// Forget resets name's error backoff.
func (q *queue) Forget(name string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.failures, name)
}

// NumRequeues is the number of errors counted for name since its last
// Forget.
func (q *queue) NumRequeues(name string) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.failures[name]
}

// ShutDown makes Get report shutdown once the queue is empty, drops the
// pending delays and ends their goroutine.
func (q *queue) ShutDown() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.shutdown {
		return
	}
	q.shutdown = true
	q.due, q.delayed = nil, nil
	close(q.stop)
	q.cond.Broadcast()
}

// ShuttingDown reports whether ShutDown was called.
func (q *queue) ShuttingDown() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.shutdown
}

// delayHeap orders delayed names by time, earliest first.
type delayHeap []*delayedKey

func (h delayHeap) Len() int           { return len(h) }
func (h delayHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h delayHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *delayHeap) Push(x any) {
	k := x.(*delayedKey)
	k.index = len(*h)
	*h = append(*h, k)
}
func (h *delayHeap) Pop() any {
	old := *h
	k := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return k
}
