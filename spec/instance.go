package spec

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Variables procfleet sets in every instance's environment. PORT and
// PROCFLEET_REPLICA and PROCFLEET_SERVER are set from the spec (and $(NAME)
// can refer to them); PROCFLEET_INSTANCE is the ownership token the
// actuator sets at spawn. A fleet file may not set the PROCFLEET_ ones.
const (
	EnvPort     = "PORT"
	EnvReplica  = "PROCFLEET_REPLICA"
	EnvServer   = "PROCFLEET_SERVER"
	EnvInstance = "PROCFLEET_INSTANCE"
)

// reservedEnv are the names a fleet file may not set.
var reservedEnv = []string{EnvInstance, EnvReplica, EnvServer}

// Instance is one process the fleet declares: a server without replicas,
// or one replica of a replicated server. It is what the reconciler runs.
// Instances are computed by Load and shared: treat them as read-only.
type Instance struct {
	// Name is the server's name, or <name>-<Index> for a replica.
	Name string
	// Server is the declared server; every replica of it points to the
	// same one.
	Server *Server
	// ReplicaOf is the server's name for a replica, "" for a server
	// without replicas.
	ReplicaOf string
	// Index is the replica's index (0 for a server without replicas).
	Index int
	// Port is the instance's port: spec.port + Index; 0 for none.
	Port int
	// Command and Args are the server's, after $(NAME) expansion.
	Command, Args []string
	// Env is what procfleet sets on top of its own environment, in order,
	// each name once: the env files' variables, then spec.env, then PORT,
	// PROCFLEET_REPLICA and PROCFLEET_SERVER (which win over a file's or
	// entry's variable of the same name). Values are expanded.
	Env []Var
	// WorkingDir is absolute after Load.
	WorkingDir string
	// Hash is the spec hash of the instance: command and args after
	// expansion, the variables set by envFile and env (values after
	// expansion, but with references to procfleet's own inherited
	// environment left as written), workingDir and port. A change to it
	// replaces the instance; nothing else does.
	Hash string
	// MinReady is how long the instance must stay ready before it counts
	// as Ready (spec.minReadySeconds and its default).
	MinReady time.Duration
	// Readiness is the readiness probe in force, its ports resolved: the
	// declared probe (a probe without a port on Port), else a TCP connect
	// to Port, else nil ("running is ready").
	Readiness *Probe
	// Liveness is the declared liveness probe with its ports resolved, or nil.
	Liveness *Probe
}

// Argv is Command then Args.
func (in *Instance) Argv() []string {
	argv := make([]string, 0, len(in.Command)+len(in.Args))
	return append(append(argv, in.Command...), in.Args...)
}

// EnvList is Env as "NAME=value" strings, to be added to procfleet's own
// environment when spawning the instance (and running its exec probes).
func (in *Instance) EnvList() []string {
	out := make([]string, len(in.Env))
	for i, v := range in.Env {
		out[i] = v.Name + "=" + v.Value
	}
	return out
}

// Replicated reports whether the instance is a replica of a server with
// spec.replicas.
func (in *Instance) Replicated() bool { return in.ReplicaOf != "" }

// InstanceName is the name of replica index of the server called name.
func InstanceName(name string, index int) string { return name + "-" + strconv.Itoa(index) }

// InstanceNames lists the names of s's instances: its name, or
// <name>-0 ... <name>-<n-1> with spec.replicas.
func (s *Server) InstanceNames() []string {
	if s.Spec.Replicas == nil {
		return []string{s.Metadata.Name}
	}
	out := make([]string, 0, max(0, *s.Spec.Replicas))
	for i := range max(0, *s.Spec.Replicas) {
		out = append(out, InstanceName(s.Metadata.Name, i))
	}
	return out
}

// Instances lists the fleet's instances, in server-name order and by index
// within a server. A server with replicas: 0 has none. The slice is
// computed once by Load and shared.
func (f *Fleet) Instances() []Instance {
	if f.instances != nil || len(f.Servers) == 0 {
		return f.instances
	}
	return instancesOf(f.Servers, lookupIn(f.Environ))
}

// Instance returns the instance called name ("api" or "api-1").
func (f *Fleet) Instance(name string) (*Instance, bool) {
	all := f.Instances()
	for i := range all {
		if all[i].Name == name {
			return &all[i], true
		}
	}
	return nil, false
}

func instancesOf(servers []Server, inherited func(string) (string, bool)) []Instance {
	n := 0
	for i := range servers {
		n += len(servers[i].InstanceNames())
	}
	out := make([]Instance, 0, n)
	for i := range servers {
		out = servers[i].appendInstances(out, inherited)
	}
	return out
}

// appendInstances appends s's instances to out, by index.
func (s *Server) appendInstances(out []Instance, inherited func(string) (string, bool)) []Instance {
	if s.Spec.Replicas == nil {
		return append(out, s.instance(-1, inherited))
	}
	for j := range max(0, *s.Spec.Replicas) {
		out = append(out, s.instance(j, inherited))
	}
	return out
}

// lookupIn makes a lookup over "NAME=value" strings (the first of a name
// wins, as getenv does).
func lookupIn(environ []string) func(string) (string, bool) {
	m := make(map[string]string, len(environ))
	for _, kv := range environ {
		k, v, ok := strings.Cut(kv, "=")
		if _, seen := m[k]; ok && !seen {
			m[k] = v
		}
	}
	return func(name string) (string, bool) {
		v, ok := m[name]
		return v, ok
	}
}

// instance builds replica index of s; index -1 means s has no replicas.
func (s *Server) instance(index int, inherited func(string) (string, bool)) Instance {
	name, port := s.Metadata.Name, s.Spec.Port
	in := Instance{Server: s, WorkingDir: s.Spec.WorkingDir}
	if index >= 0 {
		in.ReplicaOf, in.Index, name = name, index, InstanceName(name, index)
		if port > 0 {
			port += index
		}
	}
	in.Name, in.Port = name, port
	own := s.procfleetVars(name, index, port)
	r := s.Resolve(own, inherited, nil)
	in.Command, in.Args, in.Env = r.Command, r.Args, r.Env
	in.Hash = s.hashFor(own, port)
	in.MinReady = s.Spec.MinReady()
	in.Readiness = resolvedProbe(s.Spec.EffectiveReadiness(), port)
	in.Liveness = resolvedProbe(s.Spec.LivenessProbe, port)
	return in
}

// procfleetVars are the variables procfleet sets for the instance called
// name: PORT with a port, PROCFLEET_REPLICA for a replica (index >= 0),
// PROCFLEET_SERVER always.
func (s *Server) procfleetVars(name string, index, port int) []Var {
	var own []Var
	if port > 0 {
		own = append(own, Var{Name: EnvPort, Value: strconv.Itoa(port), From: VarSource{Kind: FromProcfleet, Field: "spec.port"}})
	}
	if index >= 0 {
		own = append(own, Var{Name: EnvReplica, Value: strconv.Itoa(index), From: VarSource{Kind: FromProcfleet, Field: "spec.replicas"}})
	}
	return append(own, Var{Name: EnvServer, Value: name, From: VarSource{Kind: FromProcfleet, Field: "metadata.name"}})
}

// resolvedProbe copies p with its ports of 0 set to port.
func resolvedProbe(p *Probe, port int) *Probe {
	if p == nil {
		return nil
	}
	c := *p
	if h := c.HTTPGet; h != nil {
		hc := *h
		if hc.Port == 0 {
			hc.Port = port
		}
		c.HTTPGet = &hc
	}
	if t := c.TCPSocket; t != nil {
		tc := *t
		if tc.Port == 0 {
			tc.Port = port
		}
		c.TCPSocket = &tc
	}
	if e := c.Exec; e != nil {
		c.Exec = &ExecAction{Command: slices.Clone(e.Command)}
	}
	return &c
}

// Resolved is a server's command, args and environment with $(NAME)
// expanded.
type Resolved struct {
	Command, Args []string
	// Env is as Instance.Env: env files, then env, then the variables
	// given as own, each name once.
	Env []Var
}

// Reference is a $(NAME) that did not resolve, and where it is.
type Reference struct {
	Name  string
	Field string // "spec.command[0]", "spec.args[1]", "spec.env[2].value"
	// Later is the index of the spec.env entry that sets Name after the
	// reference (a reference sees only earlier entries), or -1.
	Later int
}

// Resolve expands s's command, args and env values. own are the variables
// procfleet sets (PORT, PROCFLEET_REPLICA, PROCFLEET_SERVER): every
// reference may use them and they win over a variable of the same name.
// inherited looks up procfleet's own environment; nil leaves references to
// it as written, which is what the spec hash covers and what export
// writes. An env value sees the variables set before it (inherited, env
// files, earlier entries, own); command and args see all of them.
// unresolved, when not nil, is called for every reference left as written.
func (s *Server) Resolve(own []Var, inherited func(string) (string, bool), unresolved func(Reference)) Resolved {
	ownValue := make(map[string]string, len(own))
	for _, v := range own {
		ownValue[v.Name] = v.Value
	}
	set := map[string]int{} // name -> index in env
	var env []Var
	put := func(v Var) {
		if _, mine := ownValue[v.Name]; mine || slices.Contains(reservedEnv, v.Name) {
			return // procfleet's own: never taken from a file
		}
		if i, ok := set[v.Name]; ok {
			env[i] = v
			return
		}
		set[v.Name] = len(env)
		env = append(env, v)
	}
	lookup := func(name string) (string, bool) {
		if v, ok := ownValue[name]; ok {
			return v, true
		}
		if i, ok := set[name]; ok {
			return env[i].Value, true
		}
		if inherited != nil {
			return inherited(name)
		}
		return "", false
	}
	report := func(field string, later func(string) int) func(string) {
		if unresolved == nil {
			return nil
		}
		return func(name string) { unresolved(Reference{Name: name, Field: field, Later: later(name)}) }
	}
	for i, f := range s.EnvFiles {
		field := fmt.Sprintf("spec.envFile[%d]", i)
		for _, v := range f.Vars {
			v.From.File, v.From.Field = f.Name, field
			put(v)
		}
	}
	for j, e := range s.Spec.Env {
		field := fmt.Sprintf("spec.env[%d]", j)
		later := func(name string) int {
			for k := j; k < len(s.Spec.Env); k++ {
				if s.Spec.Env[k].Name == name {
					return k
				}
			}
			return -1
		}
		value := Expand(e.Value, lookup, report(field+".value", later))
		put(Var{Name: e.Name, Value: value, From: VarSource{Kind: FromEnv, File: s.Source.File, Line: lineOf(s, field), Field: field}})
	}
	none := func(string) int { return -1 }
	expandAll := func(field string, in []string) []string {
		if in == nil {
			return nil
		}
		out := make([]string, len(in))
		for i, a := range in {
			var rep func(string)
			if unresolved != nil { // the field's name costs an allocation
				rep = report(fmt.Sprintf("%s[%d]", field, i), none)
			}
			out[i] = Expand(a, lookup, rep)
		}
		return out
	}
	r := Resolved{Command: expandAll("spec.command", s.Spec.Command), Args: expandAll("spec.args", s.Spec.Args)}
	r.Env = append(env, own...)
	return r
}

// EnvFiles lists the env files the fleet's servers read (absolute paths,
// sorted, each once): what a watcher must watch besides the fleet files.
func (f *Fleet) EnvFiles() []string {
	var out []string
	for i := range f.Servers {
		for _, e := range f.Servers[i].EnvFiles {
			out = append(out, e.Path)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// MinReady is how long a server must stay ready before it counts as Ready:
// minReadySeconds when set; else 0 when it has a readiness probe (declared,
// or the TCP connect to its port) and 1 s when readiness is "running".
func (s ServerSpec) MinReady() time.Duration {
	if s.MinReadySeconds != nil {
		return time.Duration(*s.MinReadySeconds) * time.Second
	}
	if s.EffectiveReadiness() != nil {
		return 0
	}
	return DefaultRunningMinReady
}
