package reconciler

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/procfleet/procfleet/internal/api"
	"github.com/procfleet/procfleet/spec"
)

// APIBackend serves the running reconciler over the state folder's socket
// (internal/api): status, reload (apply), down and events. It is only
// meaningful while Run runs.
func (r *Reconciler) APIBackend() api.Backend { return apiBackend{r} }

type apiBackend struct{ r *Reconciler }

func (b apiBackend) Status(_ context.Context, names []string) (any, error) {
	return b.r.statusOf(names)
}

func (b apiBackend) Reload(ctx context.Context, wait bool, timeout time.Duration) (any, error) {
	st, err := b.r.Reload(ctx, wait, timeout)
	return NewApplyResult(st, err), apiError(err)
}

func (b apiBackend) Down(ctx context.Context, names []string) (any, error) {
	st, err := b.r.DownServers(ctx, names)
	return st, apiError(err)
}

func (b apiBackend) Events(_ context.Context, name string) (any, error) {
	return b.r.Events(name)
}

func (b apiBackend) Verb(ctx context.Context, verb string, names []string, wait bool, timeout time.Duration) (any, error) {
	st, err := b.r.verbThroughAPI(ctx, verb, names, wait, timeout)
	return st, apiError(err)
}

// Events returns a server's recent events, oldest first.
func (r *Reconciler) Events(name string) ([]Event, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.servers[name]
	if s == nil {
		return nil, fmt.Errorf("%w: no server %s", api.ErrNotFound, name)
	}
	return s.events.list(), nil
}

// apiError maps the reconciler's outcomes to the API's status codes.
func apiError(err error) error {
	var nc *NotConvergedError
	var de *DownError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &nc) && nc.Cause != nil:
		return fmt.Errorf("%w: %w", nc.Cause, api.ErrFailed)
	case errors.As(err, &nc), errors.As(err, &de), errors.As(err, new(spec.ErrorList)), errors.As(err, new(*RefusedError)):
		// Not converged, not stopped, or fleet files that do not load (the
		// last good fleet stays in force): it ran but did not succeed.
		return fmt.Errorf("%w: %w", err, api.ErrFailed)
	}
	return err
}

// statusOf is Status restricted to names (all when empty; a server's
// name stands for all its instances); an unknown name is an
// *UnknownNameError (api.ErrNotFound).
func (r *Reconciler) statusOf(names []string) (Status, error) {
	st := r.Status()
	if len(names) == 0 {
		return st, nil
	}
	known := make([]string, len(st.Servers))
	for i, s := range st.Servers {
		known[i] = s.Name
	}
	r.mu.Lock()
	replicated := r.replicatedLocked()
	r.mu.Unlock()
	names, err := ExpandNames(names, known, replicated)
	if err != nil {
		return Status{}, err
	}
	out := Status{Errors: st.Errors, Servers: []ServerStatus{}}
	for _, n := range names {
		if s, ok := st.Get(n); ok {
			out.Servers = append(out.Servers, s)
		}
	}
	sort.Slice(out.Servers, func(i, j int) bool { return out.Servers[i].Name < out.Servers[j].Name })
	return out, nil
}

// Reload re-reads the fleet files, lifts every hold of down, and looks at
// every server again (`apply` while up runs). With wait it returns once
// every server has been looked at and settled (settleWait); a timeout of 0
// means no bound but ctx.
func (r *Reconciler) Reload(ctx context.Context, wait bool, timeout time.Duration) (Status, error) {
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	r.mu.Lock()
	fw := r.fw
	save := r.liftAllLocked() // apply lifts every stop
	since := r.begun
	r.mu.Unlock()
	if fw == nil {
		return Status{}, errors.New("reload: the reconciler is not running")
	}
	if save {
		r.saveHolds()
	}
	began := r.clock.Now()
	if err := fw.Reload(ctx); err != nil {
		return Status{}, err
	}
	if _, errs := fw.Fleet(); len(errs) > 0 {
		return r.Status(), fmt.Errorf("the fleet files do not load; the last good fleet stays in force: %w", errs)
	}
	names := r.names()
	for _, n := range names {
		r.queue.Add(n)
	}
	if !wait {
		return r.Status(), nil
	}
	bad, why, cause := r.waitSettled(ctx, names, since, began, settleWait)
	st := r.Status()
	if len(bad) == 0 {
		return st, nil
	}
	return st, &NotConvergedError{Servers: bad, Why: why, Cause: cause}
}

// DownServers stops the named servers (all when names is empty), dependents
// first, and keeps the declared ones stopped until their files change, a
// Reload, or a Start or Restart of them; named ones as Stop keeps them
// (saved in the state folder: a restarted up keeps them stopped), all of
// them only until the reconciler restarts. It returns once each has
// stopped; the error is a *DownError naming those that could not be, or
// an *UnknownNameError.
func (r *Reconciler) DownServers(ctx context.Context, names []string) (Status, error) {
	r.mu.Lock()
	running := r.fw != nil
	r.mu.Unlock()
	if !running {
		return Status{}, errors.New("down: the reconciler is not running")
	}
	targets, err := r.downTargets(names)
	if err != nil {
		return Status{}, err
	}
	return r.stopAndWait(ctx, targets, len(names) > 0)
}
