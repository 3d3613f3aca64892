package export

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/procfleet/procfleet/spec"
)

// Target is an engine to export to.
type Target string

// Targets.
const (
	Kubernetes Target = "kubernetes"
	Nomad      Target = "nomad"
	Systemd    Target = "systemd"
)

// Targets lists the supported targets in the order the CLI shows them.
var Targets = []Target{Kubernetes, Nomad, Systemd}

// ImageLabel is the metadata label that names a server's container image for
// the Kubernetes export (fleet files have no spec.image field).
const ImageLabel = "procfleet.dev/image"

// DefaultWaitImage is the image of the init containers that wait for a
// dependency's Service; it must provide sh, nc (with -z) and sleep.
const DefaultWaitImage = "busybox:1.37"

// DefaultFleetName names the fleet when Options.Name is empty.
const DefaultFleetName = "procfleet"

// Options tune an export. The zero value is usable for Nomad and systemd;
// Kubernetes needs an image for every server.
type Options struct {
	// Name is the fleet's name: the Nomad job ID, the systemd target and unit
	// prefix, and the app.kubernetes.io/part-of label. It must be a DNS label.
	// Default DefaultFleetName.
	Name string
	// Image is the container image of every server without a more specific
	// one (Kubernetes only).
	Image string
	// Images maps a server name to its container image; it wins over the
	// server's ImageLabel label, which wins over Image (Kubernetes only).
	Images map[string]string
	// WaitImage is the image of dependsOn init containers. Default
	// DefaultWaitImage (Kubernetes only).
	WaitImage string
}

func (o Options) name() string {
	if o.Name == "" {
		return DefaultFleetName
	}
	return o.Name
}

func (o Options) waitImage() string {
	if o.WaitImage == "" {
		return DefaultWaitImage
	}
	return o.WaitImage
}

// Warning is a mapping that is not exact: the server, the field of the fleet
// file, and what the target does instead.
type Warning struct {
	Server  string // empty for the fleet as a whole
	Field   string // field path in the fleet file, e.g. "spec.restartPolicy"
	Message string
}

// String formats "server: field: message".
func (w Warning) String() string {
	var b strings.Builder
	if w.Server != "" {
		b.WriteString(w.Server)
		b.WriteString(": ")
	}
	if w.Field != "" {
		b.WriteString(w.Field)
		b.WriteString(": ")
	}
	b.WriteString(w.Message)
	return b.String()
}

// File is one output file: a name relative to the output folder, and its
// contents.
type File struct {
	Name string
	Data []byte
}

// Result is what an export produces.
type Result struct {
	Target   Target
	Files    []File
	Warnings []Warning
}

// WriteTo writes every file to w: a single file as it is; several files
// each behind a comment line naming it ("# Source: NAME" after a YAML
// document separator for Kubernetes, so the stream still applies with
// `kubectl apply -f -`; "# ==> NAME <==" for systemd units).
func (r *Result) WriteTo(w io.Writer) (int64, error) {
	var buf bytes.Buffer
	if len(r.Files) == 1 {
		buf.Write(r.Files[0].Data)
	} else {
		for i, f := range r.Files {
			switch r.Target {
			case Kubernetes:
				fmt.Fprintf(&buf, "---\n# Source: %s\n", f.Name)
			default:
				if i > 0 {
					buf.WriteByte('\n')
				}
				fmt.Fprintf(&buf, "# ==> %s <==\n", f.Name)
			}
			buf.Write(f.Data)
		}
	}
	return buf.WriteTo(w)
}

// Export maps servers to target. Servers are taken in name order whatever
// their order in the slice; they should have been through spec.SetDefaults
// (as spec.Load does), but unset defaults are filled here too.
func Export(target Target, servers []spec.Server, opts Options) (*Result, error) {
	f, err := newFleet(servers, opts)
	if err != nil {
		return nil, err
	}
	var files []File
	switch target {
	case Kubernetes:
		files, err = f.kubernetes()
	case Nomad:
		files, err = f.nomad()
	case Systemd:
		files, err = f.systemd()
	default:
		return nil, fmt.Errorf("export: unknown target %q (want one of %s)", target, targetList())
	}
	if err != nil {
		return nil, err
	}
	return &Result{Target: target, Files: files, Warnings: f.warnings}, nil
}

// newFleet checks the options and sorts the servers by name.
func newFleet(servers []spec.Server, opts Options) (*fleet, error) {
	if err := validateName(opts.name()); err != nil {
		return nil, err
	}
	sorted := make([]spec.Server, len(servers))
	copy(sorted, servers)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Metadata.Name < sorted[j].Metadata.Name })
	for i := 1; i < len(sorted); i++ {
		if sorted[i].Metadata.Name == sorted[i-1].Metadata.Name {
			return nil, fmt.Errorf("export: duplicate server name %q", sorted[i].Metadata.Name)
		}
	}
	f := &fleet{servers: sorted, opts: opts, byName: map[string]*spec.Server{}}
	for i := range f.servers {
		f.byName[f.servers[i].Metadata.Name] = &f.servers[i]
	}
	return f, nil
}

func targetList() string {
	s := make([]string, len(Targets))
	for i, t := range Targets {
		s[i] = string(t)
	}
	return strings.Join(s, ", ")
}

// ParseTarget returns the Target named s.
func ParseTarget(s string) (Target, error) {
	for _, t := range Targets {
		if string(t) == s {
			return t, nil
		}
	}
	return "", fmt.Errorf("unknown export target %q (want one of %s)", s, targetList())
}

func validateName(name string) error {
	if len(name) > 63 || !dns1123Shaped(name) {
		return fmt.Errorf("export: fleet name %q is not a DNS label ([a-z0-9]([-a-z0-9]*[a-z0-9])?, at most 63 characters)", name)
	}
	return nil
}

// SanitizeName turns s (typically a folder name) into a fleet name: lower
// case, runs of other characters as "-", at most 63 characters;
// DefaultFleetName when nothing is left.
func SanitizeName(s string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(s) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
			dash = false
		} else if !dash && b.Len() > 0 {
			b.WriteByte('-')
			dash = true
		}
	}
	out := strings.Trim(b.String(), "-")
	if len(out) > 63 {
		out = strings.Trim(out[:63], "-")
	}
	if out == "" {
		return DefaultFleetName
	}
	return out
}

// ErrNoImage is wrapped by the error of a Kubernetes export in which some
// server has no image.
var ErrNoImage = errors.New("no container image")

// fleet is one export in progress.
type fleet struct {
	servers  []spec.Server
	byName   map[string]*spec.Server
	opts     Options
	warnings []Warning
}

// Markers standing for values an engine fills in at run time (a systemd
// template's instance, a Nomad allocation's port and index): they go
// through $(NAME) expansion and the engine's escaping like any text, then
// each engine replaces them. They are private-use runes, which no fleet
// file is expected to hold.
const (
	markInstance   = "\uE000" // systemd: %i
	markNomadPort  = "\uE001" // Nomad: ${NOMAD_PORT_main}
	markNomadIndex = "\uE002" // Nomad: ${NOMAD_ALLOC_INDEX}
)

// view is a server as an engine runs it: command, args and the variables
// of envFile and env with $(NAME) expanded against the values that engine
// gives PORT, PROCFLEET_REPLICA and PROCFLEET_SERVER (given as own), but
// not against procfleet's own environment, which the engine does not have.
type view struct {
	command, args []string
	// env is what envFile and env set (without own), in order.
	env []spec.Var
	// fileVars counts the variables of env that come from env files.
	fileVars int
}

// replicas is the number of instances: spec.replicas, 1 when absent.
func replicas(s *spec.Server) int {
	if s.Spec.Replicas == nil {
		return 1
	}
	return *s.Spec.Replicas
}

// resolve builds the view of s with the given own variables, and warns
// about each reference left as written: procfleet resolves it from its own
// environment (or leaves it too), the engine will not.
func (f *fleet) resolve(s *spec.Server, own []spec.Var, engine string) (view, error) {
	name := s.Metadata.Name
	if len(s.EnvFiles) != len(s.Spec.EnvFile) {
		return view{}, fmt.Errorf("export %s: spec.envFile: the env files were not read (load the fleet with spec.Load)", name)
	}
	seen := map[spec.Reference]bool{}
	r := s.Resolve(own, nil, func(ref spec.Reference) {
		if seen[ref] {
			return
		}
		seen[ref] = true
		switch ref.Name {
		case spec.EnvReplica, spec.EnvServer:
			f.warn(name, ref.Field, "$(%s) has no %s equivalent here; written as is", ref.Name, engine)
		default:
			f.warn(name, ref.Field, "$(%s) is not set by the fleet (procfleet takes it from its own environment, if there); written as is, %s does not expand it from yours", ref.Name, engine)
		}
	})
	v := view{command: r.Command, args: r.Args, env: r.Env[:len(r.Env)-len(own)]}
	for _, e := range v.env {
		if e.From.Kind == spec.FromEnvFile {
			v.fileVars++
		}
	}
	return v, nil
}

// ownVars are the variables procfleet sets, with the values given (an
// empty value leaves the variable out, so a reference to it stays as
// written).
func ownVars(port, replica, server string) []spec.Var {
	var own []spec.Var
	for _, kv := range [][2]string{{spec.EnvPort, port}, {spec.EnvReplica, replica}, {spec.EnvServer, server}} {
		if kv[1] != "" {
			own = append(own, spec.Var{Name: kv[0], Value: kv[1], From: spec.VarSource{Kind: spec.FromProcfleet}})
		}
	}
	return own
}

// warnEnvFilesInline says, per envFile entry, that its variables were
// copied into the output.
func (f *fleet) warnEnvFilesInline(s *spec.Server, into string) {
	for i, e := range s.EnvFiles {
		f.warn(s.Metadata.Name, fmt.Sprintf("spec.envFile[%d]", i), "the %d variables of %s are copied into the %s (values included: keep secrets out of it); export again after editing the file", len(e.Vars), s.Spec.EnvFile[i], into)
	}
}

// minReadySeconds is the server's minimum ready time in whole seconds
// (spec.minReadySeconds, or its default).
func minReadySeconds(s *spec.Server) int { return int(s.Spec.MinReady().Seconds()) }

func (f *fleet) warn(server, field, format string, args ...any) {
	f.warnings = append(f.warnings, Warning{Server: server, Field: field, Message: fmt.Sprintf(format, args...)})
}

// Defaults of the fleet file (DESIGN.md), applied when a server has not been
// through spec.SetDefaults.
const (
	defaultPeriod           = spec.DefaultPeriodSeconds
	defaultTimeout          = spec.DefaultTimeoutSeconds
	defaultFailureThreshold = spec.DefaultFailureThreshold
	defaultSuccessThreshold = spec.DefaultSuccessThreshold
	defaultStartupTimeout   = spec.DefaultStartupTimeoutSeconds
	defaultGrace            = spec.DefaultTerminationGracePeriodSeconds
	defaultKillTimeout      = spec.DefaultKillTimeoutSeconds
)

func intOr(p *int, def int) int {
	if p == nil {
		return def
	}
	return *p
}

func orDefault(v, def int) int {
	if v == 0 {
		return def
	}
	return v
}

func restartPolicy(s *spec.Server) spec.RestartPolicy {
	if s.Spec.RestartPolicy == "" {
		return spec.RestartAlways
	}
	return s.Spec.RestartPolicy
}

// probe is a spec.Probe with defaults filled and the port resolved.
type probe struct {
	kind       string // "httpGet", "tcpSocket", "exec"
	path, host string
	port       int
	// ownPort is set when the probe had no port: it probes each instance's
	// own port (spec.port + index), not port as written.
	ownPort          bool
	command          []string
	initialDelay     int
	period, timeout  int
	failure, success int
	declared         bool // false for the default readiness probe
}

// resolveProbe fills defaults; port 0 falls back to the server's port.
func resolveProbe(p *spec.Probe, serverPort int, declared bool) probe {
	r := probe{
		initialDelay: p.InitialDelaySeconds,
		period:       orDefault(p.PeriodSeconds, defaultPeriod),
		timeout:      orDefault(p.TimeoutSeconds, defaultTimeout),
		failure:      orDefault(p.FailureThreshold, defaultFailureThreshold),
		success:      orDefault(p.SuccessThreshold, defaultSuccessThreshold),
		declared:     declared,
	}
	switch {
	case p.HTTPGet != nil:
		r.kind, r.path, r.host, r.port = "httpGet", p.HTTPGet.Path, p.HTTPGet.Host, orDefault(p.HTTPGet.Port, serverPort)
		r.ownPort = p.HTTPGet.Port == 0
		if r.path == "" {
			r.path = "/"
		}
	case p.TCPSocket != nil:
		r.kind, r.host, r.port = "tcpSocket", p.TCPSocket.Host, orDefault(p.TCPSocket.Port, serverPort)
		r.ownPort = p.TCPSocket.Port == 0
	case p.Exec != nil:
		r.kind, r.command = "exec", p.Exec.Command
	}
	return r
}

// readiness is the effective readiness probe (spec.ServerSpec.EffectiveReadiness):
// the declared one, else TCP on the port, else none.
func readiness(s *spec.Server) (probe, bool) {
	p := s.Spec.EffectiveReadiness()
	if p == nil {
		return probe{}, false
	}
	return resolveProbe(p, s.Spec.Port, s.Spec.ReadinessProbe != nil), true
}

func liveness(s *spec.Server) (probe, bool) {
	if p := s.Spec.LivenessProbe; p != nil {
		return resolveProbe(p, s.Spec.Port, true), true
	}
	return probe{}, false
}

// checkProbe rejects a probe no target can express.
func checkProbe(name, field string, p probe) error {
	switch p.kind {
	case "httpGet", "tcpSocket":
		if p.port <= 0 || p.port > 65535 {
			return fmt.Errorf("export %s: %s.%s.port: no port (set it, or spec.port)", name, field, p.kind)
		}
	case "exec":
		if len(p.command) == 0 {
			return fmt.Errorf("export %s: %s.exec.command: empty", name, field)
		}
	default:
		return fmt.Errorf("export %s: %s: no handler (httpGet, tcpSocket or exec)", name, field)
	}
	return nil
}

func isLoopbackHost(h string) bool {
	switch strings.Trim(strings.ToLower(h), "[]") {
	case "", "localhost", "::1":
		return true
	}
	return strings.HasPrefix(h, "127.")
}

// loopbackAddr is compiled at its first use, not at package init, which
// every command of the binary would pay.
var loopbackAddr = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`(?i)(?:127\.\d{1,3}\.\d{1,3}\.\d{1,3}|localhost|\[::1\]):(\d{1,5})`)
})

// loopbackRefs finds "127.0.0.1:PORT"-like references, in argv and env
// values (after expansion), to a port of another server of the fleet. On
// one machine they work; across machines they must name the other server.
// It returns (field, address, server) triples in order.
func (f *fleet) loopbackRefs(s *spec.Server, v view) [][3]string {
	ports := map[int]string{}
	for i := range f.servers {
		o := &f.servers[i]
		if o.Spec.Port > 0 && o.Metadata.Name != s.Metadata.Name {
			for j := range max(1, replicas(o)) {
				ports[o.Spec.Port+j] = o.Metadata.Name
			}
		}
	}
	var out [][3]string
	scan := func(field, v string) {
		for _, m := range loopbackAddr().FindAllStringSubmatch(v, -1) {
			p, _ := strconv.Atoi(m[1])
			if name, ok := ports[p]; ok {
				out = append(out, [3]string{field, m[0], name})
			}
		}
	}
	for i, a := range v.command {
		scan(fmt.Sprintf("spec.command[%d]", i), a)
	}
	for i, a := range v.args {
		scan(fmt.Sprintf("spec.args[%d]", i), a)
	}
	for _, e := range v.env {
		field := fmt.Sprintf("spec.env[%s]", e.Name)
		if e.From.Kind == spec.FromEnvFile {
			field = e.From.Field + "[" + e.Name + "]"
		}
		scan(field, e.Value)
	}
	return out
}

// killTimeoutWarning: no target waits a separate time after SIGKILL.
func (f *fleet) warnKillTimeout(s *spec.Server, what string) {
	if kt := intOr(s.Spec.KillTimeoutSeconds, defaultKillTimeout); kt != defaultKillTimeout {
		f.warn(s.Metadata.Name, "spec.killTimeoutSeconds", "%d has no %s equivalent (the wait after SIGKILL); dropped", kt, what)
	}
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
