package reconciler

import (
	"errors"
	"fmt"
	"io/fs"
	"os/exec"
	"syscall"

	"github.com/procfleet/procfleet/spec"
)

// programFailure says in plain words why the server's program could not be
// executed, when err is the exec error of a spawn (a *exec.Error from the
// $PATH lookup, or the *fs.PathError of fork/exec or of the chdir into
// workingDir): "program ./bin/api not found in workingDir /repo/svc"
// (spec.FindProgram's wording, as validate warns), "workingDir /x does not
// exist", or, for a program that is there and executable yet refused by
// the kernel, what that refusal means. ok is false for any other error.
func programFailure(err error, d Desired) (why string, ok bool) {
	var pe *fs.PathError
	var ee *exec.Error
	switch {
	case errors.As(err, &ee):
	case errors.As(err, &pe) && (pe.Op == "fork/exec" || pe.Op == "chdir"):
	default:
		return "", false
	}
	argv0, dir := program(d)
	if argv0 == "" {
		return "", false
	}
	if _, ferr := spec.FindProgram(argv0, dir); ferr != nil {
		return ferr.Error(), true
	}
	// Found and executable, yet execve refused it.
	where := fmt.Sprintf("program %s (workingDir %s) cannot be executed", argv0, dir)
	switch {
	case errors.Is(err, syscall.ENOENT):
		return where + ": the interpreter its #! line names was not found", true
	case errors.Is(err, syscall.ENOEXEC):
		return where + ": not a program for this system, or a script without a #! line", true
	case errors.Is(err, syscall.EACCES):
		return where + ": permission denied (its folder, or a file system mounted noexec)", true
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return fmt.Sprintf("%s: %v", where, errno), true
	}
	return fmt.Sprintf("%s: %v", where, err), true
}

// program is the server's program as it is executed (after $(NAME)
// expansion) and its working folder.
func program(d Desired) (argv0, dir string) {
	switch {
	case d.Instance != nil && len(d.Instance.Command) > 0:
		return d.Instance.Command[0], d.Instance.WorkingDir
	case d.Server != nil && len(d.Server.Spec.Command) > 0:
		return d.Server.Spec.Command[0], d.Server.Spec.WorkingDir
	}
	return "", ""
}
