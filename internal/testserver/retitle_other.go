//go:build !linux

package testserver

import (
	"fmt"
	"runtime"
)

func setTitle(string, bool) error {
	return fmt.Errorf("retitle is not implemented on %s", runtime.GOOS)
}
