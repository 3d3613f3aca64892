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

	// DefaultRunningMinReady is minReadySeconds for a server whose
	// readiness is merely "running" (no port, no probe), like supervisord's
	// startsecs=1: a server that exits within its first second is never
	// reported Ready.
	DefaultRunningMinReady = time.Second
)

// SetDefaults fills the fields left empty with their defaults: restart
// policy, timeouts, probe periods and thresholds and the httpGet path "/".
// A probe port left out stays 0, meaning the instance's port (Instance
// resolves it: a replica's probe follows its own port, while a port written
// as a number is used as written). SetDefaults leaves workingDir alone (Load
// resolves it against the file's folder), leaves minReadySeconds unset (see
// ServerSpec.MinReady), and sets nothing that is already set.
func SetDefaults(s *Server) {
	sp := &s.Spec
	if sp.RestartPolicy == "" {
		sp.RestartPolicy = DefaultRestartPolicy
	}
	setInt(&sp.StartupTimeoutSeconds, DefaultStartupTimeoutSeconds)
	setInt(&sp.TerminationGracePeriodSeconds, DefaultTerminationGracePeriodSeconds)
	setInt(&sp.KillTimeoutSeconds, DefaultKillTimeoutSeconds)
	defaultProbe(sp.ReadinessProbe)
	defaultProbe(sp.LivenessProbe)
}

func setInt(p **int, v int) {
	if *p == nil {
		*p = &v
	}
}

func defaultProbe(p *Probe) {
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
	if h := p.HTTPGet; h != nil && h.Path == "" {
		h.Path = DefaultHTTPPath
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
	defaultProbe(p)
	return p
}
