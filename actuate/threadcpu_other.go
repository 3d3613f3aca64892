//go:build !linux

package actuate

import "time"

// threadCPU is 0 where the listener watch does not run (it needs
// sock_diag).
func threadCPU() time.Duration { return 0 }
