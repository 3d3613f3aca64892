package spec

import (
	"bytes"
	"fmt"
	"strings"
)

// Var is one variable of an instance's environment and where it came from.
type Var struct {
	Name  string
	Value string
	From  VarSource
}

// VarKind says which layer of the environment set a variable.
type VarKind string

// Layers of an instance's environment, in the order they apply (later
// wins). procfleet's own inherited environment comes before all of them and
// is not listed.
const (
	FromEnvFile   VarKind = "envFile"   // a line of a dotenv file of spec.envFile
	FromEnv       VarKind = "env"       // an entry of spec.env
	FromProcfleet VarKind = "procfleet" // PORT, PROCFLEET_REPLICA, PROCFLEET_SERVER
)

// VarSource locates where a variable was set, never its value.
type VarSource struct {
	Kind VarKind
	// File is the dotenv file (FromEnvFile, as EnvFile.Name) or the fleet
	// file (FromEnv); "" for FromProcfleet.
	File string
	// Line is the 1-based line that set it; 0 when unknown.
	Line int
	// Field is the fleet-file field that brought it in: "spec.envFile[0]",
	// "spec.env[2]", or for FromProcfleet the field it derives from
	// ("spec.port", "spec.replicas", "metadata.name").
	Field string
}

// String formats the source for people: ".env:3 (spec.envFile[0])",
// "spec.env[2] (procfleet.yaml:14)", "procfleet (spec.port)".
func (s VarSource) String() string {
	switch s.Kind {
	case FromEnvFile:
		return fmt.Sprintf("%s:%d (%s)", s.File, s.Line, s.Field)
	case FromEnv:
		if s.File == "" {
			return s.Field
		}
		return fmt.Sprintf("%s (%s:%d)", s.Field, s.File, s.Line)
	}
	return fmt.Sprintf("procfleet (%s)", s.Field)
}

// dotenvError is a syntax error in a dotenv file, at a line. Messages never
// quote a value: env files hold secrets.
type dotenvError struct {
	line int
	msg  string
}

// parseDotenv reads dotenv data: one KEY=VALUE a line, optionally preceded
// by "export "; blank lines and lines starting with # are skipped; spaces
// around "=" are allowed. A value is
//   - unquoted: the rest of the line, trimmed, up to a " #" comment;
//   - in single quotes: taken literally, and may span lines;
//   - in double quotes: with \n, \r, \t, \", \\ and \$ unescaped (any other
//     backslash is kept), and may span lines.
//
// After a closing quote only spaces and a # comment may follow. Values are
// never expanded: $VAR, ${VAR} and $(VAR) stay as written. A key set twice
// keeps the later value. NUL bytes are an error. Each Var's From has Kind
// FromEnvFile and its line; File and Field are left to the caller.
func parseDotenv(data []byte) ([]Var, []dotenvError) {
	if i := bytes.IndexByte(data, 0); i >= 0 {
		return nil, []dotenvError{{bytes.Count(data[:i], []byte("\n")) + 1, "contains a NUL byte"}}
	}
	text := strings.ReplaceAll(string(data), "\r\n", "\n")
	var (
		vars []Var
		errs []dotenvError
	)
	line := 1
	for len(text) > 0 {
		cur := line
		raw, rest, _ := strings.Cut(text, "\n")
		text = rest
		line++
		s := strings.TrimLeft(raw, " \t")
		if s == "" || s[0] == '#' {
			continue
		}
		if after, ok := strings.CutPrefix(s, "export"); ok && after != "" && (after[0] == ' ' || after[0] == '\t') {
			s = strings.TrimLeft(after, " \t")
		}
		end := 0
		for end < len(s) && isEnvNameByte(s[end], end == 0) {
			end++
		}
		name := s[:end]
		s = strings.TrimLeft(s[end:], " \t")
		if name == "" || s == "" || s[0] != '=' {
			before, _, found := strings.Cut(strings.TrimLeft(raw, " \t"), "=")
			if !found || strings.TrimSpace(before) == "" {
				errs = append(errs, dotenvError{cur, "expected KEY=VALUE"})
			} else {
				errs = append(errs, dotenvError{cur, fmt.Sprintf("invalid variable name %q: use letters, digits, '_' and '.', not starting with a digit", shorten(strings.TrimSpace(before)))})
			}
			continue
		}
		s = strings.TrimLeft(s[1:], " \t")
		var value string
		if s != "" && (s[0] == '\'' || s[0] == '"') {
			v, after, lines, ok := quoted(s, text)
			if !ok {
				errs = append(errs, dotenvError{cur, fmt.Sprintf("%s: the quoted value is not closed", name)})
				return vars, errs // the rest of the file is inside the quotes
			}
			text = after.rest
			line += lines
			if t := strings.TrimLeft(after.tail, " \t"); t != "" && t[0] != '#' {
				errs = append(errs, dotenvError{cur + lines, fmt.Sprintf("%s: unexpected text after the closing quote", name)})
				continue
			}
			value = v
		} else {
			value = s
			for i := 0; i < len(value); i++ {
				if value[i] == '#' && i > 0 && (value[i-1] == ' ' || value[i-1] == '\t') {
					value = value[:i]
					break
				}
			}
			value = strings.TrimRight(value, " \t")
		}
		vars = append(vars, Var{Name: name, Value: value, From: VarSource{Kind: FromEnvFile, Line: cur}})
	}
	return vars, errs
}

func isEnvNameByte(c byte, first bool) bool {
	switch {
	case c == '_' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z':
		return true
	case c >= '0' && c <= '9' || c == '.':
		return !first
	}
	return false
}

// quoteEnd is what follows a quoted value: the rest of its last line
// (tail) and the text after that line (rest).
type quoteEnd struct{ tail, rest string }

// quoted reads a quoted value that starts at s (the rest of the current
// line, starting with the quote) and may continue into the following text.
// It returns the value, what follows it, and how many more lines it spans.
func quoted(s, text string) (string, quoteEnd, int, bool) {
	q := s[0]
	src := s[1:] + "\n" + text
	var b strings.Builder
	for i := 0; i < len(src); i++ {
		c := src[i]
		switch {
		case c == q:
			before := src[:i]
			lines := strings.Count(before, "\n")
			// Drop the newline that joined the current line to text when the
			// value ended on the current line.
			after := src[i+1:]
			tail, rest, _ := strings.Cut(after, "\n")
			if !strings.Contains(after, "\n") {
				rest = ""
			}
			return b.String(), quoteEnd{tail: tail, rest: rest}, lines, true
		case c == '\\' && q == '"' && i+1 < len(src):
			i++
			switch n := src[i]; n {
			case 'n':
				b.WriteByte('\n')
			case 'r':
				b.WriteByte('\r')
			case 't':
				b.WriteByte('\t')
			case '"', '\\', '$':
				b.WriteByte(n)
			default:
				b.WriteByte('\\')
				b.WriteByte(n)
			}
		default:
			b.WriteByte(c)
		}
	}
	return "", quoteEnd{}, 0, false
}
