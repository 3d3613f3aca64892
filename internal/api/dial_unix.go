//go:build unix

package api

import (
	"context"
	"net"
)

// maxSocketPath is the longest socket path bound or dialled as is: sun_path
// holds 108 bytes on Linux and 104 on macOS, with the terminating NUL.
const maxSocketPath = 103

// listenUnix listens on a Unix socket at path.
func listenUnix(path string) (*net.UnixListener, error) {
	var ln *net.UnixListener
	err := withShortPath(path, func(p string) error {
		var err error
		ln, err = net.ListenUnix("unix", &net.UnixAddr{Name: p, Net: "unix"})
		return err
	})
	return ln, err
}

// dialUnix connects to the Unix socket at path.
func dialUnix(ctx context.Context, path string) (*net.UnixConn, error) {
	var c net.Conn
	err := withShortPath(path, func(p string) error {
		var d net.Dialer
		var err error
		c, err = d.DialContext(ctx, "unix", p)
		return err
	})
	if err != nil {
		return nil, err
	}
	return c.(*net.UnixConn), nil
}
