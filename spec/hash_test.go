package spec

import (
	"slices"
	"strings"
	"testing"
)

func baseServer() Server {
	grace := 20
	return Server{
		Metadata: ObjectMeta{Name: "api", Labels: map[string]string{"tier": "web"}},
		Spec: ServerSpec{
			Command:    []string{"./api"},
			Args:       []string{"--port", "8080"},
			Env:        []EnvVar{{Name: "A", Value: "1"}, {Name: "B", Value: "2"}},
			WorkingDir: "/srv",
			Port:       8080,
			ReadinessProbe: &Probe{
				HTTPGet: &HTTPGetAction{Path: "/health", Port: 8080},
			},
			TerminationGracePeriodSeconds: &grace,
		},
	}
}

func TestHash(t *testing.T) {
	base := baseServer()
	h0 := base.Hash()
	if !strings.HasPrefix(h0, "sha256:") || len(h0) != len("sha256:")+64 {
		t.Fatalf("Hash = %q, want sha256:<64 hex>", h0)
	}
	tests := []struct {
		name    string
		change  func(s *Server)
		changes []string // FieldDiff; nil: hash must stay
	}{
		{"command", func(s *Server) { s.Spec.Command = []string{"./api2"} }, []string{"command"}},
		{"args", func(s *Server) { s.Spec.Args = append(s.Spec.Args, "-v") }, []string{"args"}},
		{"arg moved to command", func(s *Server) {
			s.Spec.Command = []string{"./api", "--port"}
			s.Spec.Args = []string{"8080"}
		}, []string{"command", "args"}},
		{"env value", func(s *Server) { s.Spec.Env[1].Value = "3" }, []string{"env"}},
		{"env order", func(s *Server) { s.Spec.Env[0], s.Spec.Env[1] = s.Spec.Env[1], s.Spec.Env[0] }, []string{"env"}},
		{"workingDir", func(s *Server) { s.Spec.WorkingDir = "/srv/x" }, []string{"workingDir"}},
		{"port", func(s *Server) { s.Spec.Port = 8081 }, []string{"port"}},
		{"probe", func(s *Server) { s.Spec.ReadinessProbe.HTTPGet.Path = "/ready" }, nil},
		{"no probe", func(s *Server) { s.Spec.ReadinessProbe = nil }, nil},
		{"timeouts", func(s *Server) { g := 5; s.Spec.TerminationGracePeriodSeconds = &g }, nil},
		{"labels", func(s *Server) { s.Metadata.Labels = nil }, nil},
		{"restartPolicy", func(s *Server) { s.Spec.RestartPolicy = RestartNever }, nil},
		{"dependsOn", func(s *Server) { s.Spec.DependsOn = []string{"db"} }, nil},
		{"empty args", func(s *Server) { s.Spec.Args = nil; s.Spec.Command = []string{"./api", "--port", "8080"} }, []string{"command", "args"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := baseServer()
			tt.change(&s)
			h := s.Hash()
			if (h != h0) != (tt.changes != nil) {
				t.Errorf("hash changed = %v, want %v", h != h0, tt.changes != nil)
			}
			if got := FieldDiff(base.Spec, s.Spec); !slices.Equal(got, tt.changes) {
				t.Errorf("FieldDiff = %v, want %v", got, tt.changes)
			}
		})
	}
	// nil and empty lists are the same process.
	a, b := baseServer(), baseServer()
	a.Spec.Args, b.Spec.Args = nil, []string{}
	a.Spec.Command = []string{"./api", "--port", "8080"}
	b.Spec.Command = a.Spec.Command
	if a.Hash() != b.Hash() {
		t.Error("nil and empty args hash differently")
	}
}

// TestHashStable pins the hash of one spec: changing the encoding would
// replace every running server after an upgrade, so it must be deliberate.
func TestHashStable(t *testing.T) {
	s := Server{Spec: ServerSpec{Command: []string{"./api"}, WorkingDir: "/srv", Port: 80}}
	const want = "sha256:c954ed984708d3e5a1e5c1c54d0d73e4b3b8e87397d5913ab3bd21851791425d"
	if got := s.Hash(); got != want {
		t.Errorf("Hash = %s, want %s", got, want)
	}
}
