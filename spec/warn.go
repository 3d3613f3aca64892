package spec

import (
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// shellRef matches a shell-style ${NAME}, which procfleet does not expand.
var shellRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)

// Warn returns the warnings about servers, sorted: $(NAME) references that
// stay as written (inherited looks up procfleet's own environment),
// shell-style ${NAME} in env values, in env files and in the argv of a
// program that is not a shell, $(NAME) in env files (never expanded), and
// variables that procfleet sets itself (PORT) set again by env or an env
// file. Servers should be valid (Load calls it only then). It is pure.
func Warn(servers []Server, inherited func(string) (string, bool)) ErrorList {
	var out ErrorList
	for i := range servers {
		spec, files := warnServer(&servers[i], inherited)
		out = append(append(out, spec...), files...)
	}
	return sortWarnings(out)
}

// sortWarnings sorts warnings as Warn returns them, each once.
func sortWarnings(out ErrorList) ErrorList {
	out.Sort()
	return slices.CompactFunc(out, func(a, b *FieldError) bool { return *a == *b })
}

// warnServer is Warn of one server, unsorted: the warnings about its
// fields (placed by lineOf, in its fleet file) and those about lines of
// its env files.
func warnServer(s *Server, inherited func(string) (string, bool)) (spec, files ErrorList) {
	add := func(field, format string, args ...any) {
		spec = append(spec, &FieldError{File: s.Source.File, Line: lineOf(s, field), Field: field, Message: fmt.Sprintf(format, args...)})
	}
	name, index := s.Metadata.Name, -1
	if s.Spec.Replicas != nil {
		name, index = InstanceName(name, 0), 0
	}
	own := s.procfleetVars(name, index, s.Spec.Port)
	seen := map[Reference]bool{}
	s.Resolve(own, inherited, func(r Reference) {
		if seen[r] {
			return
		}
		seen[r] = true
		if r.Later >= 0 {
			add(r.Field, "$(%s) stays as written: %s is set by spec.env[%d], after this entry, and a value sees only the variables set before it (move that entry up)", r.Name, r.Name, r.Later)
			return
		}
		add(r.Field, "$(%s) stays as written: no variable %s is set (write $$(%s) for a literal $(%s))", r.Name, r.Name, r.Name, r.Name)
	})
	shell := isShell(s.Spec.Command)
	hint := func(field, v string) {
		if m := shellRef.FindStringSubmatch(v); m != nil {
			add(field, "%s is not expanded: procfleet expands $(%s), as Kubernetes does", m[0], m[1])
		}
	}
	if !shell {
		for j, a := range s.Spec.Command {
			hint(fmt.Sprintf("spec.command[%d]", j), a)
		}
		for j, a := range s.Spec.Args {
			hint(fmt.Sprintf("spec.args[%d]", j), a)
		}
	}
	for j, e := range s.Spec.Env {
		hint(fmt.Sprintf("spec.env[%d].value", j), e.Value)
		if e.Name == EnvPort && s.Spec.Port > 0 {
			add(fmt.Sprintf("spec.env[%d].name", j), "PORT is set by procfleet to the instance's port (spec.port); this entry is ignored")
		}
	}
	for j, f := range s.EnvFiles {
		field := fmt.Sprintf("spec.envFile[%d]", j)
		for _, v := range f.Vars {
			at := &FieldError{File: f.Name, Line: v.From.Line, Field: v.Name}
			switch {
			case v.Name == EnvPort && s.Spec.Port > 0:
				at.Message = fmt.Sprintf("PORT is set by procfleet to the instance's port (spec.port of %s); this line is ignored (%s)", s.Metadata.Name, field)
			case slices.Contains(reservedEnv, v.Name):
				at.Message = fmt.Sprintf("%s is set by procfleet; this line is ignored (%s of %s)", v.Name, field, s.Metadata.Name)
			case shellRef.MatchString(v.Value) || len(References(v.Value)) > 0:
				at.Message = "values in env files are taken literally: ${NAME} and $(NAME) are not expanded (write the value, or set the variable in spec.env, where $(NAME) expands)"
			default:
				continue
			}
			files = append(files, at)
		}
	}
	return spec, files
}

// isShell reports whether argv runs a shell command line ([sh, -c, ...]),
// in which ${NAME} is the shell's to expand.
func isShell(argv []string) bool {
	if len(argv) == 0 {
		return false
	}
	switch filepath.Base(argv[0]) {
	case "sh", "bash", "zsh", "dash", "ksh", "ash", "fish":
		return true
	case "env":
		return len(argv) > 1 && isShell(argv[1:])
	}
	return strings.HasSuffix(argv[0], "sh") && slices.Contains(argv, "-c")
}
