package spec

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// ProgramError says in plain words why a server's program cannot be run.
type ProgramError struct {
	Program    string // argv[0] as written (after $(NAME) expansion)
	WorkingDir string
	// Reason is "not found", "not executable", "a folder" or "no workingDir".
	Reason string
	Err    error
}

func (e *ProgramError) Error() string {
	switch {
	case e.Reason == "no workingDir":
		return fmt.Sprintf("workingDir %s does not exist", e.WorkingDir)
	case !strings.Contains(e.Program, "/"):
		return fmt.Sprintf("program %s %s in $PATH", e.Program, e.Reason)
	case filepath.IsAbs(e.Program):
		return fmt.Sprintf("program %s: %s", e.Program, e.Reason)
	}
	return fmt.Sprintf("program %s %s in workingDir %s", e.Program, e.Reason, e.WorkingDir)
}

// Unwrap returns the underlying error (fs.ErrNotExist for "not found").
func (e *ProgramError) Unwrap() error { return e.Err }

// FindProgram resolves argv0 as a server is started: a path with a slash
// relative to dir (unless absolute), a bare name in procfleet's $PATH. It
// returns the program's path, or a *ProgramError saying why it cannot run
// (not found, not executable, a folder, or dir missing). It reads the file
// system; a program found now may still be gone at start.
func FindProgram(argv0, dir string) (string, error) {
	if dir != "" {
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			if err == nil {
				err = errors.New("not a folder")
			}
			return "", &ProgramError{Program: argv0, WorkingDir: dir, Reason: "no workingDir", Err: err}
		}
	}
	if !strings.Contains(argv0, "/") {
		p, err := exec.LookPath(argv0)
		if err != nil {
			return "", &ProgramError{Program: argv0, WorkingDir: dir, Reason: "not found", Err: fs.ErrNotExist}
		}
		return p, nil
	}
	p := argv0
	if !filepath.IsAbs(p) {
		p = filepath.Join(dir, p)
	}
	fi, err := os.Stat(p)
	switch {
	case err != nil:
		return "", &ProgramError{Program: argv0, WorkingDir: dir, Reason: "not found", Err: err}
	case fi.IsDir():
		return "", &ProgramError{Program: argv0, WorkingDir: dir, Reason: "is a folder"}
	case fi.Mode().Perm()&0o111 == 0:
		return "", &ProgramError{Program: argv0, WorkingDir: dir, Reason: "is not executable", Err: fs.ErrPermission}
	}
	return p, nil
}

// ProgramWarnings checks, for every server, that its program can be run
// (FindProgram): one warning at spec.command[0] (or spec.workingDir) for
// each that cannot. They are warnings, not errors: CI often builds the
// binary after validating. It reads the file system.
func (f *Fleet) ProgramWarnings() ErrorList {
	var out ErrorList
	inherited := lookupIn(f.Environ)
	for i := range f.Servers {
		s := &f.Servers[i]
		name, index := s.Metadata.Name, -1
		if s.Spec.Replicas != nil {
			name, index = InstanceName(name, 0), 0
		}
		r := s.Resolve(s.procfleetVars(name, index, s.Spec.Port), inherited, nil)
		if len(r.Command) == 0 || r.Command[0] == "" {
			continue
		}
		_, err := FindProgram(r.Command[0], s.Spec.WorkingDir)
		var pe *ProgramError
		if !errors.As(err, &pe) {
			continue
		}
		field := "spec.command[0]"
		if pe.Reason == "no workingDir" {
			field = "spec.workingDir"
		}
		out = append(out, &FieldError{File: s.Source.File, Line: lineOf(s, field), Field: field, Message: pe.Error(), Err: pe})
	}
	out.Sort()
	return out
}
