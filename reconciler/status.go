package reconciler

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/procfleet/procfleet/spec"
)

// Status is the fleet as the reconciler sees it: the shape of status.json
// and of `status -o json` (DESIGN.md).
type Status struct {
	Servers []ServerStatus `json:"servers"`
	Errors  []StatusError  `json:"errors"`
}

// ServerStatus is one server's status.
type ServerStatus struct {
	Name       string      `json:"name"`
	Phase      Phase       `json:"phase"`
	Ready      bool        `json:"ready"`
	PID        int         `json:"pid"`
	Port       int         `json:"port"`
	Restarts   int         `json:"restarts"`
	StartedAt  *time.Time  `json:"startedAt"`
	Reason     string      `json:"reason"`
	Message    string      `json:"message"`
	LastExit   *LastExit   `json:"lastExit"`
	Conditions []Condition `json:"conditions"`
	// ReplicaOf and Index are set for a replica of a server with
	// spec.replicas ("api-1": "api", 1), and left out otherwise.
	ReplicaOf string `json:"replicaOf,omitempty"`
	Index     *int   `json:"index,omitempty"`
	// Events are the server's recent events, oldest first (not written to
	// status.json).
	Events []Event `json:"-"`
}

// StatusError is a fleet-file error that keeps the last good fleet in force.
type StatusError struct {
	File    string `json:"file"`
	Line    int    `json:"line"`
	Field   string `json:"field"`
	Message string `json:"message"`
}

func statusErrors(list spec.ErrorList) []StatusError {
	out := make([]StatusError, 0, len(list))
	for _, fe := range list {
		out = append(out, StatusError{File: fe.File, Line: fe.Line, Field: fe.Field, Message: fe.Message})
	}
	return out
}

// Get returns the named server's status.
func (s Status) Get(name string) (ServerStatus, bool) {
	i := sort.Search(len(s.Servers), func(i int) bool { return s.Servers[i].Name >= name })
	if i < len(s.Servers) && s.Servers[i].Name == name {
		return s.Servers[i], true
	}
	return ServerStatus{}, false
}

// ReadStatus reads a status.json written by WriteStatus.
func ReadStatus(path string) (Status, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Status{}, fmt.Errorf("read status: %w", err)
	}
	var s Status
	if err := json.Unmarshal(b, &s); err != nil {
		return Status{}, fmt.Errorf("read status %s: %w", path, err)
	}
	return s, nil
}

// WriteStatus writes s to path atomically (temp file in the same folder,
// then rename), mode 0600.
func WriteStatus(path string, s Status) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return fmt.Errorf("write status: %w", err)
	}
	b = append(b, '\n')
	f, err := os.CreateTemp(filepath.Dir(path), ".status-*.tmp")
	if err != nil {
		return fmt.Errorf("write status: %w", err)
	}
	tmp := f.Name()
	_, err = f.Write(b)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp, 0o600)
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("write status %s: %w", path, err)
	}
	return nil
}
