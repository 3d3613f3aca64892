package spec

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// load loads the files (name -> content) from a new folder, with env as
// procfleet's own environment, and fails the test on any error.
func load(t *testing.T, files map[string]string, env ...string) (*Fleet, string) {
	t.Helper()
	dir := writeFiles(t, files)
	f, err := Load(dir)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	f.Environ = env
	f.instances = instancesOf(f.Servers, lookupIn(env))
	return f, dir
}

func envOf(in Instance) string {
	var b []string
	for _, v := range in.Env {
		b = append(b, v.Name+"="+v.Value)
	}
	return strings.Join(b, " ")
}

func TestInstancesReplicas(t *testing.T) {
	f, _ := load(t, map[string]string{"a.yaml": server("api", "  port: 8080\n  readinessProbe:\n    httpGet: {path: /health}\n  livenessProbe:\n    tcpSocket: {port: 9000}\n") +
		"---\n" + server("one", "  replicas: 1\n") +
		"---\n" + server("none", "  replicas: 0\n  port: 7000\n") +
		"---\n" + server("web", "  replicas: 3\n  port: 8090\n  readinessProbe:\n    httpGet: {path: /health}\n  livenessProbe:\n    tcpSocket: {port: 9001}\n")})
	type want struct {
		name, of     string
		index, port  int
		env          string
		ready, alive int // probe ports; -1 none
	}
	wants := []want{
		{"api", "", 0, 8080, "PORT=8080 PROCFLEET_SERVER=api", 8080, 9000},
		{"one-0", "one", 0, 0, "PROCFLEET_REPLICA=0 PROCFLEET_SERVER=one-0", -1, -1},
		{"web-0", "web", 0, 8090, "PORT=8090 PROCFLEET_REPLICA=0 PROCFLEET_SERVER=web-0", 8090, 9001},
		{"web-1", "web", 1, 8091, "PORT=8091 PROCFLEET_REPLICA=1 PROCFLEET_SERVER=web-1", 8091, 9001},
		{"web-2", "web", 2, 8092, "PORT=8092 PROCFLEET_REPLICA=2 PROCFLEET_SERVER=web-2", 8092, 9001},
	}
	all := f.Instances()
	if len(all) != len(wants) {
		t.Fatalf("got %d instances, want %d", len(all), len(wants))
	}
	probePort := func(p *Probe) int {
		switch {
		case p == nil:
			return -1
		case p.HTTPGet != nil:
			return p.HTTPGet.Port
		case p.TCPSocket != nil:
			return p.TCPSocket.Port
		}
		return 0
	}
	for i, w := range wants {
		in := all[i]
		got := want{in.Name, in.ReplicaOf, in.Index, in.Port, envOf(in), probePort(in.Readiness), probePort(in.Liveness)}
		if got != w {
			t.Errorf("instance %d = %+v\nwant %+v", i, got, w)
		}
		if in.Server.Metadata.Name != strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(w.name, "-0"), "-1"), "-2") {
			t.Errorf("%s: Server = %s", in.Name, in.Server.Metadata.Name)
		}
		if in.Replicated() != (w.of != "") {
			t.Errorf("%s: Replicated = %v", in.Name, in.Replicated())
		}
	}
	if all[2].Server != all[3].Server {
		t.Error("replicas do not share their Server")
	}
	if all[2].Hash == all[3].Hash {
		t.Error("two replicas on different ports have the same hash")
	}
	none, _ := f.Get("none")
	if got := none.InstanceNames(); len(got) != 0 {
		t.Errorf("replicas: 0 has instances %v", got)
	}
	if in, ok := f.Instance("web-1"); !ok || in.Port != 8091 {
		t.Errorf("Instance(web-1) = %+v, %v", in, ok)
	}
	if _, ok := f.Instance("web"); ok {
		t.Error("Instance(web) found: a replicated server is no instance")
	}
	// A Fleet built in code computes its instances on demand.
	code := &Fleet{Servers: f.Servers}
	if got := code.Instances(); len(got) != len(all) || got[4].Name != "web-2" {
		t.Errorf("Instances of a Fleet built in code = %d", len(got))
	}
}

// TestScaleKeepsHashes: the replica count is in no instance's hash, so
// scaling never replaces the instances that stay.
func TestScaleKeepsHashes(t *testing.T) {
	dir := t.TempDir()
	hashes := func(n int) []string {
		file := filepath.Join(dir, "a.yaml")
		if err := os.WriteFile(file, []byte(server("w", fmt.Sprintf("  replicas: %d\n  port: 9000\n  args: [--id, $(PROCFLEET_REPLICA)]\n", n))), 0o644); err != nil {
			t.Fatal(err)
		}
		f, err := Load(file)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, in := range f.Instances() {
			out = append(out, in.Hash)
		}
		return out
	}
	three, five := hashes(3), hashes(5)
	if !slices.Equal(three, five[:3]) {
		t.Errorf("scaling 3 -> 5 changed the hashes of w-0..w-2")
	}
	if len(slices.Compact(slices.Clone(five))) != 5 {
		t.Errorf("replicas share a hash: %v", five)
	}
}

func TestInstanceEnvAndExpansion(t *testing.T) {
	files := map[string]string{
		".env":      "# shared\nDB_HOST=db.local\nLEVEL=info\nPORT=3000\nURL=$(PORT)\n",
		"local.env": "LEVEL=debug\nEXTRA='a b'\n",
		"procfleet.yaml": server("api", `  args: [--db, "$(DB_HOST):$(DB_PORT)", --url, $(SELF), --home, $(HOME), --literal, $$(PORT), --missing, $(NOPE)]
  envFile: [.env, local.env]
  port: 8080
  env:
  - {name: DB_PORT, value: "5432"}
  - {name: SELF, value: "http://127.0.0.1:$(PORT)/$(PROCFLEET_SERVER)"}
  - {name: EARLY, value: "$(LATE)"}
  - {name: LATE, value: "late"}
  - {name: LEVEL, value: "$(LEVEL)-override"}
  - {name: HOMEDIR, value: "$(HOME)/x"}
`),
	}
	f, dir := load(t, files, "HOME=/home/me", "LEVEL=inherited", "PATH=/bin")
	in := f.Instances()[0]
	wantArgs := []string{"--db", "db.local:5432", "--url", "http://127.0.0.1:8080/api", "--home", "/home/me", "--literal", "$(PORT)", "--missing", "$(NOPE)"}
	if !slices.Equal(in.Args, wantArgs) {
		t.Errorf("args = %q\nwant   %q", in.Args, wantArgs)
	}
	// Order: env files in order (later wins, first position kept), then
	// env, then procfleet's own; PORT from .env loses to spec.port.
	want := "DB_HOST=db.local LEVEL=debug-override URL=$(PORT) EXTRA=a b DB_PORT=5432 SELF=http://127.0.0.1:8080/api EARLY=$(LATE) LATE=late HOMEDIR=/home/me/x PORT=8080 PROCFLEET_SERVER=api"
	if got := envOf(in); got != want {
		t.Errorf("env =\n %s\nwant\n %s", got, want)
	}
	from := map[string]string{}
	for _, v := range in.Env {
		from[v.Name] = v.From.String()
	}
	fleetFile := filepath.Join(dir, "procfleet.yaml")
	for name, w := range map[string]string{
		"DB_HOST": filepath.Join(dir, ".env") + ":2 (spec.envFile[0])",
		"EXTRA":   filepath.Join(dir, "local.env") + ":2 (spec.envFile[1])",
		"LEVEL":   "spec.env[4] (" + fleetFile + ":15)",
		"PORT":    "procfleet (spec.port)",
	} {
		if from[name] != w {
			t.Errorf("%s comes from %q, want %q", name, from[name], w)
		}
	}
	if got := in.EnvList(); got[0] != "DB_HOST=db.local" || len(got) != len(in.Env) {
		t.Errorf("EnvList = %q", got)
	}
	if got := f.EnvFiles(); !slices.Equal(got, []string{filepath.Join(dir, ".env"), filepath.Join(dir, "local.env")}) {
		t.Errorf("EnvFiles = %q", got)
	}

	// The hash ignores procfleet's own environment: another shell, the
	// same hash, though the process gets other values.
	other := instancesOf(f.Servers, lookupIn([]string{"HOME=/root", "LEVEL=x"}))[0]
	if other.Hash != in.Hash || other.Hash != f.Servers[0].Hash() {
		t.Errorf("hash depends on the inherited environment")
	}
	if other.Args[5] != "/root" {
		t.Errorf("args[5] = %q, want the inherited HOME", other.Args[5])
	}
}

// TestEnvFileEditChangesExactlyItsServers: editing one key of an env file
// changes the hash of the servers that take that key from it, and of no
// other (one overrides the key in env; one reads another file).
func TestEnvFileEditChangesExactlyItsServers(t *testing.T) {
	files := map[string]string{
		".env":      "KEY=1\nOTHER=x\n",
		"other.env": "KEY=1\n",
		"a.yaml": server("uses", "  envFile: [.env]\n") + "---\n" +
			server("overrides", "  envFile: [.env]\n  env: [{name: KEY, value: mine}]\n") + "---\n" +
			server("refers", "  envFile: [.env]\n  args: [$(KEY)]\n  env: [{name: KEY, value: mine}]\n") + "---\n" +
			server("elsewhere", "  envFile: [other.env]\n") + "---\n" +
			server("none", ""),
	}
	dir := writeFiles(t, files)
	hashes := func() map[string]string {
		f, err := Load(dir)
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]string{}
		for _, in := range f.Instances() {
			m[in.Name] = in.Hash
		}
		return m
	}
	before := hashes()
	if err := os.WriteFile(filepath.Join(dir, ".env"), []byte("KEY=2\nOTHER=x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	after := hashes()
	var changed []string
	for name := range before {
		if before[name] != after[name] {
			changed = append(changed, name)
		}
	}
	slices.Sort(changed)
	if !slices.Equal(changed, []string{"uses"}) {
		t.Errorf("changed = %v, want [uses]", changed)
	}
}

func TestMinReady(t *testing.T) {
	five := 5
	tests := []struct {
		name string
		sp   ServerSpec
		want time.Duration
	}{
		{"running", ServerSpec{}, time.Second},
		{"port: default TCP probe", ServerSpec{Port: 80}, 0},
		{"declared probe", ServerSpec{ReadinessProbe: &Probe{Exec: &ExecAction{Command: []string{"x"}}}}, 0},
		{"declared", ServerSpec{Port: 80, MinReadySeconds: &five}, 5 * time.Second},
		{"declared 0 while running", ServerSpec{MinReadySeconds: new(int)}, 0},
	}
	for _, tt := range tests {
		if got := tt.sp.MinReady(); got != tt.want {
			t.Errorf("%s: MinReady = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestChanges(t *testing.T) {
	base := func() Server {
		s := baseServer()
		s.EnvFiles = []EnvFile{{Path: "/srv/.env", Vars: []Var{{Name: "FROM_FILE", Value: "1"}, {Name: "A", Value: "file"}}}}
		return s
	}
	tests := []struct {
		name   string
		change func(s *Server)
		want   []string // "field[var] how old->new restart"
	}{
		{"nothing", func(*Server) {}, nil},
		{"args", func(s *Server) { s.Spec.Args = []string{"--port", "9090"} }, []string{`spec.args ["--port", "8080"]->["--port", "9090"] true`}},
		{"command", func(s *Server) { s.Spec.Command = []string{"./api2"} }, []string{`spec.command ["./api"]->["./api2"] true`}},
		{"workingDir", func(s *Server) { s.Spec.WorkingDir = "/other" }, []string{"spec.workingDir /srv->/other true"}},
		{"port", func(s *Server) { s.Spec.Port = 8081 }, []string{"spec.port 8080->8081 true"}},
		{"env value", func(s *Server) { s.Spec.Env[1].Value = "secret2" }, []string{"spec.env[B] changed true"}},
		{"env added and removed", func(s *Server) { s.Spec.Env = []EnvVar{{Name: "A", Value: "1"}, {Name: "C", Value: "3"}} }, []string{"spec.env[B] removed true", "spec.env[C] added true"}},
		{"env file value", func(s *Server) { s.EnvFiles[0].Vars[0].Value = "2" }, []string{"spec.env[FROM_FILE] changed true"}},
		{"env file value overridden by env", func(s *Server) { s.EnvFiles[0].Vars[1].Value = "other" }, nil},
		{"args through $(NAME)", func(s *Server) {
			s.Spec.Args = []string{"$(FROM_FILE)"}
		}, []string{`spec.args ["--port", "8080"]->["1"] true`}},
		{"probe", func(s *Server) { s.Spec.ReadinessProbe.HTTPGet.Path = "/ready" }, []string{`spec.readinessProbe {"httpGet":{"path":"/health","port":8080}}->{"httpGet":{"path":"/ready","port":8080}} false`}},
		{"grace", func(s *Server) { g := 5; s.Spec.TerminationGracePeriodSeconds = &g }, []string{"spec.terminationGracePeriodSeconds 20->5 false"}},
		{"labels", func(s *Server) { s.Metadata.Labels = map[string]string{"tier": "db"} }, []string{`metadata.labels {"tier":"web"}->{"tier":"db"} false`}},
		{"minReady", func(s *Server) { m := 3; s.Spec.MinReadySeconds = &m }, []string{"spec.minReadySeconds 0->3 false"}},
		{"envFile list only", func(s *Server) { s.Spec.EnvFile = []string{".env"} }, []string{`spec.envFile null->[".env"] false`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, c := base(), base()
			tt.change(&c)
			oi, ci := o.instance(-1, nil), c.instance(-1, nil)
			var got []string
			restart := false
			for _, ch := range Changes(&oi, &ci) {
				s := ch.Field
				if ch.Var != "" {
					s += "[" + ch.Var + "] " + ch.How
					if ch.Old != "" || ch.New != "" {
						t.Errorf("env change carries values: %+v", ch)
					}
				} else {
					s += " " + ch.Old + "->" + ch.New
				}
				got = append(got, fmt.Sprintf("%s %v", s, ch.Restart))
				restart = restart || ch.Restart
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("Changes =\n %q\nwant\n %q", got, tt.want)
			}
			if restart != (oi.Hash != ci.Hash) {
				t.Errorf("a restart change = %v, but hashes differ = %v", restart, oi.Hash != ci.Hash)
			}
		})
	}
}
