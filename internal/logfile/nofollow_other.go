//go:build !unix

package logfile

// noFollow is not available here.
const noFollow = 0
