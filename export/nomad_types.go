package export

import "time"

// The Nomad job the export writes, as the few fields of
// github.com/hashicorp/nomad/api's types that it sets, under the same
// names. A field is left out when nil or zero (omitzero), which decoding
// restores by itself, except where the API has a pointer and the export
// always sets it: that one is written even when zero (Count 0, Attempts 0,
// Unlimited false, MinHealthyTime 0), which for the API differs from unset. Fields are declared in the
// order of their names, so the file's keys are sorted (TestNomadFieldsSorted);
// TestNomadDecodes decodes the file strictly into api.Job and encodes it
// back to the same bytes. They are written here so that the binary does not
// carry nomad/api for one command.

type nomadJob struct {
	Datacenters []string `json:",omitzero"`
	ID          string
	Name        string
	TaskGroups  []*nomadTaskGroup `json:",omitzero"`
	Type        string
}

type nomadTaskGroup struct {
	Count            int
	Meta             map[string]string `json:",omitzero"`
	Name             string
	Networks         []*nomadNetwork        `json:",omitzero"`
	ReschedulePolicy *nomadReschedulePolicy `json:",omitzero"`
	RestartPolicy    *nomadRestartPolicy    `json:",omitzero"`
	Tasks            []*nomadTask           `json:",omitzero"`
	Update           *nomadUpdateStrategy   `json:",omitzero"`
}

type nomadTask struct {
	Config      map[string]any    `json:",omitzero"`
	Driver      string            `json:",omitzero"`
	Env         map[string]string `json:",omitzero"`
	KillSignal  string            `json:",omitzero"`
	KillTimeout time.Duration
	Name        string          `json:",omitzero"`
	Services    []*nomadService `json:",omitzero"`
}

type nomadService struct {
	Checks    []nomadCheck `json:",omitzero"`
	Name      string       `json:",omitzero"`
	PortLabel string       `json:",omitzero"`
	Provider  string       `json:",omitzero"`
}

type nomadCheck struct {
	Args                   []string           `json:",omitzero"`
	CheckRestart           *nomadCheckRestart `json:",omitzero"`
	Command                string             `json:",omitzero"`
	FailuresBeforeCritical int                `json:",omitzero"`
	Interval               time.Duration      `json:",omitzero"`
	Method                 string             `json:",omitzero"`
	Name                   string             `json:",omitzero"`
	OnUpdate               string             `json:",omitzero"`
	Path                   string             `json:",omitzero"`
	PortLabel              string             `json:",omitzero"`
	Protocol               string             `json:",omitzero"`
	SuccessBeforePassing   int                `json:",omitzero"`
	Timeout                time.Duration      `json:",omitzero"`
	Type                   string             `json:",omitzero"`
}

type nomadCheckRestart struct {
	Grace time.Duration `json:",omitzero"`
	Limit int
}

type nomadNetwork struct {
	DynamicPorts  []nomadPort `json:",omitzero"`
	Mode          string      `json:",omitzero"`
	ReservedPorts []nomadPort `json:",omitzero"`
}

type nomadPort struct {
	Label string `json:",omitzero"`
	Value int    `json:",omitzero"`
}

type nomadUpdateStrategy struct {
	HealthCheck      string
	HealthyDeadline  time.Duration
	MinHealthyTime   time.Duration
	ProgressDeadline time.Duration
}

type nomadRestartPolicy struct {
	Attempts int
	Delay    time.Duration
	Interval time.Duration
	Mode     string
}

type nomadReschedulePolicy struct {
	Attempts  int
	Unlimited bool
}
