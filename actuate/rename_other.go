//go:build !unix

package actuate

import "os"

// renameInto is os.Rename on this platform.
func renameInto(from, to string) error { return os.Rename(from, to) }
