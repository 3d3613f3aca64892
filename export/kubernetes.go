package export

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/procfleet/procfleet/spec"
)

// Labels every exported Kubernetes object carries; the first two are the
// selector of the server's pods.
const (
	LabelName    = "app.kubernetes.io/name"
	LabelPartOf  = "app.kubernetes.io/part-of"
	LabelManaged = "app.kubernetes.io/managed-by"
)

// kubernetes writes <server>.yaml per server: a Deployment (or a Job for
// restartPolicy OnFailure/Never) and, when the server has a port, a Service.
func (f *fleet) kubernetes() ([]File, error) {
	images, err := f.images()
	if err != nil {
		return nil, err
	}
	files := make([]File, 0, len(f.servers))
	for i := range f.servers {
		s := &f.servers[i]
		objs, err := f.k8sServer(s, images[s.Metadata.Name])
		if err != nil {
			return nil, err
		}
		var buf strings.Builder
		for j, o := range objs {
			data, err := marshalK8s(o)
			if err != nil {
				return nil, fmt.Errorf("export kubernetes %s: %w", s.Metadata.Name, err)
			}
			if j > 0 {
				buf.WriteString("---\n")
			}
			buf.Write(data)
		}
		files = append(files, File{Name: s.Metadata.Name + ".yaml", Data: []byte(buf.String())})
	}
	return files, nil
}

// images resolves each server's image: Options.Images, then the ImageLabel
// label, then Options.Image. Every missing one is named in one error.
func (f *fleet) images() (map[string]string, error) {
	for name := range f.opts.Images {
		if _, ok := f.byName[name]; !ok {
			return nil, fmt.Errorf("export kubernetes: image for %q: no such server in the fleet", name)
		}
	}
	out := map[string]string{}
	var missing []string
	for i := range f.servers {
		name := f.servers[i].Metadata.Name
		img := f.opts.Images[name]
		if img == "" {
			img = f.servers[i].Metadata.Labels[ImageLabel]
		}
		if img == "" {
			img = f.opts.Image
		}
		if img == "" {
			missing = append(missing, name)
			continue
		}
		out[name] = img
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("export kubernetes: %w for %s: a process has no image; pass --image IMAGE (every server), --image NAME=IMAGE, or set the label %s in the server's metadata",
			ErrNoImage, strings.Join(missing, ", "), ImageLabel)
	}
	return out, nil
}

func (f *fleet) k8sServer(s *spec.Server, image string) ([]any, error) {
	name := s.Metadata.Name
	if why := k8sDNS1123Label(name); why != "" {
		return nil, fmt.Errorf("export kubernetes %s: metadata.name: %s", name, why)
	}
	port := s.Spec.Port
	if port > 0 {
		if why := k8sDNS1035Label(name); why != "" {
			return nil, fmt.Errorf("export kubernetes %s: metadata.name: not usable as a Service name: %s", name, why)
		}
	}
	selector := map[string]string{LabelName: name, LabelPartOf: f.opts.name()}
	labels, annotations := f.k8sLabels(s, selector)

	// Every pod of a Deployment is alike: PORT is spec.port in all of them,
	// and no pod knows a replica index.
	server := name
	if s.Spec.Replicas != nil {
		server = ""
	}
	v, err := f.resolve(s, ownVars(portString(port), "", server), "Kubernetes")
	if err != nil {
		return nil, err
	}
	c := k8sContainer{
		Name:       name,
		Image:      image,
		Command:    k8sEscapeAll(v.command),
		Args:       k8sEscapeAll(v.args),
		WorkingDir: s.Spec.WorkingDir,
	}
	if s.Spec.WorkingDir != "" {
		f.warn(name, "spec.workingDir", "%s is a path on this machine; the image must provide it (or drop it to use the image's WORKDIR)", s.Spec.WorkingDir)
	}
	if port > 0 {
		c.Env = append(c.Env, k8sEnvVar{Name: spec.EnvPort, Value: portString(port)})
	}
	f.warnEnvFilesInline(s, "manifest")
	for _, e := range v.env {
		field := "spec.env[" + e.Name + "]"
		if e.From.Kind == spec.FromEnvFile {
			field = e.From.Field + "[" + e.Name + "]"
		}
		if why := k8sEnvVarName(e.Name); why != "" {
			f.warn(name, field, "the name is accepted only by clusters with relaxed environment variable validation (%s)", why)
		}
		c.Env = append(c.Env, k8sEnvVar{Name: e.Name, Value: k8sEscape(e.Value)})
	}
	portName := "tcp"
	if port > 0 {
		if r, ok := readiness(s); ok && r.kind == "httpGet" && r.port == port {
			portName = "http"
		}
		c.Ports = []k8sContainerPort{{Name: portName, ContainerPort: int32(port), Protocol: "TCP"}}
		f.warn(name, "spec.port", "the server must listen on the pod's address (0.0.0.0 or ::), not only on loopback, for probes and the Service %s:%d to reach it", name, port)
	}
	for _, ref := range f.loopbackRefs(s, v) {
		f.warn(name, ref[0], "refers to %s, the port of %s on this machine; in Kubernetes use the Service %s:%d", ref[1], ref[2], ref[2], f.byName[ref[2]].Spec.Port)
	}
	if r, ok := readiness(s); ok {
		p, err := f.k8sProbe(name, "spec.readinessProbe", r, false)
		if err != nil {
			return nil, err
		}
		c.ReadinessProbe = p
	}
	if l, ok := liveness(s); ok {
		p, err := f.k8sProbe(name, "spec.livenessProbe", l, true)
		if err != nil {
			return nil, err
		}
		c.LivenessProbe = p
	}

	grace := int64(intOr(s.Spec.TerminationGracePeriodSeconds, defaultGrace))
	pod := k8sPodSpec{
		Containers:                    []k8sContainer{c},
		TerminationGracePeriodSeconds: &grace,
		// Service links would add FOO_SERVICE_HOST variables the server
		// never had under procfleet.
		EnableServiceLinks: ptr(false),
	}
	inits, err := f.k8sWaits(s)
	if err != nil {
		return nil, err
	}
	pod.InitContainers = inits
	f.warnKillTimeout(s, "Kubernetes")

	meta := k8sMeta{Name: name, Labels: labels, Annotations: annotations}
	tmpl := k8sPodTemplate{Metadata: k8sMeta{Labels: labels, Annotations: annotations}, Spec: pod}
	startup := intOr(s.Spec.StartupTimeoutSeconds, defaultStartupTimeout)
	n := int32(replicas(s))

	var objs []any
	switch rp := restartPolicy(s); rp {
	case spec.RestartAlways:
		tmpl.Spec.RestartPolicy = "Always"
		d := &k8sDeployment{
			APIVersion: "apps/v1",
			Kind:       "Deployment",
			Metadata:   meta,
			Spec: k8sDeploymentSpec{
				Replicas:        ptr(n),
				Selector:        &k8sSelector{MatchLabels: selector},
				MinReadySeconds: int32(minReadySeconds(s)),
				// Never two instances at once, as procfleet replaces a server.
				Strategy: k8sStrategy{Type: "Recreate"},
				Template: tmpl,
			},
		}
		if s.Spec.Replicas != nil {
			// As procfleet rolls replicas: one down at a time, never an
			// extra one.
			d.Spec.Strategy = k8sStrategy{Type: "RollingUpdate",
				RollingUpdate: &k8sRollingUpdate{MaxSurge: ptr(k8sInt(0)), MaxUnavailable: ptr(k8sInt(1))}}
			if port > 0 && n > 1 {
				f.warn(name, "spec.replicas", "%d pods all listen on port %d behind the Service %s: per-replica ports (%d-%d under procfleet) do not exist in a Deployment", n, port, name, port, port+int(n)-1)
			}
		}
		if startup > 0 {
			// The rollout also waits out minReadySeconds, and Kubernetes
			// wants the deadline above it.
			d.Spec.ProgressDeadlineSeconds = ptr(int32(startup + minReadySeconds(s)))
		}
		objs = append(objs, d)
	case spec.RestartOnFailure, spec.RestartNever:
		j := &k8sJob{
			APIVersion: "batch/v1",
			Kind:       "Job",
			Metadata:   meta,
			Spec: k8sJobSpec{
				Parallelism: ptr(n),
				Completions: ptr(n),
				Template:    tmpl,
			},
		}
		if s.Spec.Replicas != nil {
			f.warn(name, "spec.replicas", "a Job runs %d pods alike (parallelism and completions %d), each on port %d, with no replica index", n, n, port)
		}
		if s.Spec.MinReadySeconds != nil {
			f.warn(name, "spec.minReadySeconds", "%d: a Job has no minimum ready time; dropped", *s.Spec.MinReadySeconds)
		}
		if rp == spec.RestartOnFailure {
			j.Spec.Template.Spec.RestartPolicy = "OnFailure"
			j.Spec.BackoffLimit = ptr(int32(math.MaxInt32))
			f.warn(name, "spec.restartPolicy", "OnFailure has no Deployment equivalent (a Deployment restarts Always); exported as a Job whose pod restarts on failure and which completes when the server exits 0; a Job's pod template cannot be changed in place (delete and re-apply)")
		} else {
			j.Spec.Template.Spec.RestartPolicy = "Never"
			j.Spec.BackoffLimit = ptr(int32(0))
			f.warn(name, "spec.restartPolicy", "Never has no Deployment equivalent (a Deployment restarts Always); exported as a Job with restartPolicy Never and backoffLimit 0, which runs the server once; a Job's pod template cannot be changed in place (delete and re-apply)")
		}
		if startup != defaultStartupTimeout {
			f.warn(name, "spec.startupTimeoutSeconds", "%d: a Job has no progress deadline; dropped", startup)
		}
		objs = append(objs, j)
	default:
		return nil, fmt.Errorf("export kubernetes %s: spec.restartPolicy: unknown value %q", name, rp)
	}

	if port > 0 {
		objs = append(objs, &k8sService{
			APIVersion: "v1",
			Kind:       "Service",
			Metadata:   k8sMeta{Name: name, Labels: labels},
			Spec: k8sServiceSpec{
				Selector: selector,
				Ports: []k8sServicePort{{
					Name:       portName,
					Port:       int32(port),
					TargetPort: k8sString(portName),
					Protocol:   "TCP",
				}},
			},
		})
	}
	return objs, nil
}

// k8sLabels returns the objects' labels (selector plus the server's labels
// that Kubernetes accepts) and annotations (labels whose value Kubernetes
// does not accept as a label value).
func (f *fleet) k8sLabels(s *spec.Server, selector map[string]string) (labels, annotations map[string]string) {
	labels = map[string]string{LabelManaged: "procfleet-export"}
	for k, v := range selector {
		labels[k] = v
	}
	name := s.Metadata.Name
	for _, k := range sortedKeys(s.Metadata.Labels) {
		v := s.Metadata.Labels[k]
		field := "metadata.labels[" + k + "]"
		switch {
		case k == ImageLabel:
			// Consumed as the image; not a Kubernetes label value.
		case labels[k] != "":
			f.warn(name, field, "the key is set by the export (%s=%s); the server's value %q is dropped", k, labels[k], v)
		case k8sLabelKey(k) != "":
			f.warn(name, field, "not a valid Kubernetes label key (%s); dropped", k8sLabelKey(k))
		case k8sLabelValue(v) != "":
			if annotations == nil {
				annotations = map[string]string{}
			}
			annotations[k] = v
			f.warn(name, field, "%q is not a valid Kubernetes label value (%s); written as an annotation", v, k8sLabelValue(v))
		default:
			labels[k] = v
		}
	}
	return labels, annotations
}

func (f *fleet) k8sProbe(name, field string, p probe, isLiveness bool) (*k8sProbe, error) {
	if err := checkProbe(name, field, p); err != nil {
		return nil, err
	}
	out := &k8sProbe{
		InitialDelaySeconds: int32(p.initialDelay),
		PeriodSeconds:       int32(p.period),
		TimeoutSeconds:      int32(p.timeout),
		FailureThreshold:    int32(p.failure),
		SuccessThreshold:    int32(p.success),
	}
	host := ""
	if p.host != "" && !isLoopbackHost(p.host) {
		host = p.host
		f.warn(name, field+"."+p.kind+".host", "%q is reached from the node (the kubelet), not from the server's own machine", p.host)
	}
	switch p.kind {
	case "httpGet":
		out.HTTPGet = &k8sHTTPGet{Path: p.path, Port: k8sInt(int32(p.port)), Host: host, Scheme: "HTTP"}
	case "tcpSocket":
		out.TCPSocket = &k8sTCPSocket{Port: k8sInt(int32(p.port)), Host: host}
	case "exec":
		out.Exec = &k8sExecAction{Command: p.command}
	}
	if isLiveness && p.success != 1 {
		f.warn(name, field+".successThreshold", "%d: Kubernetes requires 1 for a liveness probe; set to 1", p.success)
		out.SuccessThreshold = 1
	}
	return out, nil
}

// k8sWaits builds one init container per dependency that has a Service.
func (f *fleet) k8sWaits(s *spec.Server) ([]k8sContainer, error) {
	name := s.Metadata.Name
	var (
		out    []k8sContainer
		waited []string
	)
	for i, dep := range s.Spec.DependsOn {
		d, ok := f.byName[dep]
		if !ok {
			return nil, fmt.Errorf("export kubernetes %s: spec.dependsOn[%d]: no server %q in the fleet", name, i, dep)
		}
		if d.Spec.Port == 0 {
			f.warn(name, fmt.Sprintf("spec.dependsOn[%d]", i), "%s has no port, hence no Service to wait for; Kubernetes starts %s without waiting for it", dep, name)
			continue
		}
		cname := "wait-for-" + dep
		if len(cname) > 63 {
			cname = fmt.Sprintf("wait-for-%d", i)
		}
		out = append(out, k8sContainer{
			Name:  cname,
			Image: f.opts.waitImage(),
			Command: []string{"sh", "-c", fmt.Sprintf(
				"until nc -z -w 1 %s %d; do echo waiting for %s:%d; sleep 1; done", dep, d.Spec.Port, dep, d.Spec.Port)},
		})
		waited = append(waited, fmt.Sprintf("%s:%d", dep, d.Spec.Port))
	}
	if len(waited) > 0 {
		f.warn(name, "spec.dependsOn", "init containers wait until the Service %s accepts TCP (the Service routes only to Ready pods); they need the image %s (sh, nc, sleep) to be pullable; Kubernetes does not order stopping",
			strings.Join(waited, ", "), f.opts.waitImage())
	}
	return out, nil
}

// k8sEscape protects a string from Kubernetes' $(VAR) expansion in command,
// args and env values: "$$" reads as "$", so doubling every "$" is exact.
// Strings in which expansion cannot happen are left as they are.
func k8sEscape(s string) string {
	if strings.Contains(s, "$(") || strings.Contains(s, "$$") {
		return strings.ReplaceAll(s, "$", "$$")
	}
	return s
}

func k8sEscapeAll(in []string) []string {
	if in == nil {
		return nil
	}
	out := make([]string, len(in))
	for i, s := range in {
		out[i] = k8sEscape(s)
	}
	return out
}

// marshalK8s serialises an object as YAML (keys sorted).
func marshalK8s(obj any) ([]byte, error) { return yaml.Marshal(obj) }

func ptr[T any](v T) *T { return &v }

// portString is port as an environment value, "" for none.
func portString(port int) string {
	if port <= 0 {
		return ""
	}
	return strconv.Itoa(port)
}
