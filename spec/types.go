package spec

// APIVersion and Kind identify a procfleet fleet-file document.
const (
	APIVersion = "procfleet.dev/v1alpha1"
	Kind       = "Server"
)

// Server is one declared server: the unit of a fleet file. Each YAML document
// in a fleet file decodes into one Server.
type Server struct {
	APIVersion string     `json:"apiVersion" jsonschema:"required,enum=procfleet.dev/v1alpha1"`
	Kind       string     `json:"kind" jsonschema:"required,enum=Server"`
	Metadata   ObjectMeta `json:"metadata" jsonschema:"required"`
	Spec       ServerSpec `json:"spec" jsonschema:"required"`

	// Source is where the document was read from. It is not part of the file.
	Source Source `json:"-"`
	// EnvFiles holds the files of Spec.EnvFile as Load read them, in the
	// same order. It is not part of the fleet file.
	EnvFiles []EnvFile `json:"-"`
}

// EnvFile is one dotenv file as read: its path and its variables in file
// order, each with the line that set it.
type EnvFile struct {
	// Path is absolute: what a watcher watches.
	Path string
	// Name is the file as the fleet names it: the spec.envFile entry
	// joined to the folder of the fleet file as given (relative when that
	// was), for messages, warnings and VarSource.File.
	Name string
	Vars []Var
}

// ObjectMeta names a server and carries free-form labels.
type ObjectMeta struct {
	// Name is a DNS label: [a-z0-9]([-a-z0-9]*[a-z0-9])?, at most 63 bytes.
	Name   string            `json:"name" jsonschema:"required,minLength=1,maxLength=63,pattern=^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"`
	Labels map[string]string `json:"labels,omitempty"`
}

// ServerSpec is the desired state of one server process.
type ServerSpec struct {
	// Command is the argv to execute. No shell is involved unless written so.
	Command []string `json:"command" jsonschema:"required,minItems=1"`
	// Args are appended to Command.
	Args []string `json:"args,omitempty"`
	// WorkingDir is relative to the folder of the file that declares the server.
	// After Load it is an absolute path.
	WorkingDir string `json:"workingDir,omitempty"`
	// EnvFile lists dotenv files (KEY=VALUE lines, # comments, quoted values),
	// relative to the folder of the file that declares the server, read in
	// order after procfleet's own environment and before Env; later wins. A
	// missing file is an error. Their values are taken literally.
	EnvFile []string `json:"envFile,omitempty"`
	// Env is added to procfleet's own environment, after EnvFile. $(NAME) in a
	// value expands to a variable set before it (procfleet's environment, the
	// env files, earlier entries, PORT, PROCFLEET_REPLICA, PROCFLEET_SERVER);
	// $$(NAME) is a literal $(NAME). $(NAME) expands in Command and Args too.
	Env []EnvVar `json:"env,omitempty"`
	// Port is the TCP port the server must listen on; omit it for none. The
	// server gets it as PORT in its environment.
	Port int `json:"port,omitempty" jsonschema:"minimum=1,maximum=65535"`
	// Replicas, when set, runs that many instances named <name>-0 ...
	// <name>-<n-1>, instance i on port Port+i with PROCFLEET_REPLICA=i. 0 stops
	// every instance and keeps the server declared. Absent: one instance named
	// <name>.
	Replicas *int `json:"replicas,omitempty" jsonschema:"minimum=0,maximum=1000"`
	// MinReadySeconds is how long the server must stay ready, without
	// exiting, before it counts as Ready. Default 0 with a readiness probe
	// (declared, or the TCP connect to Port); 1 when readiness is "running".
	MinReadySeconds *int `json:"minReadySeconds,omitempty" jsonschema:"minimum=0,maximum=2147483647"`
	// ReadinessProbe decides Ready. Default: TCP connect to Port, else running.
	ReadinessProbe *Probe `json:"readinessProbe,omitempty"`
	// LivenessProbe restarts the server after FailureThreshold failures.
	LivenessProbe *Probe `json:"livenessProbe,omitempty"`
	// RestartPolicy is Always (default), OnFailure or Never.
	RestartPolicy RestartPolicy `json:"restartPolicy,omitempty" jsonschema:"enum=Always,enum=OnFailure,enum=Never,default=Always"`
	// DependsOn names servers that must be Ready before this one starts.
	DependsOn []string `json:"dependsOn,omitempty"`
	// StartupTimeoutSeconds bounds the wait for Ready. Default 300.
	StartupTimeoutSeconds *int `json:"startupTimeoutSeconds,omitempty" jsonschema:"minimum=1,maximum=2147483647,default=300"`
	// TerminationGracePeriodSeconds is the wait after SIGTERM. Default 20.
	TerminationGracePeriodSeconds *int `json:"terminationGracePeriodSeconds,omitempty" jsonschema:"minimum=0,maximum=2147483647,default=20"`
	// KillTimeoutSeconds is the wait after SIGKILL. Default 10.
	KillTimeoutSeconds *int `json:"killTimeoutSeconds,omitempty" jsonschema:"minimum=1,maximum=2147483647,default=10"`
}

// EnvVar is one environment variable.
type EnvVar struct {
	Name  string `json:"name" jsonschema:"required,minLength=1"`
	Value string `json:"value"`
}

// RestartPolicy says when a server that exited is started again.
type RestartPolicy string

// Restart policies.
const (
	RestartAlways    RestartPolicy = "Always"
	RestartOnFailure RestartPolicy = "OnFailure"
	RestartNever     RestartPolicy = "Never"
)

// Probe is a check of a server's health. Exactly one handler is set.
type Probe struct {
	HTTPGet   *HTTPGetAction   `json:"httpGet,omitempty"`
	TCPSocket *TCPSocketAction `json:"tcpSocket,omitempty"`
	Exec      *ExecAction      `json:"exec,omitempty"`

	InitialDelaySeconds int `json:"initialDelaySeconds,omitempty" jsonschema:"minimum=0,maximum=2147483647"`
	// PeriodSeconds defaults to 1.
	PeriodSeconds int `json:"periodSeconds,omitempty" jsonschema:"minimum=0,maximum=2147483647,default=1"`
	// TimeoutSeconds defaults to 1.
	TimeoutSeconds int `json:"timeoutSeconds,omitempty" jsonschema:"minimum=0,maximum=2147483647,default=1"`
	// FailureThreshold defaults to 3.
	FailureThreshold int `json:"failureThreshold,omitempty" jsonschema:"minimum=0,maximum=2147483647,default=3"`
	// SuccessThreshold defaults to 1.
	SuccessThreshold int `json:"successThreshold,omitempty" jsonschema:"minimum=0,maximum=2147483647,default=1"`
}

// HTTPGetAction probes with an HTTP GET on loopback; 2xx and 3xx succeed.
type HTTPGetAction struct {
	Path string `json:"path,omitempty" jsonschema:"pattern=^/,default=/"`
	// Port defaults to the server's port.
	Port int `json:"port,omitempty" jsonschema:"minimum=0,maximum=65535"`
	// Host defaults to 127.0.0.1.
	Host string `json:"host,omitempty"`
}

// TCPSocketAction probes by connecting to a TCP port on loopback.
type TCPSocketAction struct {
	// Port defaults to the server's port.
	Port int `json:"port,omitempty" jsonschema:"minimum=0,maximum=65535"`
	// Host defaults to 127.0.0.1.
	Host string `json:"host,omitempty"`
}

// ExecAction probes by running a command; exit 0 succeeds.
type ExecAction struct {
	Command []string `json:"command" jsonschema:"required,minItems=1"`
}

// Source locates a document in the fleet files.
type Source struct {
	File string // path as given or found in a folder
	Line int    // 1-based line of the document's first line; 0 if unknown
	Doc  int    // 0-based index of the document in its file
	// Fields maps each field path present in the document (like
	// "spec.env[2].name") to its 1-based line, so that Validate can place
	// its errors. Nil for servers not read from a file.
	Fields map[string]int
}
