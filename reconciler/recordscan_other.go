//go:build !unix

package reconciler

import "os"

// statAt has no change time to go by here: every record is read.
func statAt(*os.File, string) (fileKey, bool, error) { return fileKey{}, false, nil }

// statPath has no change time to go by here: every record is read.
func statPath(string) (fileKey, bool, error) { return fileKey{}, false, nil }
