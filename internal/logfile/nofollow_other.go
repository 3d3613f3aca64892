//go:build !unix

package logfile

// noFollow and noBlock are not available here.
const (
	noFollow = 0
	noBlock  = 0
)
