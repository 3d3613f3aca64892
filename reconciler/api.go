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
	return st, apiError(err)
}

func (b apiBackend) Down(ctx context.Context, names []string) (any, error) {
	st, err := b.r.DownServers(ctx, names)
	return st, apiError(err)
}

func (b apiBackend) Events(_ context.Context, name string) (any, error) {
	b.r.mu.Lock()
	defer b.r.mu.Unlock()
	s := b.r.servers[name]
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
	case errors.As(err, &nc), errors.As(err, &de), errors.As(err, new(spec.ErrorList)):
		// Not converged, not stopped, or fleet files that do not load (the
		// last good fleet stays in force): it ran but did not succeed.
		return fmt.Errorf("%w: %w", err, api.ErrFailed)
	}
	return err
}

// statusOf is Status restricted to names (all when empty); an unknown name
// is api.ErrNotFound.
func (r *Reconciler) statusOf(names []string) (Status, error) {
	st := r.Status()
	if len(names) == 0 {
		return st, nil
	}
	out := Status{Errors: st.Errors, Servers: []ServerStatus{}}
	for _, n := range names {
		s, ok := st.Get(n)
		if !ok {
			return Status{}, fmt.Errorf("%w: no server %s", api.ErrNotFound, n)
		}
		out.Servers = append(out.Servers, s)
	}
	sort.Slice(out.Servers, func(i, j int) bool { return out.Servers[i].Name < out.Servers[j].Name })
	return out, nil
}

// waitPasses waits until every server in names has been reconciled after
// pass number since and done(names) holds, or ctx ends. It returns the
// servers still pending.
func (r *Reconciler) waitPasses(ctx context.Context, names []string, since uint64, settled func([]string) []string) []string {
	for {
		ch := r.changes()
		r.mu.Lock()
		var behind []string
		for _, n := range names {
			if s := r.servers[n]; s == nil || s.lastPass <= since {
				behind = append(behind, n)
			}
		}
		r.mu.Unlock()
		pending := behind
		if len(behind) == 0 {
			pending = settled(names)
		}
		if len(pending) == 0 {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return pending
		}
	}
}

// Reload re-reads the fleet files, lifts every hold of down, and looks at
// every server again (`apply` while up runs). With wait it returns once
// every server has been looked at and settled, every declared one Ready
// (Failed, Quarantined and timeout give *NotConvergedError).
func (r *Reconciler) Reload(ctx context.Context, wait bool, timeout time.Duration) (Status, error) {
	r.mu.Lock()
	fw := r.fw
	r.held = map[string]bool{}
	since := r.passes
	r.mu.Unlock()
	if fw == nil {
		return Status{}, errors.New("reload: the reconciler is not running")
	}
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
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	// A quarantined server has settled: it stays as it is until someone
	// acts, so waiting for it would only spend the timeout (apply without
	// up, Converge, does not wait for it either). It is still reported.
	waiting := func([]string) []string {
		r.mu.Lock()
		defer r.mu.Unlock()
		var out []string
		for _, n := range r.notReadyLocked() {
			if s := r.servers[n]; s == nil || s.phase != PhaseQuarantined {
				out = append(out, n)
			}
		}
		return out
	}
	pending := r.waitPasses(ctx, names, since, waiting)
	var cause error
	if len(pending) > 0 {
		cause = ctx.Err()
	}
	st := r.Status()
	notReady := r.notReady()
	if len(notReady) == 0 {
		return st, nil
	}
	bad := map[string]string{}
	for _, n := range notReady {
		if s, ok := st.Get(n); ok {
			bad[n] = describePhase(s)
		} else {
			bad[n] = "not looked at yet"
		}
	}
	return st, &NotConvergedError{Servers: bad, Cause: cause}
}

// notReady lists the declared servers that are not Ready, and the
// undeclared ones still running.
func (r *Reconciler) notReady() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.notReadyLocked()
}

// notReadyLocked is notReady with r.mu held.
func (r *Reconciler) notReadyLocked() []string {
	var out []string
	for n, d := range r.desired {
		s := r.servers[n]
		switch {
		case s == nil:
			out = append(out, n)
		case s.isReady && s.tracked != nil:
		case s.phase == PhaseStopped && d.Server != nil && d.Server.Spec.RestartPolicy != "Always" && s.lastExit != nil:
		default:
			out = append(out, n)
		}
	}
	for n, s := range r.servers {
		if _, ok := r.desired[n]; !ok && (s.tracked != nil || s.starting) {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

// DownServers stops the named servers (all when names is empty), dependents
// first, and keeps the declared ones stopped until the fleet files change,
// a Reload, or the reconciler restarts. It returns once each has stopped;
// the error is a *DownError naming those that could not be.
func (r *Reconciler) DownServers(ctx context.Context, names []string) (Status, error) {
	r.mu.Lock()
	running := r.fw != nil
	r.mu.Unlock()
	if !running {
		return Status{}, errors.New("down: the reconciler is not running")
	}
	all := r.names()
	if len(names) == 0 {
		names = all
	} else {
		known := map[string]bool{}
		for _, n := range all {
			known[n] = true
		}
		for _, n := range names {
			if !known[n] {
				return Status{}, fmt.Errorf("%w: no server %s", api.ErrNotFound, n)
			}
		}
	}
	r.mu.Lock()
	for _, n := range names {
		if _, ok := r.desired[n]; ok {
			r.held[n] = true
		}
	}
	since := r.passes
	r.mu.Unlock()
	for _, n := range names {
		r.queue.Add(n)
	}
	failed := map[string]error{}
	pending := r.waitPasses(ctx, names, since, func(names []string) []string {
		r.mu.Lock()
		defer r.mu.Unlock()
		var out []string
		for _, n := range names {
			s := r.servers[n]
			switch {
			case s == nil: // undeclared and stopped: forgotten
			case s.phase == PhaseQuarantined:
				failed[n] = fmt.Errorf("quarantined (%s): %s", s.reason, s.message)
			case s.phase == PhaseFailed && s.tracked == nil && !s.starting:
				failed[n] = errors.New(s.reason)
			case s.tracked != nil || s.starting || s.phase == PhaseStopping:
				out = append(out, n)
			}
		}
		return out
	})
	for _, n := range pending {
		failed[n] = fmt.Errorf("not stopped yet: %w", ctx.Err())
	}
	st := r.Status()
	if len(failed) > 0 {
		return st, &DownError{Servers: failed}
	}
	return st, nil
}
