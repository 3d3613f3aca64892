//go:build !linux

package logfile

import "os"

// collapsePrefix is Linux only (fallocate FALLOC_FL_COLLAPSE_RANGE).
func collapsePrefix(*os.File, int64) (int64, error) { return 0, errNoCollapse }
