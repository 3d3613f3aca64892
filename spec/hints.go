package spec

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Hints for the mistakes a docker compose, process-compose or PM2 user
// makes in a fleet file. Each turns a bare "unknown field" or "expected X,
// got Y" into what to write instead.

// fieldAliases maps field names of other tools, under spec, to ours.
var fieldAliases = map[string]string{
	"environment":       "env",
	"env_file":          "envFile",
	"envfile":           "envFile",
	"working_dir":       "workingDir",
	"cwd":               "workingDir",
	"depends_on":        "dependsOn",
	"restart":           "restartPolicy",
	"restart_policy":    "restartPolicy",
	"autorestart":       "restartPolicy",
	"ports":             "port",
	"entrypoint":        "command",
	"script":            "command",
	"cmd":               "command",
	"instances":         "replicas",
	"numprocs":          "replicas",
	"scale":             "replicas",
	"healthcheck":       "readinessProbe",
	"health_check":      "readinessProbe",
	"readiness_probe":   "readinessProbe",
	"liveness_probe":    "livenessProbe",
	"min_uptime":        "minReadySeconds",
	"startsecs":         "minReadySeconds",
	"stop_grace_period": "terminationGracePeriodSeconds",
	"kill_timeout":      "terminationGracePeriodSeconds",
}

// probeHandlerFields are the fields of a probe's handlers, by handler.
var probeHandlerFields = map[string]string{
	"path": "httpGet", "host": "httpGet", "scheme": "httpGet", "port": "httpGet",
	"command": "exec",
}

// unknownFieldHint returns a hint for the unknown field name found at path
// (its parent's path), or "" when none applies.
func unknownFieldHint(parent, name string) string {
	switch {
	case parent == "spec":
		switch name {
		case "httpGet", "tcpSocket", "exec", "http_get", "tcp_socket":
			return fmt.Sprintf(": a probe goes under spec.readinessProbe (or livenessProbe): did you mean spec.readinessProbe.%s?", camel(name))
		case "image", "build":
			return ": procfleet runs programs on this machine, not container images: write spec.command (an argv list)"
		}
		if to, ok := fieldAliases[strings.ToLower(name)]; ok {
			return fmt.Sprintf(", did you mean %q? (spec.%s in a procfleet fleet file)", to, to)
		}
	case parent == "spec.readinessProbe" || parent == "spec.livenessProbe":
		if h, ok := probeHandlerFields[name]; ok {
			more := ""
			if name == "port" {
				more = fmt.Sprintf(" (or %s.tcpSocket.port)", parent)
			}
			return fmt.Sprintf(": it belongs to a handler: did you mean %s.%s.%s?%s", parent, h, name, more)
		}
		if name == "test" {
			return fmt.Sprintf(": a compose healthcheck test is an exec probe here: did you mean %s.exec.command?", parent)
		}
	case parent == "":
		if _, ok := infoOf(specType).byName[name]; ok {
			return fmt.Sprintf(": the server's fields go under spec: did you mean spec.%s?", name)
		}
		if name == "name" || name == "labels" {
			return fmt.Sprintf(": did you mean metadata.%s?", name)
		}
	}
	return ""
}

// camel turns a snake_case probe handler name into ours.
func camel(s string) string {
	switch s {
	case "http_get":
		return "httpGet"
	case "tcp_socket":
		return "tcpSocket"
	}
	return s
}

// typeHint adds what to write instead to an "expected X, got Y" error at
// path, for the shapes other tools use; "" when none applies.
func typeHint(path string, n *yaml.Node) string {
	switch {
	case n.Kind == yaml.ScalarNode && n.ShortTag() == "!!str" && isArgvField(path):
		return argvHint(n.Value)
	case n.Kind == yaml.MappingNode && path == "spec.env":
		var items []string
		for i := 0; i+1 < len(n.Content) && len(items) < 2; i += 2 {
			items = append(items, fmt.Sprintf("{name: %s, value: %s}", n.Content[i].Value, yamlScalar(n.Content[i+1].Value)))
		}
		return fmt.Sprintf(": env is a list of {name, value}, not a mapping: write [%s]", strings.Join(items, ", "))
	case n.Kind == yaml.ScalarNode && strings.HasPrefix(path, "spec.env[") && !strings.Contains(path, "]."):
		name, value, ok := strings.Cut(n.Value, "=")
		if !ok {
			return ": each entry of env is a {name, value} mapping"
		}
		return fmt.Sprintf(": each entry of env is a {name, value} mapping: write {name: %s, value: %s}", name, yamlScalar(value))
	case n.Kind == yaml.SequenceNode && path == "spec.port":
		return ": spec.port is one number (the port the server listens on); a replicated server's instances use port, port+1, ..."
	}
	return ""
}

func isArgvField(path string) bool {
	return path == "spec.command" || path == "spec.args" || strings.HasSuffix(path, ".exec.command")
}

// argvHint suggests an argv list for a command line written as a string.
func argvHint(line string) string {
	if strings.ContainsAny(line, "|&;<>()$`\\\"'*?~") {
		return fmt.Sprintf(": procfleet runs no shell: write [sh, -c, %s] to run it through one, or an argv list", yamlScalar(line))
	}
	words := strings.Fields(line)
	for i, w := range words {
		words[i] = yamlScalar(w)
	}
	return fmt.Sprintf(": write an argv list, [%s], or [sh, -c, \"...\"] for a shell command line", strings.Join(words, ", "))
}

// yamlScalar writes s as a YAML flow scalar, quoted when it would not read
// back as the same string.
func yamlScalar(s string) string {
	var n yaml.Node
	if s != "" && !strings.ContainsAny(s, ":#,[]{}&*!|>'\"%@`") && yaml.Unmarshal([]byte(s), &n) == nil &&
		len(n.Content) == 1 && n.Content[0].ShortTag() == "!!str" && n.Content[0].Value == s {
		return s
	}
	return strconv.Quote(s)
}

// yamlSyntaxHint explains a YAML syntax error reported at line (1-based)
// of data: tabs, and indentation the parser cannot place. It returns the
// line to report (the parser names the start of the enclosing block for
// "did not find expected key") and the message.
func yamlSyntaxHint(data []byte, line int, msg string) (int, string) {
	lines := bytes.Split(data, []byte("\n"))
	tabAt := func(l int) int {
		if l < 1 || l > len(lines) {
			return -1
		}
		indent := lines[l-1][:len(lines[l-1])-len(bytes.TrimLeft(lines[l-1], " \t"))]
		return bytes.IndexByte(indent, '\t')
	}
	switch {
	case strings.Contains(msg, "found character that cannot start any token") && tabAt(line) >= 0:
		return line, fmt.Sprintf("a tab in the indentation (column %d): YAML indents with spaces only", tabAt(line)+1)
	case strings.Contains(msg, "did not find expected key") || strings.Contains(msg, "did not find expected '-' indicator"):
		if l := firstFailingLine(data, msg); l > 0 {
			line = l
		}
		if tabAt(line) >= 0 {
			return line, fmt.Sprintf("a tab in the indentation (column %d): YAML indents with spaces only", tabAt(line)+1)
		}
		return line, fmt.Sprintf("bad indentation: YAML expected a key aligned with the keys above it, or an item of the list above (%s)", msg)
	case strings.Contains(msg, "mapping values are not allowed in this context"):
		return line, fmt.Sprintf("bad indentation or an unquoted \": \": YAML found \"key: value\" where it expected a plain value; indent this line under its parent, or quote the value (%s)", msg)
	case strings.Contains(msg, "block sequence entries are not allowed in this context"):
		return line, fmt.Sprintf("bad indentation: a list item \"- \" where YAML expected a value; start the list on its own line, indented under its key (%s)", msg)
	}
	return line, msg
}

// firstFailingLine finds the first line at which the YAML parser fails
// with msg, by parsing ever longer prefixes of data (binary search over
// the line count, so a few parses); 0 when not found.
func firstFailingLine(data []byte, msg string) int {
	fails := func(n int) bool {
		end := 0
		for i := 0; i < n; i++ {
			j := bytes.IndexByte(data[end:], '\n')
			if j < 0 {
				end = len(data)
				break
			}
			end += j + 1
		}
		dec := yaml.NewDecoder(bytes.NewReader(data[:end]))
		for {
			var doc yaml.Node
			err := decodeNode(dec, &doc)
			if err == nil {
				continue
			}
			return err.Error() != "EOF" && strings.Contains(err.Error(), msg)
		}
	}
	total := bytes.Count(data, []byte("\n")) + 1
	if !fails(total) {
		return 0
	}
	lo, hi := 1, total // fails(hi) holds
	for lo < hi {
		mid := (lo + hi) / 2
		if fails(mid) {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return hi
}
