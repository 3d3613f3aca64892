//go:build !unix

package api

import (
	"context"
	"fmt"
	"net"
	"os"
	"runtime"

	"github.com/go-logr/logr"
)

// Listener is not available on this system.
type Listener struct{ net.Listener }

// Path is empty here.
func (l *Listener) Path() string { return "" }

// Listen is not supported on this system: there are no peer credentials to
// check.
func Listen(path string, _ logr.Logger) (*Listener, error) {
	return nil, fmt.Errorf("api: listen on %s: %w (%s)", path, ErrNotSupported, runtime.GOOS)
}

type peer struct{ UID, PID int }

func checkSocketFile(os.FileInfo, int) error {
	return fmt.Errorf("%w (%s)", ErrNotSupported, runtime.GOOS)
}

func peerCred(*net.UnixConn) (peer, error) {
	return peer{}, fmt.Errorf("%w (%s)", ErrNotSupported, runtime.GOOS)
}

func dialUnix(context.Context, string) (*net.UnixConn, error) {
	return nil, fmt.Errorf("%w (%s)", ErrNotSupported, runtime.GOOS)
}
