package export

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/procfleet/procfleet/spec"
)

// mainPort is the Nomad port label of a server's spec.port.
const mainPort = "main"

// nomad writes <fleet>.nomad.json: one service job, one group per server,
// as the JSON body the Nomad HTTP API (and `nomad job run -json`) accepts.
func (f *fleet) nomad() ([]File, error) {
	job, err := f.nomadJob()
	if err != nil {
		return nil, err
	}
	data, err := json.MarshalIndent(struct{ Job *nomadJob }{job}, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("export nomad: %w", err)
	}
	return []File{{Name: f.opts.name() + ".nomad.json", Data: append(data, '\n')}}, nil
}

// nomadJob builds the job; region and priority are left to the agent.
func (f *fleet) nomadJob() (*nomadJob, error) {
	job := &nomadJob{ID: f.opts.name(), Name: f.opts.name(), Type: "service", Datacenters: []string{"*"}}
	for i := range f.servers {
		g, err := f.nomadGroup(&f.servers[i])
		if err != nil {
			return nil, err
		}
		job.TaskGroups = append(job.TaskGroups, g)
	}
	return job, nil
}

// nomadRuntime replaces the markers of values Nomad gives each allocation.
var nomadRuntime = strings.NewReplacer(markNomadPort, "${NOMAD_PORT_"+mainPort+"}", markNomadIndex, "${NOMAD_ALLOC_INDEX}")

func (f *fleet) nomadGroup(s *spec.Server) (*nomadTaskGroup, error) {
	name := s.Metadata.Name
	// Replicas are allocations of one group (count): each gets its index as
	// NOMAD_ALLOC_INDEX and, with a port, a dynamic port of its own.
	replicated := s.Spec.Replicas != nil
	own := ownVars(portString(s.Spec.Port), "", name)
	if replicated {
		port := ""
		if s.Spec.Port > 0 {
			port = markNomadPort
		}
		own = ownVars(port, markNomadIndex, name+"-"+markNomadIndex)
	}
	v, err := f.resolve(s, own, "Nomad")
	if err != nil {
		return nil, err
	}
	exe, err := f.executable(s, v, "Nomad raw_exec")
	if err != nil {
		return nil, err
	}
	args := append(v.command[1:len(v.command):len(v.command)], v.args...)
	for i, a := range args {
		args[i] = nomadRuntime.Replace(a)
	}
	config := map[string]any{"command": exe}
	if len(args) > 0 {
		config["args"] = args
	}
	if s.Spec.WorkingDir != "" {
		// raw_exec's work_dir (Nomad 1.9 and later); without it the task
		// runs in its allocation's task folder.
		config["work_dir"] = s.Spec.WorkingDir
	}
	task := &nomadTask{
		Name:        name,
		Driver:      "raw_exec",
		Config:      config,
		KillTimeout: time.Duration(intOr(s.Spec.TerminationGracePeriodSeconds, defaultGrace)) * time.Second,
		KillSignal:  "SIGTERM",
	}
	for _, o := range own {
		if o.Name != spec.EnvServer {
			v.env = append(v.env, o)
		}
	}
	if len(v.env) > 0 {
		task.Env = map[string]string{}
		for _, e := range v.env {
			task.Env[e.Name] = nomadRuntime.Replace(e.Value)
		}
	}
	f.warnEnvFilesInline(s, "job")
	f.nomadInterpolation(s)
	for _, ref := range f.loopbackRefs(s, v) {
		f.warn(name, ref[0], "refers to %s, the port of %s on this machine; under Nomad the groups may be placed on different nodes (pin them with a constraint, or find %s through service discovery)", ref[1], ref[2], ref[2])
	}
	f.warnKillTimeout(s, "Nomad")

	g := &nomadTaskGroup{Name: name, Count: replicas(s), Tasks: []*nomadTask{task}}
	if len(s.Metadata.Labels) > 0 {
		g.Meta = map[string]string{}
		for k, v := range s.Metadata.Labels {
			g.Meta[k] = v
		}
	}

	ports := map[int]string{}
	var reserved, dynamic []nomadPort
	switch {
	case s.Spec.Port > 0 && replicated:
		dynamic = append(dynamic, nomadPort{Label: mainPort})
	case s.Spec.Port > 0:
		ports[s.Spec.Port] = mainPort
		reserved = append(reserved, nomadPort{Label: mainPort, Value: s.Spec.Port})
	}
	// A probe without a port probes the allocation's own port; one written
	// as a number is that static port, as procfleet uses it for every
	// replica.
	portLabel := func(p probe) string {
		if p.ownPort && replicated {
			return mainPort
		}
		if l, ok := ports[p.port]; ok {
			return l
		}
		l := fmt.Sprintf("probe_%d", p.port)
		ports[p.port] = l
		reserved = append(reserved, nomadPort{Label: l, Value: p.port})
		return l
	}

	svc := &nomadService{Name: name, Provider: "nomad"}
	switch {
	case s.Spec.Port > 0 && replicated:
		svc.PortLabel = mainPort
		f.warn(name, "spec.replicas", "each of the %d allocations gets a dynamic port from Nomad (NOMAD_PORT_%s, given to the server as PORT), not %d + index; find them through the service %s", replicas(s), mainPort, s.Spec.Port, name)
	case s.Spec.Port > 0:
		svc.PortLabel = mainPort
		f.warn(name, "spec.port", "%d is reserved as a static port on the node; the server must listen on the node's address, not only on loopback, for Nomad's checks and other nodes to reach it", s.Spec.Port)
	}
	r, hasReady := readiness(s)
	l, hasLive := liveness(s)
	if (hasReady && r.kind == "exec") || (hasLive && l.kind == "exec") {
		svc.Provider = "consul"
		f.warn(name, "spec.readinessProbe/livenessProbe", "an exec probe becomes a script check, which only the Consul service provider runs; the service is registered in Consul")
	}
	health := "task_states"
	if hasReady {
		c, err := f.nomadCheck(s, "spec.readinessProbe", "ready", r, svc.Provider, portLabel)
		if err != nil {
			return nil, err
		}
		if r.initialDelay > 0 {
			f.warn(name, "spec.readinessProbe.initialDelaySeconds", "%d: Nomad checks have no initial delay for readiness; dropped", r.initialDelay)
		}
		svc.Checks = append(svc.Checks, *c)
		health = "checks"
	}
	if hasLive {
		c, err := f.nomadCheck(s, "spec.livenessProbe", "alive", l, svc.Provider, portLabel)
		if err != nil {
			return nil, err
		}
		// A failing liveness check restarts the task after failureThreshold
		// results, counting from initialDelaySeconds; it does not decide the
		// deployment's health (readiness does).
		c.CheckRestart = &nomadCheckRestart{Limit: l.failure, Grace: time.Duration(l.initialDelay) * time.Second}
		c.OnUpdate = "ignore"
		c.FailuresBeforeCritical, c.SuccessBeforePassing = 0, 0
		if l.success != 1 {
			f.warn(name, "spec.livenessProbe.successThreshold", "%d: Nomad's check_restart has no success threshold; dropped", l.success)
		}
		svc.Checks = append(svc.Checks, *c)
	}
	if len(reserved) > 0 || len(dynamic) > 0 {
		g.Networks = []*nomadNetwork{{Mode: "host", ReservedPorts: reserved, DynamicPorts: dynamic}}
	}
	if len(svc.Checks) > 0 || s.Spec.Port > 0 {
		task.Services = []*nomadService{svc}
	}

	startup := time.Duration(intOr(s.Spec.StartupTimeoutSeconds, defaultStartupTimeout)) * time.Second
	progress := 10 * time.Minute
	if startup+time.Minute > progress {
		progress = startup + time.Minute
	}
	// min_healthy_time is minReadySeconds: healthy, and still so after it.
	g.Update = &nomadUpdateStrategy{
		HealthCheck:      health,
		MinHealthyTime:   s.Spec.MinReady(),
		HealthyDeadline:  startup,
		ProgressDeadline: progress,
	}

	if err := f.nomadRestart(s, g); err != nil {
		return nil, err
	}
	if len(s.Spec.DependsOn) > 0 {
		f.warn(name, "spec.dependsOn", "Nomad starts the groups of a job together and does not hold %s back until %s %s healthy; the server must retry", name, strings.Join(s.Spec.DependsOn, ", "), isAre(len(s.Spec.DependsOn)))
		for i, dep := range s.Spec.DependsOn {
			if _, ok := f.byName[dep]; !ok {
				return nil, fmt.Errorf("export nomad %s: spec.dependsOn[%d]: no server %q in the fleet", name, i, dep)
			}
		}
	}
	return g, nil
}

// nomadCheck maps one probe. For the readiness check the returned value's
// thresholds are set; the liveness caller adjusts them.
func (f *fleet) nomadCheck(s *spec.Server, field, checkName string, p probe, provider string, portLabel func(probe) string) (*nomadCheck, error) {
	name := s.Metadata.Name
	if err := checkProbe(name, field, p); err != nil {
		return nil, err
	}
	c := &nomadCheck{
		Name:     checkName,
		Interval: time.Duration(p.period) * time.Second,
		Timeout:  time.Duration(p.timeout) * time.Second,
	}
	switch p.kind {
	case "httpGet":
		c.Type, c.Protocol, c.Path, c.Method = "http", "http", p.path, "GET"
		c.PortLabel = portLabel(p)
	case "tcpSocket":
		c.Type = "tcp"
		c.PortLabel = portLabel(p)
	case "exec":
		exe, err := f.resolveExecutable(s, field+".exec.command", p.command[0], "a Nomad script check")
		if err != nil {
			return nil, err
		}
		c.Type, c.Command, c.Args = "script", exe, p.command[1:]
	}
	if p.host != "" && !isLoopbackHost(p.host) {
		f.warn(name, field+"."+p.kind+".host", "%q: Nomad checks the service's address; the host is dropped", p.host)
	}
	if provider == "consul" {
		if p.failure > 1 {
			c.FailuresBeforeCritical = p.failure
		}
		if p.success > 1 {
			c.SuccessBeforePassing = p.success
		}
	} else if checkName == "ready" {
		if p.failure != 1 {
			f.warn(name, field+".failureThreshold", "%d: Nomad's own checks have no thresholds (Consul's do); one failed check marks the service unhealthy", p.failure)
		}
		if p.success != 1 {
			f.warn(name, field+".successThreshold", "%d: Nomad's own checks have no thresholds (Consul's do); one passing check marks the service healthy", p.success)
		}
	}
	return c, nil
}

// nomadRestart maps restartPolicy. Always restarts without end (mode
// "delay"); Never neither restarts nor reschedules.
func (f *fleet) nomadRestart(s *spec.Server, g *nomadTaskGroup) error {
	name := s.Metadata.Name
	delay, interval := time.Second, 5*time.Minute
	attempts, mode := 5, "delay"
	switch rp := restartPolicy(s); rp {
	case spec.RestartAlways:
	case spec.RestartOnFailure:
		f.warn(name, "spec.restartPolicy", "OnFailure: a Nomad service task is restarted after any exit, code 0 included (only batch jobs finish on success); mapped as Always")
	case spec.RestartNever:
		f.warn(name, "spec.restartPolicy", "Never: the task is neither restarted nor rescheduled; when it exits, even with code 0, Nomad marks its allocation failed")
		attempts, mode = 0, "fail"
		g.ReschedulePolicy = &nomadReschedulePolicy{Attempts: 0, Unlimited: false}
	default:
		return fmt.Errorf("export nomad %s: spec.restartPolicy: unknown value %q", name, rp)
	}
	g.RestartPolicy = &nomadRestartPolicy{Attempts: attempts, Interval: interval, Delay: delay, Mode: mode}
	return nil
}

// nomadInterpolation warns about "${...}" in argv and env: Nomad replaces
// references it knows (NOMAD_*, env, attr., meta., node.) and has no escape.
func (f *fleet) nomadInterpolation(s *spec.Server) {
	check := func(field, v string) {
		if strings.Contains(v, "${") {
			f.warn(s.Metadata.Name, field, "%q: Nomad interpolates ${...} in task config and env and has no escape; a reference Nomad knows will be replaced", v)
		}
	}
	for i, a := range s.Spec.Command {
		check(fmt.Sprintf("spec.command[%d]", i), a)
	}
	for i, a := range s.Spec.Args {
		check(fmt.Sprintf("spec.args[%d]", i), a)
	}
	for _, e := range s.Spec.Env {
		check("spec.env["+e.Name+"]", e.Value)
	}
}

// executable returns the absolute path of the server's command[0] after
// expansion; see resolveExecutable.
func (f *fleet) executable(s *spec.Server, v view, engine string) (string, error) {
	var exe string
	if len(v.command) > 0 {
		exe = v.command[0]
	}
	return f.resolveExecutable(s, "spec.command", exe, engine)
}

// resolveExecutable makes exe, the program of the argv at field, absolute
// the way procfleet runs it: a relative path with a slash against
// workingDir; a bare name is left for the engine's search path, with a
// warning since that path is not the user's $PATH.
func (f *fleet) resolveExecutable(s *spec.Server, field, exe, engine string) (string, error) {
	name := s.Metadata.Name
	switch {
	case exe == "":
		return "", fmt.Errorf("export %s: %s: empty", name, field)
	case filepath.IsAbs(exe):
		return exe, nil
	case strings.Contains(exe, "/"):
		if s.Spec.WorkingDir == "" || !filepath.IsAbs(s.Spec.WorkingDir) {
			return "", fmt.Errorf("export %s: %s[0]: %q is relative and spec.workingDir is not an absolute path; %s needs an absolute executable path", name, field, exe, engine)
		}
		return filepath.Join(s.Spec.WorkingDir, exe), nil
	default:
		f.warn(name, field+"[0]", "%q is looked up in %s's search path, not in your $PATH; write an absolute path to be sure of the binary", exe, engine)
		return exe, nil
	}
}

func isAre(n int) string {
	if n == 1 {
		return "is"
	}
	return "are"
}
