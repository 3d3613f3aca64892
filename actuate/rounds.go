package actuate

import "sync"

// laterRounds serves concurrent callers of a query from shared rounds: a
// caller's answer comes from a round that began after its call, so it
// reflects everything the caller did before asking, and every caller
// waiting when a round begins shares that round. At most one round runs at
// a time; a caller waits for at most the round in progress and the next.
// The embedding type keeps its requests and answers under mu.
type laterRounds struct {
	mu      sync.Mutex
	cond    *sync.Cond
	begun   uint64 // rounds begun
	done    uint64 // number of the last round ended
	running bool
	waiting int // callers blocked until a later round ends (tests read it)
}

// await is called with mu held and returns, with mu held, once a round
// that began after the call has ended. A caller that finds no round
// running runs the next one itself: run is called with mu held, may
// release it around its query, and holds it again when it returns.
func (r *laterRounds) await(run func()) {
	if r.cond == nil {
		r.cond = sync.NewCond(&r.mu)
	}
	need := r.begun + 1 // a round running now began before this call
	for r.done < need {
		if r.running {
			r.waiting++
			r.cond.Wait()
			r.waiting--
			continue
		}
		r.running = true
		r.begun++
		n := r.begun
		run()
		r.done, r.running = n, false
		r.cond.Broadcast()
	}
}
