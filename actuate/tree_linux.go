package actuate

import (
	"errors"
	"io/fs"
	"os"
	"strconv"
	"strings"
)

// maxTree bounds a tree walk (a fork bomb, or a loop from pid reuse during
// the walk, cannot make it run away).
const maxTree = 4096

// errNoChildrenFiles means the kernel lacks /proc/PID/task/TID/children
// (CONFIG_PROC_CHILDREN); callers fall back to a full /proc scan.
var errNoChildrenFiles = errors.New("no /proc/PID/task/TID/children")

// descendantsOf walks the tree below pid through the kernel's children
// lists: its cost grows with the tree, not with the number of processes on
// the machine (a /proc scan costs milliseconds per call with a few hundred
// processes, which made parallel stops of many servers slow). Like any
// walk, it can miss a process forked while it runs; the group signal and
// the pins cover those in the group.
func descendantsOf(pid int) ([]int, error) {
	var out []int
	seen := map[int]bool{pid: true}
	queue := []int{pid}
	for len(queue) > 0 && len(out) < maxTree {
		p := queue[0]
		queue = queue[1:]
		kids, err := childrenOf(p)
		if err != nil {
			if errors.Is(err, errNoChildrenFiles) && p == pid {
				return nil, err
			}
			continue // exited meanwhile
		}
		for _, k := range kids {
			if !seen[k] {
				seen[k] = true
				out = append(out, k)
				queue = append(queue, k)
			}
		}
	}
	return out, nil
}

// childrenOf reads the children lists of every thread of pid.
func childrenOf(pid int) ([]int, error) {
	dir := "/proc/" + strconv.Itoa(pid) + "/task"
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	tids, err := f.Readdirnames(-1)
	_ = f.Close()
	if err != nil {
		return nil, err
	}
	var kids []int
	found := false
	for _, tid := range tids {
		b, err := os.ReadFile(dir + "/" + tid + "/children")
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		found = true
		kids = append(kids, parseChildren(b)...)
	}
	if !found && len(tids) > 0 {
		if _, err := os.Stat(dir + "/" + tids[0]); err == nil {
			return nil, errNoChildrenFiles
		}
	}
	return kids, nil
}

// parseChildren parses a children list ("12 34 ") and skips anything else.
func parseChildren(b []byte) []int {
	var out []int
	for _, f := range strings.Fields(string(b)) {
		if n, err := strconv.Atoi(f); err == nil && n > 0 {
			out = append(out, n)
		}
	}
	return out
}
