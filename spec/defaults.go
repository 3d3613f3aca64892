package spec

import "time"

// Defaults, as DESIGN.md states them.
const (
	DefaultRestartPolicy                 = RestartAlways
	DefaultStartupTimeoutSeconds         = 300
	DefaultTerminationGracePeriodSeconds = 20
	DefaultKillTimeoutSeconds            = 10
	DefaultPeriodSeconds                 = 1
	DefaultTimeoutSeconds                = 1
	DefaultFailureThreshold              = 3
	DefaultSuccessThreshold              = 1
	DefaultHTTPPath                      = "/"
)

// SetDefaults fills the fields left empty with their defaults: restart
// policy, timeouts, probe periods and thresholds, the httpGet path "/", and
// probe ports from spec.port. It leaves workingDir alone (Load resolves it
// against the file's folder) and sets nothing that is already set.
func SetDefaults(s *Server) {
	sp := &s.Spec
	if sp.RestartPolicy == "" {
		sp.RestartPolicy = DefaultRestartPolicy
	}
	setInt(&sp.StartupTimeoutSeconds, DefaultStartupTimeoutSeconds)
	setInt(&sp.TerminationGracePeriodSeconds, DefaultTerminationGracePeriodSeconds)
	setInt(&sp.KillTimeoutSeconds, DefaultKillTimeoutSeconds)
	defaultProbe(sp.ReadinessProbe, sp.Port)
	defaultProbe(sp.LivenessProbe, sp.Port)
}

func setInt(p **int, v int) {
	if *p == nil {
		*p = &v
	}
}

func defaultProbe(p *Probe, port int) {
	if p == nil {
		return
	}
	if p.PeriodSeconds == 0 {
		p.PeriodSeconds = DefaultPeriodSeconds
	}
	if p.TimeoutSeconds == 0 {
		p.TimeoutSeconds = DefaultTimeoutSeconds
	}
	if p.FailureThreshold == 0 {
		p.FailureThreshold = DefaultFailureThreshold
	}
	if p.SuccessThreshold == 0 {
		p.SuccessThreshold = DefaultSuccessThreshold
	}
	if h := p.HTTPGet; h != nil {
		if h.Path == "" {
			h.Path = DefaultHTTPPath
		}
		if h.Port == 0 {
			h.Port = port
		}
	}
	if t := p.TCPSocket; t != nil && t.Port == 0 {
		t.Port = port
	}
}

// Argv is the command line to execute: command, then args.
func (s ServerSpec) Argv() []string {
	argv := make([]string, 0, len(s.Command)+len(s.Args))
	argv = append(argv, s.Command...)
	return append(argv, s.Args...)
}

func seconds(p *int, def int) time.Duration {
	if p == nil {
		return time.Duration(def) * time.Second
	}
	return time.Duration(*p) * time.Second
}

// StartupTimeout bounds the wait for Ready (default 300 s).
func (s ServerSpec) StartupTimeout() time.Duration {
	return seconds(s.StartupTimeoutSeconds, DefaultStartupTimeoutSeconds)
}

// TerminationGracePeriod is the wait after SIGTERM (default 20 s).
func (s ServerSpec) TerminationGracePeriod() time.Duration {
	return seconds(s.TerminationGracePeriodSeconds, DefaultTerminationGracePeriodSeconds)
}

// KillTimeout is the wait after SIGKILL (default 10 s).
func (s ServerSpec) KillTimeout() time.Duration {
	return seconds(s.KillTimeoutSeconds, DefaultKillTimeoutSeconds)
}

func orDefault(v, def int) time.Duration {
	if v == 0 {
		v = def
	}
	return time.Duration(v) * time.Second
}

// Period is the time between two probes (default 1 s).
func (p *Probe) Period() time.Duration { return orDefault(p.PeriodSeconds, DefaultPeriodSeconds) }

// Timeout bounds one probe (default 1 s).
func (p *Probe) Timeout() time.Duration { return orDefault(p.TimeoutSeconds, DefaultTimeoutSeconds) }

// InitialDelay is the wait after start before the first probe (default 0).
func (p *Probe) InitialDelay() time.Duration {
	return time.Duration(p.InitialDelaySeconds) * time.Second
}

// EffectiveReadiness is the readiness probe in force: the declared one, else
// a TCP connect to Port (with default period, timeout and thresholds) when
// Port > 0, else nil, meaning "running is ready".
func (s ServerSpec) EffectiveReadiness() *Probe {
	if s.ReadinessProbe != nil {
		return s.ReadinessProbe
	}
	if s.Port <= 0 {
		return nil
	}
	p := &Probe{TCPSocket: &TCPSocketAction{Port: s.Port}}
	defaultProbe(p, s.Port)
	return p
}
