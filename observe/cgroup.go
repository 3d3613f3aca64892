package observe

import (
	"fmt"
	"path"
	"path/filepath"
	"strings"
)

// Cgroup2 is the cgroup v2 (unified) hierarchy as this process sees it.
type Cgroup2 struct {
	// Mount is where the hierarchy is mounted (/sys/fs/cgroup on current
	// distributions, /sys/fs/cgroup/unified on a hybrid layout).
	Mount string
	// Root is the cgroup the mount shows at Mount: "/" unless a subtree is
	// bind-mounted (containers).
	Root string
	// Self is this process's cgroup, as /proc/self/cgroup names it.
	Self string
}

// Dir returns the folder of the cgroup at path (a path as
// /proc/PID/cgroup names it, "/a/b"). It fails for a path that is not
// absolute and clean, or that lies outside what the mount shows.
func (c Cgroup2) Dir(cgpath string) (string, error) {
	if !strings.HasPrefix(cgpath, "/") || path.Clean(cgpath) != cgpath {
		return "", fmt.Errorf("cgroup path %q is not absolute and clean", cgpath)
	}
	rel := cgpath
	if c.Root != "/" {
		var ok bool
		rel, ok = strings.CutPrefix(cgpath, c.Root)
		if !ok || (rel != "" && !strings.HasPrefix(rel, "/")) {
			return "", fmt.Errorf("cgroup %s is outside the mounted part of the hierarchy (%s)", cgpath, c.Root)
		}
	}
	return filepath.Join(c.Mount, filepath.FromSlash(rel)), nil
}
