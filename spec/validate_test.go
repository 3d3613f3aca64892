package spec

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// header starts every document of the tests.
const header = "apiVersion: procfleet.dev/v1alpha1\nkind: Server\n"

// server returns a valid document named name with extra lines appended to
// its spec (indented by two spaces by the caller).
func server(name, spec string) string {
	return header + "metadata:\n  name: " + name + "\nspec:\n  command: [./bin/x]\n" + spec
}

// writeFiles writes files (name -> content) into a new temporary folder and
// returns it.
func writeFiles(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// wantErr is one expected error: base name of the file, line, field and a
// part of the message.
type wantErr struct {
	file  string
	line  int
	field string
	msg   string
}

func (w wantErr) String() string {
	return fmt.Sprintf("%s:%d: %s: ...%s...", w.file, w.line, w.field, w.msg)
}

func checkErrors(t *testing.T, err error, want []wantErr) {
	t.Helper()
	if len(want) == 0 {
		if err != nil {
			t.Fatalf("got error %v, want none", err)
		}
		return
	}
	list, ok := err.(ErrorList)
	if !ok {
		t.Fatalf("got error %T %v, want an ErrorList", err, err)
	}
	if len(list) != len(want) {
		t.Fatalf("got %d errors, want %d:\n%v\nwant:\n%v", len(list), len(want), list, want)
	}
	for i, w := range want {
		g := list[i]
		if filepath.Base(g.File) != w.file || g.Line != w.line || g.Field != w.field || !strings.Contains(g.Message, w.msg) {
			t.Errorf("error %d:\n got %s:%d: %s: %s\nwant %v", i, filepath.Base(g.File), g.Line, g.Field, g.Message, w)
		}
	}
}

func TestValidationRules(t *testing.T) {
	long := strings.Repeat("a", 64)
	tests := []struct {
		name  string
		files map[string]string
		want  []wantErr
	}{
		{"valid", map[string]string{"a.yaml": server("api", "  port: 8080\n  dependsOn: [db]\n") + "---\n" + server("db", "")}, nil},
		{"unknown field suggests", map[string]string{"a.yaml": server("api", "  comand: [x]\n")}, []wantErr{{"a.yaml", 7, "spec.comand", `unknown field "comand", did you mean "command"?`}}},
		{"unknown nested field", map[string]string{"a.yaml": server("api", "  port: 80\n  readinessProbe:\n    httpGet: {path: /, prot: 80}\n")}, []wantErr{{"a.yaml", 9, "spec.readinessProbe.httpGet.prot", `did you mean "port"?`}}},
		{"unknown top-level field", map[string]string{"a.yaml": server("api", "") + "metdata: {}\n"}, []wantErr{{"a.yaml", 7, "metdata", `did you mean "metadata"?`}}},
		{"far unknown field lists valid ones", map[string]string{"a.yaml": server("api", "  zzzzzzzzzzzz: 1\n")}, []wantErr{{"a.yaml", 7, "spec.zzzzzzzzzzzz", "valid fields: command, args"}}},
		{"wrong type", map[string]string{"a.yaml": server("api", "  port: \"8080\"\n")}, []wantErr{{"a.yaml", 7, "spec.port", `expected an integer, got string "8080"`}}},
		{"number for a string", map[string]string{"a.yaml": server("api", "  args: [--port, 8080]\n")}, []wantErr{{"a.yaml", 7, "spec.args[1]", `expected a string, got integer 8080 (quote it: "8080")`}}},
		{"duplicate field", map[string]string{"a.yaml": server("api", "  port: 1\n  port: 2\n")}, []wantErr{{"a.yaml", 8, "spec.port", "duplicate field \"port\" (first at line 7)"}}},
		{"wrong apiVersion", map[string]string{"a.yaml": "apiVersion: v1\nkind: Server\nmetadata: {name: a}\nspec: {command: [x]}\n"}, []wantErr{{"a.yaml", 1, "apiVersion", `must be "procfleet.dev/v1alpha1"`}}},
		{"wrong kind", map[string]string{"a.yaml": "apiVersion: procfleet.dev/v1alpha1\nkind: Pod\nmetadata: {name: a}\nspec: {bogus: 1}\n"}, []wantErr{{"a.yaml", 2, "kind", `must be "Server"`}}},
		{"missing kind", map[string]string{"a.yaml": "apiVersion: procfleet.dev/v1alpha1\nmetadata: {name: a}\n"}, []wantErr{{"a.yaml", 1, "kind", "required"}}},
		{"not a mapping", map[string]string{"a.yaml": "- a\n- b\n"}, []wantErr{{"a.yaml", 1, "", "expected a Server document"}}},
		{"bad yaml", map[string]string{"a.yaml": server("api", "  port: [\n")}, []wantErr{{"a.yaml", 7, "", "invalid YAML"}}},
		{"missing name", map[string]string{"a.yaml": header + "metadata: {}\nspec: {command: [x]}\n"}, []wantErr{{"a.yaml", 3, "metadata.name", "required: a DNS label"}}},
		{"upper case name", map[string]string{"a.yaml": server("Api", "")}, []wantErr{{"a.yaml", 4, "metadata.name", "must be a DNS label"}}},
		{"path name", map[string]string{"a.yaml": server("../x", "")}, []wantErr{{"a.yaml", 4, "metadata.name", "must be a DNS label"}}},
		{"absolute name", map[string]string{"a.yaml": server("/etc/passwd", "")}, []wantErr{{"a.yaml", 4, "metadata.name", "must be a DNS label"}}},
		{"long name", map[string]string{"a.yaml": server(long, "")}, []wantErr{{"a.yaml", 4, "metadata.name", "longer than 63"}}},
		{"duplicate names across files", map[string]string{"a.yaml": server("api", ""), "b.yaml": "# comment\n" + server("api", "")}, []wantErr{
			{"a.yaml", 4, "metadata.name", "b.yaml:5"},
			{"b.yaml", 5, "metadata.name", "a.yaml:4"},
		}},
		{"unknown dependency", map[string]string{"a.yaml": server("api", "  dependsOn: [dbb]\n") + "---\n" + server("db", "")}, []wantErr{{"a.yaml", 7, "spec.dependsOn[0]", `unknown server "dbb", did you mean "db"?`}}},
		{"self dependency", map[string]string{"a.yaml": server("api", "  dependsOn:\n  - api\n")}, []wantErr{{"a.yaml", 8, "spec.dependsOn[0]", "cannot depend on itself"}}},
		{"duplicate dependency", map[string]string{"a.yaml": server("api", "  dependsOn: [db, db]\n") + "---\n" + server("db", "")}, []wantErr{{"a.yaml", 7, "spec.dependsOn[1]", "duplicate dependency"}}},
		{"cycle", map[string]string{
			"a.yaml": server("c", "  dependsOn: [a]\n"),
			"b.yaml": server("a", "  dependsOn: [x, b]\n") + "---\n" + server("b", "  dependsOn: [c]\n") + "---\n" + server("x", ""),
		}, []wantErr{{"b.yaml", 7, "spec.dependsOn[1]", "dependency cycle: a -> b -> c -> a"}}},
		{"port too large", map[string]string{"a.yaml": server("api", "  port: 65536\n")}, []wantErr{{"a.yaml", 7, "spec.port", "between 1 and 65535"}}},
		{"port negative", map[string]string{"a.yaml": server("api", "  port: -1\n")}, []wantErr{{"a.yaml", 7, "spec.port", "between 1 and 65535"}}},
		{"probe port", map[string]string{"a.yaml": server("api", "  readinessProbe:\n    tcpSocket:\n      port: 70000\n")}, []wantErr{{"a.yaml", 9, "spec.readinessProbe.tcpSocket.port", "between 1 and 65535"}}},
		{"probe port required", map[string]string{"a.yaml": server("api", "  livenessProbe:\n    httpGet: {path: /x}\n")}, []wantErr{{"a.yaml", 8, "spec.livenessProbe.httpGet.port", "required when spec.port is not set"}}},
		{"empty command", map[string]string{"a.yaml": header + "metadata: {name: a}\nspec:\n  command: []\n"}, []wantErr{{"a.yaml", 5, "spec.command", "required"}}},
		{"missing command", map[string]string{"a.yaml": header + "metadata: {name: a}\nspec:\n  port: 1\n"}, []wantErr{{"a.yaml", 4, "spec.command", "required"}}},
		{"empty command[0]", map[string]string{"a.yaml": header + "metadata: {name: a}\nspec:\n  command:\n  - \"\"\n"}, []wantErr{{"a.yaml", 6, "spec.command[0]", "must not be empty"}}},
		{"NUL in args", map[string]string{"a.yaml": server("api", "  args: [\"a\\0b\"]\n")}, []wantErr{{"a.yaml", 7, "spec.args[0]", "NUL"}}},
		{"bad restartPolicy", map[string]string{"a.yaml": server("api", "  restartPolicy: always\n")}, []wantErr{{"a.yaml", 7, "spec.restartPolicy", `supported values: "Always", "OnFailure", "Never"`}}},
		{"negative grace", map[string]string{"a.yaml": server("api", "  terminationGracePeriodSeconds: -1\n")}, []wantErr{{"a.yaml", 7, "spec.terminationGracePeriodSeconds", "must not be negative"}}},
		{"zero startup timeout", map[string]string{"a.yaml": server("api", "  startupTimeoutSeconds: 0\n")}, []wantErr{{"a.yaml", 7, "spec.startupTimeoutSeconds", "at least 1"}}},
		{"huge kill timeout", map[string]string{"a.yaml": server("api", "  killTimeoutSeconds: 99999999999\n")}, []wantErr{{"a.yaml", 7, "spec.killTimeoutSeconds", "at most 2147483647"}}},
		{"negative probe seconds", map[string]string{"a.yaml": server("api", "  port: 1\n  readinessProbe:\n    tcpSocket: {}\n    periodSeconds: -2\n    initialDelaySeconds: -1\n")}, []wantErr{
			{"a.yaml", 10, "spec.readinessProbe.periodSeconds", "must not be negative"},
			{"a.yaml", 11, "spec.readinessProbe.initialDelaySeconds", "must not be negative"},
		}},
		{"probe without handler", map[string]string{"a.yaml": server("api", "  readinessProbe:\n    periodSeconds: 2\n")}, []wantErr{{"a.yaml", 7, "spec.readinessProbe", "exactly one handler"}}},
		{"probe with two handlers", map[string]string{"a.yaml": server("api", "  port: 1\n  readinessProbe:\n    tcpSocket: {}\n    exec: {command: [check]}\n")}, []wantErr{{"a.yaml", 8, "spec.readinessProbe", "has 2 handlers (tcpSocket, exec)"}}},
		{"exec probe empty", map[string]string{"a.yaml": server("api", "  livenessProbe:\n    exec: {command: []}\n")}, []wantErr{{"a.yaml", 8, "spec.livenessProbe.exec.command", "required"}}},
		{"liveness success threshold", map[string]string{"a.yaml": server("api", "  livenessProbe:\n    exec: {command: [x]}\n    successThreshold: 2\n")}, []wantErr{{"a.yaml", 9, "spec.livenessProbe.successThreshold", "must be 1"}}},
		{"http path", map[string]string{"a.yaml": server("api", "  port: 1\n  readinessProbe:\n    httpGet:\n      path: health\n")}, []wantErr{{"a.yaml", 10, "spec.readinessProbe.httpGet.path", `must start with "/"`}}},
		{"http host", map[string]string{"a.yaml": server("api", "  port: 1\n  readinessProbe:\n    httpGet:\n      host: \"a b\"\n")}, []wantErr{{"a.yaml", 10, "spec.readinessProbe.httpGet.host", "invalid host"}}},
		{"env name empty", map[string]string{"a.yaml": server("api", "  env:\n  - {name: A, value: x}\n  - {value: x}\n")}, []wantErr{{"a.yaml", 9, "spec.env[1].name", "required"}}},
		{"env name with =", map[string]string{"a.yaml": server("api", "  env:\n  - {name: A, value: x}\n  - {name: B, value: x}\n  - name: C=D\n")}, []wantErr{{"a.yaml", 10, "spec.env[2].name", "must not contain '='"}}},
		{"env duplicate", map[string]string{"a.yaml": server("api", "  env:\n  - name: A\n  - name: A\n")}, []wantErr{{"a.yaml", 9, "spec.env[1].name", "duplicate name \"A\" (first at spec.env[0])"}}},
		{"decoding error not repeated", map[string]string{"a.yaml": header + "metadata: x\nspec:\n  command: ./bin/x\n"}, []wantErr{
			{"a.yaml", 3, "metadata", "expected a mapping, got string \"x\""},
			{"a.yaml", 5, "spec.command", "expected a sequence, got string"},
		}},
		// Issue 15, 16, 19: envFile, port 0, replicas, minReadySeconds.
		{"port 0", map[string]string{"a.yaml": server("api", "  port: 0\n")}, []wantErr{{"a.yaml", 7, "spec.port", "port 0 is not a port: omit spec.port"}}},
		{"missing env file", map[string]string{"a.yaml": server("api", "  envFile:\n  - .env\n  - missing.env\n"), ".env": "A=1\n"}, []wantErr{{"a.yaml", 9, "spec.envFile[1]", "missing.env: no such file or directory"}}},
		{"env file syntax", map[string]string{"a.yaml": server("api", "  envFile: [.env]\n") + "---\n" + server("db", "  envFile: [.env]\n"), ".env": "A=1\nB\n\nC='x\n"}, []wantErr{
			{".env", 2, "", "expected KEY=VALUE (env file of api, spec.envFile[0])"},
			{".env", 4, "", "C: the quoted value is not closed"},
		}},
		{"empty envFile entry", map[string]string{"a.yaml": server("api", "  envFile: [\"\"]\n")}, []wantErr{{"a.yaml", 7, "spec.envFile[0]", "must not be empty"}}},
		{"reserved env name", map[string]string{"a.yaml": server("api", "  env:\n  - {name: PROCFLEET_SERVER, value: x}\n")}, []wantErr{{"a.yaml", 8, "spec.env[0].name", "PROCFLEET_SERVER is set by procfleet"}}},
		{"negative minReadySeconds", map[string]string{"a.yaml": server("api", "  minReadySeconds: -1\n")}, []wantErr{{"a.yaml", 7, "spec.minReadySeconds", "must not be negative"}}},
		{"negative replicas", map[string]string{"a.yaml": server("api", "  replicas: -1\n")}, []wantErr{{"a.yaml", 7, "spec.replicas", "must not be negative"}}},
		{"too many replicas", map[string]string{"a.yaml": server("api", "  replicas: 1001\n")}, []wantErr{{"a.yaml", 7, "spec.replicas", "at most 1000"}}},
		{"replicas past port 65535", map[string]string{"a.yaml": server("api", "  port: 65534\n  replicas: 3\n")}, []wantErr{{"a.yaml", 8, "spec.replicas", "need ports up to 65536"}}},
		{"replica name too long", map[string]string{"a.yaml": server(strings.Repeat("a", 62), "  replicas: 10\n")}, []wantErr{{"a.yaml", 7, "spec.replicas", "longer than 63 characters"}}},
		{"name of a replica", map[string]string{"a.yaml": server("api", "  replicas: 2\n") + "---\n" + server("api-7", "")}, []wantErr{{"a.yaml", 12, "metadata.name", `name "api-7" is taken by the replicas of api (`}}},
		{"same port", map[string]string{"a.yaml": server("api", "  port: 8080\n") + "---\n" + server("web", "  port: 8080\n")}, []wantErr{{"a.yaml", 15, "spec.port", "port 8080 is both web's and api's ("}}},
		{"replica range overlaps", map[string]string{"a.yaml": server("api", "  port: 8080\n  replicas: 3\n") + "---\n" + server("web", "  port: 8082\n")}, []wantErr{{"a.yaml", 16, "spec.port", "port 8082 is both web's and api-2's ("}}},
		{"two ranges overlap", map[string]string{"a.yaml": server("api", "  port: 8080\n  replicas: 3\n") + "---\n" + server("web", "  port: 8081\n  replicas: 2\n")}, []wantErr{{"a.yaml", 16, "spec.port", "port 8081 is both web-0's and api-1's ("}}},
		{"adjacent ranges", map[string]string{"a.yaml": server("api", "  port: 8080\n  replicas: 3\n") + "---\n" + server("web", "  port: 8083\n")}, nil},
		{"no replicas, no ports", map[string]string{"a.yaml": server("api", "  port: 8080\n  replicas: 0\n") + "---\n" + server("web", "  port: 8080\n")}, nil},
		{"probe ports do not count", map[string]string{"a.yaml": server("api", "  port: 8080\n  readinessProbe:\n    tcpSocket: {port: 9000}\n") + "---\n" + server("web", "  port: 9000\n")}, nil},
		// Hints for compose, process-compose and PM2 habits.
		{"string command", map[string]string{"a.yaml": header + "metadata: {name: a}\nspec:\n  command: ./bin/api --port 8080\n"}, []wantErr{{"a.yaml", 5, "spec.command", `expected a sequence, got string "./bin/api --port 8080": write an argv list, [./bin/api, --port, "8080"], or [sh, -c, "..."]`}}},
		{"shell command string", map[string]string{"a.yaml": header + "metadata: {name: a}\nspec:\n  command: \"./migrate && ./api\"\n"}, []wantErr{{"a.yaml", 5, "spec.command", `procfleet runs no shell: write [sh, -c, "./migrate && ./api"]`}}},
		{"env mapping", map[string]string{"a.yaml": server("api", "  env:\n    LOG_LEVEL: debug\n    PORT_X: 1\n")}, []wantErr{{"a.yaml", 8, "spec.env", "env is a list of {name, value}, not a mapping: write [{name: LOG_LEVEL, value: debug}, {name: PORT_X, value: \"1\"}]"}}},
		{"env list of strings", map[string]string{"a.yaml": server("api", "  env:\n  - LOG_LEVEL=debug\n")}, []wantErr{{"a.yaml", 8, "spec.env[0]", "write {name: LOG_LEVEL, value: debug}"}}},
		{"probe handler at spec level", map[string]string{"a.yaml": server("api", "  httpGet: {path: /health}\n")}, []wantErr{{"a.yaml", 7, "spec.httpGet", "did you mean spec.readinessProbe.httpGet?"}}},
		{"probe without handler level", map[string]string{"a.yaml": server("api", "  port: 1\n  readinessProbe:\n    path: /health\n")}, []wantErr{{"a.yaml", 9, "spec.readinessProbe.path", "did you mean spec.readinessProbe.httpGet.path?"}}},
		{"compose healthcheck", map[string]string{"a.yaml": server("api", "  healthcheck: {}\n")}, []wantErr{{"a.yaml", 7, "spec.healthcheck", `did you mean "readinessProbe"?`}}},
		{"compose depends_on", map[string]string{"a.yaml": server("api", "  depends_on: [db]\n")}, []wantErr{{"a.yaml", 7, "spec.depends_on", `did you mean "dependsOn"?`}}},
		{"spec field at top level", map[string]string{"a.yaml": server("api", "") + "port: 80\n"}, []wantErr{{"a.yaml", 7, "port", "did you mean spec.port?"}}},
		{"tab indentation", map[string]string{"a.yaml": header + "metadata: {name: a}\nspec:\n  command: [x]\n\tport: 1\n"}, []wantErr{{"a.yaml", 6, "", "a tab in the indentation (column 1): YAML indents with spaces only"}}},
		{"bad indentation", map[string]string{"a.yaml": header + "metadata: {name: a}\nspec:\n  command: [x]\n   port: 1\n"}, []wantErr{{"a.yaml", 6, "", "bad indentation: YAML expected a key aligned with the keys above it"}}},
		{"bad indentation in a list", map[string]string{"a.yaml": header + "metadata: {name: a}\nspec:\n  command: [x]\n  env:\n    - name: A\n      value: b\n   - name: B\n"}, []wantErr{{"a.yaml", 9, "", "bad indentation"}}},
		{"value with colon", map[string]string{"a.yaml": header + "metadata: {name: a}\nspec:\n  command: [x]\n  workingDir: a: b\n"}, []wantErr{{"a.yaml", 6, "", "quote the value"}}},
		{"several errors sorted", map[string]string{
			"b.yaml": server("b", "  port: 0x10000\n"),
			"a.yaml": server("A", "  restartPolicy: Sometimes\n  dependsOn: [nope]\n"),
		}, []wantErr{
			{"a.yaml", 4, "metadata.name", "DNS label"},
			{"a.yaml", 7, "spec.restartPolicy", "supported values"},
			{"a.yaml", 8, "spec.dependsOn[0]", `unknown server "nope"`},
			{"b.yaml", 7, "spec.port", "between 1 and 65535"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := writeFiles(t, tt.files)
			fleet, err := Load(dir)
			checkErrors(t, err, tt.want)
			if err != nil && fleet != nil {
				t.Errorf("got a fleet along with errors")
			}
			if err == nil && fleet == nil {
				t.Errorf("got no fleet and no error")
			}
		})
	}
}

// TestValidateInCode checks Validate on servers built in code, without a
// Source: no file, no line, but the field paths.
func TestValidateInCode(t *testing.T) {
	servers := []Server{
		{Metadata: ObjectMeta{Name: "a"}, Spec: ServerSpec{Command: []string{"x"}, DependsOn: []string{"b"}}},
		{Metadata: ObjectMeta{Name: "b"}, Spec: ServerSpec{Command: []string{"x"}, DependsOn: []string{"a"}, Port: 70000}},
	}
	in := fmt.Sprint(servers)
	errs := Validate(servers)
	checkErrors(t, errs, []wantErr{
		{".", 0, "spec.dependsOn[0]", "dependency cycle: a -> b -> a"},
		{".", 0, "spec.port", "between 1 and 65535"},
	})
	if fmt.Sprint(servers) != in {
		t.Errorf("Validate changed its input")
	}
	if got := errs[0].Error(); got != "spec.dependsOn[0]: dependency cycle: a -> b -> a" {
		t.Errorf("Error() = %q", got)
	}
}

func TestTooManyServers(t *testing.T) {
	var b strings.Builder
	for i := range MaxServers + 1 {
		fmt.Fprintf(&b, "%smetadata: {name: s%d}\nspec: {command: [x]}\n---\n", header, i)
	}
	dir := writeFiles(t, map[string]string{"a.yaml": b.String()})
	_, err := Load(dir)
	if err == nil || !strings.Contains(err.Error(), "too many servers: more than 10000") {
		t.Fatalf("got %v, want too many servers", err)
	}
}
