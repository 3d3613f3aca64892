package spec

import (
	"fmt"
	"math"
	"net/netip"
	"regexp"
	"slices"
	"strings"
)

// maxSeconds bounds every seconds field, so that a duration in nanoseconds
// cannot overflow (2^31-1 s is 68 years).
const maxSeconds = math.MaxInt32

var dnsLabel = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

// issue is a validation error and the index of the server it is about.
type issue struct {
	server int
	err    *FieldError
}

type validator struct {
	servers []Server
	out     []issue
}

// Validate checks servers, a whole fleet, and returns every error found,
// sorted by file, line and field: names (DNS labels, unique), dependencies
// (known, not the server itself, no cycle), ports (and that no two
// servers' port ranges overlap), replicas and instance names, commands,
// restart policies, timeouts, probes, env and envFile entries. It is pure: no I/O, no change to its
// input. Lines come from each server's Source; servers built in code (no
// Source) get errors without a file or line. An empty apiVersion or kind is
// accepted for servers built in code; Load has already checked them.
func Validate(servers []Server) ErrorList {
	var errs ErrorList
	for _, is := range validate(servers, nil) {
		errs = append(errs, is.err)
	}
	errs.Sort()
	return errs
}

// validate is Validate's issues, unsorted. passed, when not nil, holds a
// flag per server: a server flagged has passed its own checks (the ones
// that read no other server) before, as it is now, and is not checked
// again; every other server that passes them now is flagged.
func validate(servers []Server, passed []bool) []issue {
	v := &validator{servers: servers}
	if len(servers) > MaxServers {
		v.add(MaxServers, "", "too many servers: %d, at most %d", len(servers), MaxServers)
		return v.out
	}
	for i := range servers {
		if passed == nil {
			v.server(i)
			continue
		}
		if passed[i] {
			continue
		}
		n := len(v.out)
		v.server(i)
		passed[i] = len(v.out) == n
	}
	v.names()
	v.instanceNames()
	v.ports()
	v.dependencies()
	return v.out
}

// lineOf finds the line of field in s, or of its nearest enclosing field
// present in the file, or of the document.
func lineOf(s *Server, field string) int {
	for f := field; f != ""; {
		if l, ok := s.Source.Fields[f]; ok {
			return l
		}
		i := strings.LastIndexAny(f, ".[")
		if i < 0 {
			break
		}
		f = f[:i]
	}
	return s.Source.Line
}

func (v *validator) add(i int, field, format string, args ...any) {
	s := &v.servers[i]
	v.out = append(v.out, issue{server: i, err: &FieldError{
		File: s.Source.File, Line: lineOf(s, field), Field: field, Message: fmt.Sprintf(format, args...),
	}})
}

func where(s *Server) string {
	switch {
	case s.Source.File == "":
		return "another server"
	case s.Source.Line == 0:
		return s.Source.File
	}
	return fmt.Sprintf("%s:%d", s.Source.File, lineOf(s, "metadata.name"))
}

func (v *validator) server(i int) {
	s := &v.servers[i]
	if s.APIVersion != "" && s.APIVersion != APIVersion {
		v.add(i, "apiVersion", "unsupported value %q: must be %q", s.APIVersion, APIVersion)
	}
	if s.Kind != "" && s.Kind != Kind {
		v.add(i, "kind", "unsupported value %q: must be %q", s.Kind, Kind)
	}
	v.name(i, "metadata.name", s.Metadata.Name)
	for _, k := range sortedKeys(s.Metadata.Labels) {
		if k == "" {
			v.add(i, "metadata.labels", "label names must not be empty")
		}
	}
	sp := &s.Spec
	v.argv(i, "spec.command", sp.Command, true)
	v.argv(i, "spec.args", sp.Args, false)
	if strings.ContainsRune(sp.WorkingDir, 0) {
		v.add(i, "spec.workingDir", "must not contain a NUL byte")
	}
	for j, f := range sp.EnvFile {
		field := fmt.Sprintf("spec.envFile[%d]", j)
		switch {
		case f == "":
			v.add(i, field, "must not be empty: the path of a dotenv file, like .env")
		case strings.ContainsRune(f, 0):
			v.add(i, field, "must not contain a NUL byte")
		}
	}
	v.env(i, sp.Env)
	if sp.Port < 0 || sp.Port > 65535 {
		v.add(i, "spec.port", "invalid port %d: must be between 1 and 65535 (or absent for none)", sp.Port)
	}
	v.replicas(i)
	v.seconds(i, "spec.minReadySeconds", sp.MinReadySeconds, 0)
	v.probe(i, "spec.readinessProbe", sp.ReadinessProbe, false)
	v.probe(i, "spec.livenessProbe", sp.LivenessProbe, true)
	switch sp.RestartPolicy {
	case "", RestartAlways, RestartOnFailure, RestartNever:
	default:
		v.add(i, "spec.restartPolicy", "unsupported value %q: supported values: %q, %q, %q",
			sp.RestartPolicy, RestartAlways, RestartOnFailure, RestartNever)
	}
	v.seconds(i, "spec.startupTimeoutSeconds", sp.StartupTimeoutSeconds, 1)
	v.seconds(i, "spec.terminationGracePeriodSeconds", sp.TerminationGracePeriodSeconds, 0)
	v.seconds(i, "spec.killTimeoutSeconds", sp.KillTimeoutSeconds, 1)
}

func (v *validator) name(i int, field, name string) {
	const why = "(it names the server's files in the state folder)"
	switch {
	case name == "":
		v.add(i, field, "required: a DNS label like \"api\" %s", why)
	case len(name) > 63:
		v.add(i, field, "invalid name %q: longer than 63 characters %s", shorten(name), why)
	case !dnsLabel.MatchString(name):
		v.add(i, field, "invalid name %q: must be a DNS label: lower case letters, digits and '-', starting and ending with a letter or digit %s", shorten(name), why)
	}
}

func shorten(s string) string {
	if len(s) > 80 {
		return s[:77] + "..."
	}
	return s
}

func (v *validator) argv(i int, field string, argv []string, required bool) {
	if required && len(argv) == 0 {
		v.add(i, field, "required: the program and its arguments, like [./bin/api, --port, \"8080\"]")
		return
	}
	if required && argv[0] == "" {
		v.add(i, field+"[0]", "must not be empty: it is the program to run")
	}
	for j, a := range argv {
		if strings.ContainsRune(a, 0) {
			v.add(i, fmt.Sprintf("%s[%d]", field, j), "must not contain a NUL byte")
		}
	}
}

func (v *validator) env(i int, env []EnvVar) {
	first := map[string]int{}
	for j, e := range env {
		field := fmt.Sprintf("spec.env[%d]", j)
		switch {
		case e.Name == "":
			v.add(i, field+".name", "required: the variable's name")
		case strings.ContainsAny(e.Name, "=\x00"):
			v.add(i, field+".name", "invalid name %q: must not contain '=' or a NUL byte", e.Name)
		case slices.Contains(reservedEnv, e.Name):
			v.add(i, field+".name", "%s is set by procfleet and cannot be set here (reserved: %s)", e.Name, strings.Join(reservedEnv, ", "))
		default:
			if k, dup := first[e.Name]; dup {
				v.add(i, field+".name", "duplicate name %q (first at spec.env[%d])", e.Name, k)
			} else {
				first[e.Name] = j
			}
		}
		if strings.ContainsRune(e.Value, 0) {
			v.add(i, field+".value", "must not contain a NUL byte")
		}
	}
}

// MaxReplicas bounds spec.replicas.
const MaxReplicas = 1000

func (v *validator) replicas(i int) {
	sp := &v.servers[i].Spec
	if sp.Replicas == nil {
		return
	}
	n := *sp.Replicas
	switch {
	case n < 0:
		v.add(i, "spec.replicas", "invalid value %d: must not be negative (0 stops every instance)", n)
		return
	case n > MaxReplicas:
		v.add(i, "spec.replicas", "invalid value %d: must be at most %d", n, MaxReplicas)
		return
	}
	if sp.Port > 0 && sp.Port <= 65535 && sp.Port+n-1 > 65535 {
		v.add(i, "spec.replicas", "%d replicas from port %d need ports up to %d: the last port is 65535", n, sp.Port, sp.Port+n-1)
	}
	if name := v.servers[i].Metadata.Name; n > 0 && len(name) <= 63 && len(InstanceName(name, n-1)) > 63 {
		v.add(i, "spec.replicas", "the instance name %q is longer than 63 characters: shorten metadata.name", InstanceName(name, n-1))
	}
}

func (v *validator) seconds(i int, field string, p *int, least int) {
	if p == nil {
		return
	}
	v.bounded(i, field, *p, least)
}

func (v *validator) bounded(i int, field string, n, least int) {
	switch {
	case n < 0:
		v.add(i, field, "invalid value %d: must not be negative", n)
	case n < least:
		v.add(i, field, "invalid value %d: must be at least %d", n, least)
	case n > maxSeconds:
		v.add(i, field, "invalid value %d: must be at most %d", n, maxSeconds)
	}
}

func (v *validator) probe(i int, field string, p *Probe, liveness bool) {
	if p == nil {
		return
	}
	var handlers []string
	if p.HTTPGet != nil {
		handlers = append(handlers, "httpGet")
	}
	if p.TCPSocket != nil {
		handlers = append(handlers, "tcpSocket")
	}
	if p.Exec != nil {
		handlers = append(handlers, "exec")
	}
	switch len(handlers) {
	case 0:
		v.add(i, field, "needs exactly one handler: httpGet, tcpSocket or exec")
	case 1:
	default:
		v.add(i, field, "has %d handlers (%s): exactly one of httpGet, tcpSocket or exec is allowed", len(handlers), strings.Join(handlers, ", "))
	}
	port := v.servers[i].Spec.Port
	if h := p.HTTPGet; h != nil {
		v.probePort(i, field+".httpGet.port", h.Port, port)
		if h.Path != "" && !strings.HasPrefix(h.Path, "/") {
			v.add(i, field+".httpGet.path", "invalid path %q: must start with \"/\"", shorten(h.Path))
		} else if strings.ContainsFunc(h.Path, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
			v.add(i, field+".httpGet.path", "invalid path %q: must not contain spaces or control characters", shorten(h.Path))
		}
		v.host(i, field+".httpGet.host", h.Host)
	}
	if t := p.TCPSocket; t != nil {
		v.probePort(i, field+".tcpSocket.port", t.Port, port)
		v.host(i, field+".tcpSocket.host", t.Host)
	}
	if e := p.Exec; e != nil {
		v.argv(i, field+".exec.command", e.Command, true)
	}
	v.bounded(i, field+".initialDelaySeconds", p.InitialDelaySeconds, 0)
	// 0 stands for the default in these four (as in Kubernetes).
	v.bounded(i, field+".periodSeconds", p.PeriodSeconds, 0)
	v.bounded(i, field+".timeoutSeconds", p.TimeoutSeconds, 0)
	v.bounded(i, field+".failureThreshold", p.FailureThreshold, 0)
	v.bounded(i, field+".successThreshold", p.SuccessThreshold, 0)
	if liveness && p.SuccessThreshold > 1 {
		v.add(i, field+".successThreshold", "invalid value %d: must be 1 for a liveness probe", p.SuccessThreshold)
	}
}

func (v *validator) probePort(i int, field string, port, serverPort int) {
	switch {
	case port == 0 && serverPort == 0:
		v.add(i, field, "required when spec.port is not set")
	case port == 0:
		// Defaulted to spec.port by SetDefaults; spec.port is checked itself.
	case port < 0 || port > 65535:
		v.add(i, field, "invalid port %d: must be between 1 and 65535", port)
	}
}

var hostName = regexp.MustCompile(`^[A-Za-z0-9]([-A-Za-z0-9]*[A-Za-z0-9])?(\.[A-Za-z0-9]([-A-Za-z0-9]*[A-Za-z0-9])?)*$`)

func (v *validator) host(i int, field, host string) {
	if host == "" {
		return
	}
	if _, err := netip.ParseAddr(host); err == nil {
		return
	}
	if len(host) > 253 || !hostName.MatchString(host) {
		v.add(i, field, "invalid host %q: must be an IP address or a host name", shorten(host))
	}
}

// names reports every server whose name is declared more than once, at
// each of its declarations.
func (v *validator) names() {
	first := make(map[string]int, len(v.servers))
	byName := map[string][]int{} // only the names declared more than once
	var order []string
	for i := range v.servers {
		n := v.servers[i].Metadata.Name
		if n == "" {
			continue
		}
		j, ok := first[n]
		if !ok {
			first[n] = i
			continue
		}
		if _, ok := byName[n]; !ok {
			order = append(order, n)
			byName[n] = []int{j}
		}
		byName[n] = append(byName[n], i)
	}
	slices.SortFunc(order, func(a, b string) int { return first[a] - first[b] })
	for _, n := range order {
		idx := byName[n]
		for _, i := range idx {
			var others []string
			for _, j := range idx {
				if j != i {
					others = append(others, where(&v.servers[j]))
				}
			}
			v.add(i, "metadata.name", "duplicate name %q: also declared at %s", n, strings.Join(others, ", "))
		}
	}
}

// instanceNames reports a server named like an instance of a replicated
// server ("api-1" beside "api" with replicas): the name would be ambiguous
// in every verb, record and log, whatever the count. It also bounds the
// number of instances.
func (v *validator) instanceNames() {
	replicated := map[string]int{}
	total := 0
	for i := range v.servers {
		s := &v.servers[i]
		if s.Spec.Replicas != nil {
			replicated[s.Metadata.Name] = i
			total += max(0, min(*s.Spec.Replicas, MaxReplicas))
		} else {
			total++
		}
	}
	if total > MaxServers {
		v.add(0, "", "too many instances: %d (servers and replicas), at most %d", total, MaxServers)
	}
	for i := range v.servers {
		name := v.servers[i].Metadata.Name
		j := strings.LastIndexByte(name, '-')
		if j <= 0 || j+1 == len(name) || digits(name[j+1:]) != len(name)-j-1 {
			continue
		}
		if r, ok := replicated[name[:j]]; ok && r != i {
			v.add(i, "metadata.name", "name %q is taken by the replicas of %s (%s), named %s-0, %s-1, ...: choose another name", name, name[:j], where(&v.servers[r]), name[:j], name[:j])
		}
	}
}

// portRange is the ports of one server's instances: port to port+n-1.
type portRange struct{ server, first, last int }

// ports reports every pair of servers whose port ranges (spec.port to
// spec.port + replicas - 1) overlap, once, at the server whose range
// starts later, naming both and the first port they share. Probe ports do
// not count.
func (v *validator) ports() {
	var ranges []portRange
	for i := range v.servers {
		sp := &v.servers[i].Spec
		if sp.Port <= 0 || sp.Port > 65535 {
			continue
		}
		n := 1
		if sp.Replicas != nil {
			n = *sp.Replicas
		}
		if n <= 0 || n > MaxReplicas {
			continue
		}
		ranges = append(ranges, portRange{i, sp.Port, sp.Port + n - 1})
	}
	slices.SortStableFunc(ranges, func(a, b portRange) int {
		if a.first != b.first {
			return a.first - b.first
		}
		return strings.Compare(v.servers[a.server].Metadata.Name, v.servers[b.server].Metadata.Name)
	})
	var active []portRange
	for _, r := range ranges {
		kept := active[:0]
		for _, a := range active {
			if a.last >= r.first {
				kept = append(kept, a)
			}
		}
		active = kept
		for _, a := range active {
			other := &v.servers[a.server]
			port := r.first
			v.add(r.server, "spec.port", "port %d is both %s's and %s's (%s, %s): the ports of two servers must not overlap",
				port, v.instanceAt(r, port), v.instanceAt(a, port), where(other), rangeText(a))
		}
		active = append(active, r)
	}
}

// instanceAt names the instance of r's server that listens on port.
func (v *validator) instanceAt(r portRange, port int) string {
	s := &v.servers[r.server]
	if s.Spec.Replicas == nil {
		return s.Metadata.Name
	}
	return InstanceName(s.Metadata.Name, port-r.first)
}

func rangeText(r portRange) string {
	if r.first == r.last {
		return fmt.Sprintf("port %d", r.first)
	}
	return fmt.Sprintf("ports %d-%d", r.first, r.last)
}

// dependencies reports empty, duplicate, self and unknown dependencies, and
// every dependency cycle (one per strongly connected component), named as
// a path from its smallest name back to it.
func (v *validator) dependencies() {
	index := make(map[string]int, len(v.servers)) // name -> first server with it
	names := make([]string, 0, len(v.servers))
	for i := range v.servers {
		n := v.servers[i].Metadata.Name
		if _, ok := index[n]; !ok && n != "" {
			index[n] = i
			names = append(names, n)
		}
	}
	edges := make([][]int, len(v.servers))
	for i := range v.servers {
		s := &v.servers[i]
		seen := map[string]int{}
		for j, dep := range s.Spec.DependsOn {
			field := fmt.Sprintf("spec.dependsOn[%d]", j)
			if k, dup := seen[dep]; dup {
				v.add(i, field, "duplicate dependency %q (first at spec.dependsOn[%d])", dep, k)
				continue
			}
			seen[dep] = j
			switch to, ok := index[dep]; {
			case dep == "":
				v.add(i, field, "must not be empty: the name of a server")
			case dep == s.Metadata.Name:
				v.add(i, field, "a server cannot depend on itself")
			case !ok:
				v.add(i, field, "unknown server %q%s", shorten(dep), suggestName(dep, names))
			default:
				if index[s.Metadata.Name] == i { // only the first of duplicate names
					edges[i] = append(edges[i], to)
				}
			}
		}
	}
	for _, comp := range components(edges) {
		if len(comp) < 2 {
			continue
		}
		start := slices.MinFunc(comp, func(a, b int) int {
			return strings.Compare(v.servers[a].Metadata.Name, v.servers[b].Metadata.Name)
		})
		cycle := shortestCycle(start, comp, edges)
		var path []string
		for _, n := range cycle {
			path = append(path, v.servers[n].Metadata.Name)
		}
		next := v.servers[cycle[1]].Metadata.Name
		j := slices.Index(v.servers[start].Spec.DependsOn, next)
		v.add(start, fmt.Sprintf("spec.dependsOn[%d]", j), "dependency cycle: %s", strings.Join(path, " -> "))
	}
}

func suggestName(name string, known []string) string {
	best, bestDist := "", -1
	for _, k := range known {
		if d := editDistance(name, k); bestDist < 0 || d < bestDist {
			best, bestDist = k, d
		}
	}
	if bestDist >= 0 && bestDist <= max(2, len(best)/3) {
		return fmt.Sprintf(", did you mean %q?", best)
	}
	return ""
}

// components returns the strongly connected components of the graph of
// two nodes or more, the ones a cycle runs through (Tarjan's algorithm,
// iterative so that a long chain cannot exhaust the stack).
func components(edges [][]int) [][]int {
	n := len(edges)
	index := make([]int, n)
	low := make([]int, n)
	onStack := make([]bool, n)
	for i := range index {
		index[i] = -1
	}
	var stack []int
	var out [][]int
	next := 0
	type frame struct{ node, edge int }
	var call []frame
	for root := 0; root < n; root++ {
		if index[root] >= 0 {
			continue
		}
		if len(edges[root]) == 0 {
			// Alone in its component, as every node it does not reach.
			index[root], low[root] = next, next
			next++
			continue
		}
		call = append(call[:0], frame{root, 0})
		index[root], low[root] = next, next
		next++
		stack = append(stack, root)
		onStack[root] = true
		for len(call) > 0 {
			f := &call[len(call)-1]
			if f.edge < len(edges[f.node]) {
				w := edges[f.node][f.edge]
				f.edge++
				if index[w] < 0 {
					index[w], low[w] = next, next
					next++
					stack = append(stack, w)
					onStack[w] = true
					call = append(call, frame{w, 0})
				} else if onStack[w] {
					low[f.node] = min(low[f.node], index[w])
				}
				continue
			}
			node := f.node
			call = call[:len(call)-1]
			if len(call) > 0 {
				parent := call[len(call)-1].node
				low[parent] = min(low[parent], low[node])
			}
			if low[node] == index[node] && stack[len(stack)-1] == node {
				stack = stack[:len(stack)-1]
				onStack[node] = false
			} else if low[node] == index[node] {
				var comp []int
				for {
					w := stack[len(stack)-1]
					stack = stack[:len(stack)-1]
					onStack[w] = false
					comp = append(comp, w)
					if w == node {
						break
					}
				}
				out = append(out, comp)
			}
		}
	}
	return out
}

// shortestCycle finds a shortest path from start back to start inside comp
// (breadth first), returned as [start, ..., start].
func shortestCycle(start int, comp []int, edges [][]int) []int {
	in := map[int]bool{}
	for _, n := range comp {
		in[n] = true
	}
	parent := map[int]int{}
	queue := []int{start}
	for len(queue) > 0 {
		n := queue[0]
		queue = queue[1:]
		for _, w := range edges[n] {
			if !in[w] {
				continue
			}
			if w == start {
				path := []int{start}
				for x := n; x != start; x = parent[x] {
					path = append(path, x)
				}
				path = append(path, start)
				slices.Reverse(path[1 : len(path)-1])
				return path
			}
			if _, seen := parent[w]; !seen {
				parent[w] = n
				queue = append(queue, w)
			}
		}
	}
	return []int{start, start} // not reached: comp is strongly connected
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
