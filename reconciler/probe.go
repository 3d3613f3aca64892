package reconciler

import (
	"context"
	"fmt"

	"github.com/procfleet/procfleet/observe"
	"github.com/procfleet/procfleet/spec"
)

// probeFunc turns a probe of an instance into a check: a port left 0 is
// the instance's, an exec probe runs in its folder with its environment.
func probeFunc(p *spec.Probe, in *spec.Instance) func(ctx context.Context) observe.ProbeResult {
	if p == nil {
		return nil
	}
	timeout := p.Timeout()
	port := func(n int) int {
		if n == 0 {
			return in.Port
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
		dir, env := in.WorkingDir, in.EnvList()
		return func(ctx context.Context) observe.ProbeResult {
			return observe.ProbeExec(ctx, argv, dir, env, timeout)
		}
	}
	return nil
}

// readinessCheck is the instance's effective readiness check: its
// declared probe, else TCP on its port, else nil ("running is ready").
func readinessCheck(d Desired) func(ctx context.Context) observe.ProbeResult {
	in := instanceFor(d)
	return probeFunc(ReadinessProbe(in), in)
}

// ReadinessProbe is the readiness probe in force for in: spec's
// in.Readiness, except that the default one (a TCP connect, when none is
// declared) goes to the instance's own port. spec gives every replica the
// default probe of spec.port (ServerSpec.EffectiveReadiness), which would
// call api-1 Ready as soon as api-0 listens; until spec resolves it, the
// default is aimed here.
func ReadinessProbe(in *spec.Instance) *spec.Probe {
	p := in.Readiness
	if p == nil || p.TCPSocket == nil || in.Port <= 0 || (in.Server != nil && in.Server.Spec.ReadinessProbe != nil) {
		return p
	}
	c, tcp := *p, *p.TCPSocket
	tcp.Port = in.Port
	c.TCPSocket = &tcp
	return &c
}

// instanceFor is d's instance; for a Desired made without one (tests), the
// server's one instance as spec would make it.
func instanceFor(d Desired) *spec.Instance {
	if d.Instance != nil {
		return d.Instance
	}
	f := spec.Fleet{Servers: []spec.Server{*d.Server}}
	if insts := f.Instances(); len(insts) > 0 {
		return &insts[0]
	}
	return &spec.Instance{Name: d.Server.Metadata.Name, Server: d.Server, Port: d.Server.Spec.Port}
}

// ProbeOnce runs one probe of an instance once, as up runs it (p is one of
// in.Readiness, in.Liveness); false when p is nil. status and describe run
// readiness and liveness with it.
func ProbeOnce(ctx context.Context, in *spec.Instance, p *spec.Probe) (observe.ProbeResult, bool) {
	check := probeFunc(p, in)
	if check == nil {
		return observe.ProbeResult{}, false
	}
	return check(ctx), true
}

// startProbes runs the declared readiness and liveness probes of a tracked
// server until it stops. A server without declared probes gets none: it
// costs nothing between resyncs. Probes only post what they find.
func (r *Reconciler) startProbes(ctx context.Context, s *server, d Desired, t *tracked) {
	in := instanceFor(d)
	var rp *spec.Probe
	if d.Server.Spec.ReadinessProbe != nil {
		rp = ReadinessProbe(in) // declared, its ports resolved
	}
	lp := in.Liveness
	if rp == nil && lp == nil {
		return
	}
	// Shutting down: teardown cancels every probe it knows of and then
	// waits for them; one started after that would never end.
	if s.tracked != t || r.queue.ShuttingDown() {
		return
	}
	pctx, cancel := context.WithCancel(ctx)
	r.replaceProbeCancel(s, cancel)
	gen := s.gen
	if rp != nil {
		r.starts.Go(func() { r.runProbe(pctx, s.name, gen, rp, in, false) })
	}
	if lp != nil {
		r.starts.Go(func() { r.runProbe(pctx, s.name, gen, lp, in, true) })
	}
}

// runProbe runs one probe every period; readiness flips after
// failureThreshold failures or successThreshold successes; liveness fails
// after failureThreshold failures. Only flips are posted.
func (r *Reconciler) runProbe(ctx context.Context, name string, gen uint64, p *spec.Probe, in *spec.Instance, liveness bool) {
	check := probeFunc(p, in)
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
	// ready is what this prober last posted; a started server is Ready.
	ready := true
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C():
		}
		res := check(ctx)
		r.cfg.Metrics.observeProbe(name, liveness, res)
		if ctx.Err() != nil {
			return
		}
		if res.OK {
			fails, oks = 0, oks+1
		} else {
			fails, oks = fails+1, 0
		}
		switch {
		case liveness && fails == failThreshold:
			r.post(name, post{kind: postLiveness, gen: gen, message: fmt.Sprintf("liveness probe failed %d times: %s", fails, res.Message)})
			return
		case !liveness && fails == failThreshold && ready:
			ready = false
			r.post(name, post{kind: postReadiness, gen: gen, ok: false, reason: "ReadinessProbeFailed", message: fmt.Sprintf("readiness probe failed %d times: %s", fails, res.Message)})
		case !liveness && oks == okThreshold && !ready:
			ready = true
			r.post(name, post{kind: postReadiness, gen: gen, ok: true, message: "readiness probe passed"})
		}
	}
}
