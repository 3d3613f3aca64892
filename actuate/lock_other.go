//go:build !unix

package actuate

import (
	"fmt"
	"runtime"
)

// Lock is not supported on this platform.
func (d *StateDir) Lock() (release func() error, err error) {
	return nil, fmt.Errorf("lock state folder: not supported on %s", runtime.GOOS)
}
