package dashboard

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/procfleet/procfleet/reconciler"
	"github.com/procfleet/procfleet/spec"
)

// tableBackend is a Backend whose fleet the test writes: for what does not
// depend on processes (the HTTP gate, the patches, the cost of a render at
// 100 servers). Tests of live behaviour use procBackend.
type tableBackend struct {
	mu       sync.Mutex
	snap     Snapshot
	details  map[string]Detail
	changeCh chan struct{}

	snapshots atomic.Int64
	requests  atomic.Int64
	lastReq   atomic.Value // string "name action"
}

var _ Backend = (*tableBackend)(nil)

func newTableBackend(snap Snapshot) *tableBackend {
	return &tableBackend{snap: snap, details: map[string]Detail{}, changeCh: make(chan struct{})}
}

// set changes the fleet and wakes the pages.
func (b *tableBackend) set(f func(*Snapshot)) {
	b.mu.Lock()
	defer b.mu.Unlock()
	f(&b.snap)
	close(b.changeCh)
	b.changeCh = make(chan struct{})
}

func (b *tableBackend) Snapshot() Snapshot {
	b.snapshots.Add(1)
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.snap
	s.Status.Servers = append([]reconciler.ServerStatus(nil), s.Status.Servers...)
	return s
}

func (b *tableBackend) Changed() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.changeCh
}

func (b *tableBackend) Detail(_ context.Context, name string) (Detail, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.snap.Status.Get(name); !ok {
		return Detail{}, fmt.Errorf("%w: %s", ErrNotFound, name)
	}
	return b.details[name], nil
}

func (b *tableBackend) Request(_ context.Context, name string, a Action) error {
	b.requests.Add(1)
	b.lastReq.Store(name + " " + string(a))
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.snap.Status.Get(name); !ok {
		return fmt.Errorf("%w: %s", ErrNotFound, name)
	}
	return nil
}

// syntheticFleet is n running servers named s000..., each of the servers
// after the first eight depending on one of the first eight.
func syntheticFleet(n int) Snapshot {
	now := time.Now().Add(-time.Hour)
	snap := Snapshot{Fleet: &spec.Fleet{}}
	snap.Status.Errors = []reconciler.StatusError{}
	for i := range n {
		name := fmt.Sprintf("s%03d", i)
		snap.Status.Servers = append(snap.Status.Servers, reconciler.ServerStatus{
			Name: name, Phase: reconciler.PhaseRunning, Ready: true, PID: 10000 + i, Port: 20000 + i,
			StartedAt: &now, Reason: "ready",
			Conditions: []reconciler.Condition{{Type: reconciler.ConditionReady, Status: reconciler.ConditionTrue, LastTransitionTime: now}},
		})
		var deps []string
		if i >= 8 {
			deps = []string{fmt.Sprintf("s%03d", i%8)}
		}
		snap.Fleet.Servers = append(snap.Fleet.Servers, spec.Server{
			Metadata: spec.ObjectMeta{Name: name},
			Spec:     spec.ServerSpec{Command: []string{"./bin/srv", "-port", strconv.Itoa(20000 + i)}, Port: 20000 + i, DependsOn: deps},
		})
	}
	sort.Slice(snap.Status.Servers, func(i, j int) bool { return snap.Status.Servers[i].Name < snap.Status.Servers[j].Name })
	return snap
}
