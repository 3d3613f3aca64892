package main

import (
	"errors"
	"fmt"
	"io"
)

// Exit codes of procfleet (DESIGN.md, "Exit codes").
const (
	exitOK      = 0 // success
	exitFailure = 1 // any failure, usage errors included
	exitPending = 2 // diff only: changes pending
)

// exitError carries the process exit code out of a command's RunE.
// A nil err means the command has already reported everything it had to say
// (for example validate's list of errors, or diff's "changes pending"):
// main exits with code and prints nothing more.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}

func (e *exitError) Unwrap() error { return e.err }

// silentExit returns an error that makes procfleet exit with code without
// printing anything more.
func silentExit(code int) error { return &exitError{code: code} }

// exitCodeOf maps the error returned by the root command to the process exit
// code, printing the error to stderr unless it is silent.
func exitCodeOf(err error, stderr io.Writer) int {
	if err == nil {
		return exitOK
	}
	code := exitFailure
	var ee *exitError
	if errors.As(err, &ee) {
		code = ee.code
		if ee.err == nil {
			return code
		}
	}
	fmt.Fprintf(stderr, "Error: %v\n", err)
	return code
}
