package reconciler

import (
	"context"
	"fmt"
	"time"

	"github.com/procfleet/procfleet/observe"
	"github.com/procfleet/procfleet/spec"
)

// probeFunc turns a declared probe into a check.
func probeFunc(p *spec.Probe, srv *spec.Server) func(ctx context.Context) observe.ProbeResult {
	if p == nil {
		return nil
	}
	timeout := p.Timeout()
	port := func(n int) int {
		if n == 0 {
			return srv.Spec.Port
		}
		return n
	}
	switch {
	case p.HTTPGet != nil:
		g := *p.HTTPGet
		return func(ctx context.Context) observe.ProbeResult {
			return observe.ProbeHTTP(ctx, g.Host, port(g.Port), g.Path, timeout)
		}
	case p.TCPSocket != nil:
		t := *p.TCPSocket
		return func(ctx context.Context) observe.ProbeResult {
			return observe.ProbeTCP(ctx, t.Host, port(t.Port), timeout)
		}
	case p.Exec != nil:
		argv := append([]string(nil), p.Exec.Command...)
		dir, env := srv.Spec.WorkingDir, envList(srv.Spec.Env)
		return func(ctx context.Context) observe.ProbeResult {
			return observe.ProbeExec(ctx, argv, dir, env, timeout)
		}
	}
	return nil
}

// readinessCheck is the server's effective readiness check: its declared
// probe, else TCP on its port, else nil ("running is ready").
func readinessCheck(srv *spec.Server) func(ctx context.Context) observe.ProbeResult {
	return probeFunc(srv.Spec.EffectiveReadiness(), srv)
}

// startProbes runs the declared readiness and liveness probes of a tracked
// server until it stops. A server without declared probes gets none: it
// costs nothing between resyncs.
func (r *Reconciler) startProbes(ctx context.Context, s *server, srv *spec.Server, t *tracked) {
	rp, lp := srv.Spec.ReadinessProbe, srv.Spec.LivenessProbe
	if rp == nil && lp == nil {
		return
	}
	pctx, cancel := context.WithCancel(ctx)
	r.mu.Lock()
	// Shutting down: teardown has cancelled (or is about to cancel, under
	// this lock) every probe it knows of and then waits for them; a probe
	// started after that would never end under Converge, whose context
	// outlives teardown (apply --wait hung on a readiness wait that ended
	// as teardown began).
	if s.tracked != t || r.queue.ShuttingDown() {
		r.mu.Unlock()
		cancel()
		return
	}
	if s.probeCancel != nil {
		s.probeCancel()
	}
	s.probeCancel = cancel
	r.mu.Unlock()
	if rp != nil {
		r.starts.Go(func() { r.runProbe(pctx, s, t, rp, srv, false) })
	}
	if lp != nil {
		r.starts.Go(func() { r.runProbe(pctx, s, t, lp, srv, true) })
	}
}

// runProbe runs one probe every period; readiness flips after
// failureThreshold failures or successThreshold successes; liveness marks
// the server for a restart after failureThreshold failures. Only changes
// mark the server dirty.
func (r *Reconciler) runProbe(ctx context.Context, s *server, t *tracked, p *spec.Probe, srv *spec.Server, liveness bool) {
	check := probeFunc(p, srv)
	failThreshold := p.FailureThreshold
	if failThreshold <= 0 {
		failThreshold = 3
	}
	okThreshold := p.SuccessThreshold
	if okThreshold <= 0 {
		okThreshold = 1
	}
	if d := p.InitialDelay(); d > 0 && liveness && !r.sleep(ctx, d) {
		return
	}
	tick := r.clock.NewTicker(p.Period())
	defer tick.Stop()
	fails, oks := 0, 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C():
		}
		res := check(ctx)
		r.cfg.Metrics.observeProbe(s.name, liveness, res)
		if ctx.Err() != nil {
			return
		}
		if res.OK {
			fails, oks = 0, oks+1
		} else {
			fails, oks = fails+1, 0
		}
		r.mu.Lock()
		if s.tracked != t {
			r.mu.Unlock()
			return
		}
		var changed, becameReady bool
		var msg string
		switch {
		case liveness && fails == failThreshold:
			s.livenessFailed, changed = true, true
			msg = fmt.Sprintf("liveness probe failed %d times: %s", fails, res.Message)
		case !liveness && fails == failThreshold && s.isReady:
			changed = r.setReadyLocked(s, false, "ReadinessProbeFailed", res.Message)
			msg = fmt.Sprintf("readiness probe failed %d times: %s", fails, res.Message)
		case !liveness && oks == okThreshold && !s.isReady:
			changed = r.setReadyLocked(s, true, "", "")
			becameReady, msg = changed, "readiness probe passed"
		}
		r.mu.Unlock()
		if !changed {
			continue
		}
		switch {
		case liveness:
			r.event(s.name, EventWarning, ReasonUnhealthy, msg, false)
		case becameReady:
			r.event(s.name, EventNormal, ReasonReady, msg, false)
			r.enqueueDependents(s.name)
		default:
			r.event(s.name, EventWarning, ReasonNotReady, msg, false)
		}
		r.queue.Add(s.name)
		if liveness {
			return
		}
	}
}

var _ = time.Second
