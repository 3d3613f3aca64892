//go:build !linux

package actuate

import "errors"

func denyClone3() error { return errors.New("seccomp is Linux only") }
