//go:build unix && !linux && !darwin

package api

import (
	"fmt"
	"runtime"
)

// peerCredFD is not implemented here: every connection is refused.
func peerCredFD(int) (peer, error) {
	return peer{}, fmt.Errorf("%w (%s)", ErrNotSupported, runtime.GOOS)
}
