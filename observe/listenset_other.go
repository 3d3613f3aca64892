//go:build !linux

package observe

import "fmt"

// ListeningOn needs sock_diag (Linux): elsewhere the error wraps
// ErrNotSupported and callers connect (PortAccepting).
func ListeningOn(ports []int, out []PortListen) ([]PortListen, error) {
	return out, fmt.Errorf("list listeners: %w", ErrNotSupported)
}
