package export

import "encoding/json"

// The Kubernetes objects the export writes, as the few fields of
// k8s.io/api's apps/v1, batch/v1 and core/v1 types that it sets: the same
// JSON names, and omitempty where those types have it, so that a manifest
// is the one those types would serialise (targets_test.go decodes every
// manifest strictly into them and encodes it back to the same bytes).
// They are written here so that the binary does not carry k8s.io/api and
// k8s.io/apimachinery (their package init and file pages) for one command.

type k8sMeta struct {
	Name        string            `json:"name,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

type k8sDeployment struct {
	APIVersion string            `json:"apiVersion,omitempty"`
	Kind       string            `json:"kind,omitempty"`
	Metadata   k8sMeta           `json:"metadata,omitempty"`
	Spec       k8sDeploymentSpec `json:"spec,omitempty"`
}

type k8sDeploymentSpec struct {
	Replicas                *int32         `json:"replicas,omitempty"`
	Selector                *k8sSelector   `json:"selector"`
	Template                k8sPodTemplate `json:"template"`
	Strategy                k8sStrategy    `json:"strategy,omitempty"`
	MinReadySeconds         int32          `json:"minReadySeconds,omitempty"`
	ProgressDeadlineSeconds *int32         `json:"progressDeadlineSeconds,omitempty"`
}

type k8sSelector struct {
	MatchLabels map[string]string `json:"matchLabels,omitempty"`
}

type k8sStrategy struct {
	Type          string            `json:"type,omitempty"`
	RollingUpdate *k8sRollingUpdate `json:"rollingUpdate,omitempty"`
}

type k8sRollingUpdate struct {
	MaxUnavailable *k8sIntOrString `json:"maxUnavailable,omitempty"`
	MaxSurge       *k8sIntOrString `json:"maxSurge,omitempty"`
}

type k8sJob struct {
	APIVersion string     `json:"apiVersion,omitempty"`
	Kind       string     `json:"kind,omitempty"`
	Metadata   k8sMeta    `json:"metadata,omitempty"`
	Spec       k8sJobSpec `json:"spec,omitempty"`
}

type k8sJobSpec struct {
	Parallelism  *int32         `json:"parallelism,omitempty"`
	Completions  *int32         `json:"completions,omitempty"`
	BackoffLimit *int32         `json:"backoffLimit,omitempty"`
	Template     k8sPodTemplate `json:"template"`
}

type k8sService struct {
	APIVersion string         `json:"apiVersion,omitempty"`
	Kind       string         `json:"kind,omitempty"`
	Metadata   k8sMeta        `json:"metadata,omitempty"`
	Spec       k8sServiceSpec `json:"spec,omitempty"`
}

type k8sServiceSpec struct {
	Ports    []k8sServicePort  `json:"ports,omitempty"`
	Selector map[string]string `json:"selector,omitempty"`
}

type k8sServicePort struct {
	Name       string         `json:"name,omitempty"`
	Protocol   string         `json:"protocol,omitempty"`
	Port       int32          `json:"port"`
	TargetPort k8sIntOrString `json:"targetPort,omitempty"`
}

type k8sPodTemplate struct {
	Metadata k8sMeta    `json:"metadata,omitempty"`
	Spec     k8sPodSpec `json:"spec,omitempty"`
}

type k8sPodSpec struct {
	InitContainers                []k8sContainer `json:"initContainers,omitempty"`
	Containers                    []k8sContainer `json:"containers"`
	RestartPolicy                 string         `json:"restartPolicy,omitempty"`
	TerminationGracePeriodSeconds *int64         `json:"terminationGracePeriodSeconds,omitempty"`
	EnableServiceLinks            *bool          `json:"enableServiceLinks,omitempty"`
}

type k8sContainer struct {
	Name           string             `json:"name"`
	Image          string             `json:"image,omitempty"`
	Command        []string           `json:"command,omitempty"`
	Args           []string           `json:"args,omitempty"`
	WorkingDir     string             `json:"workingDir,omitempty"`
	Ports          []k8sContainerPort `json:"ports,omitempty"`
	Env            []k8sEnvVar        `json:"env,omitempty"`
	LivenessProbe  *k8sProbe          `json:"livenessProbe,omitempty"`
	ReadinessProbe *k8sProbe          `json:"readinessProbe,omitempty"`
}

type k8sContainerPort struct {
	Name          string `json:"name,omitempty"`
	ContainerPort int32  `json:"containerPort"`
	Protocol      string `json:"protocol,omitempty"`
}

type k8sEnvVar struct {
	Name  string `json:"name"`
	Value string `json:"value,omitempty"`
}

type k8sProbe struct {
	Exec                *k8sExecAction `json:"exec,omitempty"`
	HTTPGet             *k8sHTTPGet    `json:"httpGet,omitempty"`
	TCPSocket           *k8sTCPSocket  `json:"tcpSocket,omitempty"`
	InitialDelaySeconds int32          `json:"initialDelaySeconds,omitempty"`
	TimeoutSeconds      int32          `json:"timeoutSeconds,omitempty"`
	PeriodSeconds       int32          `json:"periodSeconds,omitempty"`
	SuccessThreshold    int32          `json:"successThreshold,omitempty"`
	FailureThreshold    int32          `json:"failureThreshold,omitempty"`
}

type k8sExecAction struct {
	Command []string `json:"command,omitempty"`
}

type k8sHTTPGet struct {
	Path   string         `json:"path,omitempty"`
	Port   k8sIntOrString `json:"port"`
	Host   string         `json:"host,omitempty"`
	Scheme string         `json:"scheme,omitempty"`
}

type k8sTCPSocket struct {
	Port k8sIntOrString `json:"port"`
	Host string         `json:"host,omitempty"`
}

// k8sIntOrString is a port (or a count) given by number, or by name when
// name is set: a JSON number or string, as apimachinery's intstr writes it.
type k8sIntOrString struct {
	num  int32
	name string
}

func k8sInt(n int32) k8sIntOrString        { return k8sIntOrString{num: n} }
func k8sString(name string) k8sIntOrString { return k8sIntOrString{name: name} }

// MarshalJSON writes the name as a string, else the number.
func (v k8sIntOrString) MarshalJSON() ([]byte, error) {
	if v.name != "" {
		return json.Marshal(v.name)
	}
	return json.Marshal(v.num)
}
