//go:build !linux

package actuate

import "errors"

var errNoChildrenFiles = errors.New("no per-process children lists on this platform")

// descendantsOf is not available here; callers use observe.Descendants.
func descendantsOf(int) ([]int, error) { return nil, errNoChildrenFiles }
