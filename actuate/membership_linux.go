package actuate

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/procfleet/procfleet/observe"
)

// cgroup2 is the unified hierarchy and procfleet's place in it, read once:
// neither moves while procfleet runs (it does not move itself).
var cgroup2 = sync.OnceValues(observe.FindCgroup2)

// Membership says which mode a spawn in this state folder would use now,
// and why: cgroups where the unified hierarchy is mounted and procfleet
// can make cgroups below its own (root, or a subtree systemd delegated to
// its user) on a kernel with cgroup.kill (Linux >= 5.14); the session
// otherwise, or when PROCFLEET_CGROUP=off. It creates nothing.
func (d *StateDir) Membership() Membership {
	if cgroupsOff() {
		return Membership{Mode: MembershipSession, Why: CgroupEnv + "=off"}
	}
	cg, err := cgroup2()
	if err != nil {
		return Membership{Mode: MembershipSession, Why: err.Error()}
	}
	parent := path.Join(cg.Self, cgroupPrefix+d.ID())
	dir, err := cg.Dir(parent)
	if err != nil {
		return Membership{Mode: MembershipSession, Why: err.Error()}
	}
	// Where the folder cgroup exists it must take children; otherwise the
	// cgroup it would go in must.
	probe := dir
	if _, err := os.Stat(dir); err != nil {
		probe = filepath.Dir(dir)
	}
	if err := unix.Access(probe, unix.W_OK); err != nil {
		return Membership{Mode: MembershipSession, Why: fmt.Sprintf("cannot make cgroups in %s: %v (it needs root or a subtree systemd delegated to this user)", probe, err)}
	}
	// cgroup.kill is in every cgroup but the root (Linux >= 5.14).
	if probe != cg.Mount {
		if _, err := os.Stat(filepath.Join(probe, "cgroup.kill")); err != nil {
			return Membership{Mode: MembershipSession, Why: "the kernel has no cgroup.kill (Linux 5.14 or later)"}
		}
	}
	return Membership{Mode: MembershipCgroup, Cgroup: parent}
}

// serverCgroup is a cgroup made for one spawn.
type serverCgroup struct {
	path string   // as /proc/PID/cgroup names it
	dir  string   // its folder
	fd   *os.File // open on dir, for SysProcAttr.CgroupFD
}

// makeServerCgroup makes a fresh cgroup for a spawn of server name:
// <procfleet's cgroup>/procfleet-<folder id>/<name>. nil and why when the
// session mode is to be used (cgroups unavailable, or a folder cgroup this
// user may not write); an error when the cgroup exists and still
// holds processes (an earlier instance's: nothing is started beside them).
// An empty one left from before is replaced, so its counters (oom_kill)
// start at zero.
func (d *StateDir) makeServerCgroup(name string) (sc *serverCgroup, why string, err error) {
	if cgroupsOff() {
		return nil, CgroupEnv + "=off", nil
	}
	cg, err := cgroup2()
	if err != nil {
		return nil, err.Error(), nil
	}
	parent := path.Join(cg.Self, cgroupPrefix+d.ID())
	pdir, err := cg.Dir(parent)
	if err != nil {
		return nil, err.Error(), nil
	}
	leaf := path.Join(parent, name)
	ldir := filepath.Join(pdir, name)
	// A stop of the last other server may remove the folder cgroup between
	// the two mkdirs: try again.
	for attempt := 0; ; attempt++ {
		if err := os.Mkdir(pdir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return nil, fmt.Sprintf("cannot make cgroup %s: %v (it needs root or a subtree systemd delegated to this user)", parent, err), nil
		}
		if _, err := os.Stat(filepath.Join(pdir, "cgroup.kill")); err != nil {
			return nil, "the kernel has no cgroup.kill (Linux 5.14 or later)", nil
		}
		if populated, err := observe.CgroupPopulated(ldir); err == nil {
			if populated {
				pids, _ := observe.CgroupProcs(ldir)
				return nil, "", fmt.Errorf("cgroup %s still holds pids %v of an earlier instance of server %s; nothing was started beside them (stop them by hand: echo 1 > %s/cgroup.kill)", leaf, pids, name, ldir)
			}
			if err := os.Remove(ldir); err != nil && !errors.Is(err, fs.ErrNotExist) {
				if errors.Is(err, fs.ErrPermission) {
					return nil, notOurs(parent, err), nil
				}
				return nil, "", fmt.Errorf("replace the empty cgroup %s: %w", leaf, err)
			}
		}
		err := os.Mkdir(ldir, 0o755)
		if errors.Is(err, fs.ErrNotExist) && attempt < 3 {
			continue
		}
		if errors.Is(err, fs.ErrPermission) {
			return nil, notOurs(parent, err), nil
		}
		if err != nil {
			return nil, "", fmt.Errorf("make cgroup %s: %w", leaf, err)
		}
		break
	}
	f, err := os.OpenFile(ldir, os.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		_ = os.Remove(ldir)
		return nil, "", fmt.Errorf("open cgroup %s: %w", leaf, err)
	}
	return &serverCgroup{path: leaf, dir: ldir, fd: f}, "", nil
}

// serverCgroupPath is the cgroup makeServerCgroup would make for server
// name, "" where it would use the session mode for want of cgroups: a
// guess made before it (Spawn writes the intent record meanwhile), which
// its result confirms or corrects.
func (d *StateDir) serverCgroupPath(name string) string {
	if cgroupsOff() {
		return ""
	}
	cg, err := cgroup2()
	if err != nil {
		return ""
	}
	return path.Join(cg.Self, cgroupPrefix+d.ID(), name)
}

// notOurs is why a spawn uses the session mode when the folder cgroup
// exists but this user may not make cgroups in it: left by another user's
// procfleet for a folder whose device and inode this one now has (inodes are
// reused once a folder is deleted). Nothing of the other user's is touched.
func notOurs(parent string, err error) string {
	return fmt.Sprintf("cannot make cgroups in %s: %v (it belongs to another user: a folder with this device and inode was used before)", parent, err)
}

// cgroupDir is the folder of a record's cgroup.
func cgroupDir(cgpath string) (string, error) {
	cg, err := cgroup2()
	if err != nil {
		return "", err
	}
	return cg.Dir(cgpath)
}

// killCgroup SIGKILLs every process of the cgroup at dir at once
// (cgroup.kill: forks racing it are killed too).
func killCgroup(dir string) error {
	return os.WriteFile(filepath.Join(dir, "cgroup.kill"), []byte("1"), 0)
}

// removeCgroup removes an empty server cgroup, then its folder cgroup
// when no other server's is left in it. A cgroup already gone is not an
// error.
func removeCgroup(dir string) error {
	// rmdir alone: os.Remove would try unlink first, which a folder
	// always refuses (one failed system call per stop).
	if err := rmdir(dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove cgroup %s: %w", dir, err)
	}
	_ = rmdir(filepath.Dir(dir)) // EBUSY while others remain
	return nil
}

// removeEmptyCgroup removes the server cgroup at dir, as removeCgroup
// does, if the kernel lets it: it refuses while the cgroup holds a process
// (EBUSY), which makes a success proof that the cgroup was empty. false
// when it was not removed (the caller then reads it).
func removeEmptyCgroup(dir string) bool {
	if rmdir(dir) != nil {
		return false
	}
	_ = rmdir(filepath.Dir(dir)) // EBUSY while others remain
	return true
}

// rmdir removes the empty folder at dir (a cgroup), retrying on EINTR.
func rmdir(dir string) error {
	for {
		err := unix.Rmdir(dir)
		if err != unix.EINTR {
			if err != nil {
				return &fs.PathError{Op: "rmdir", Path: dir, Err: err}
			}
			return nil
		}
	}
}

// intoCgroup makes the spawn start straight in the cgroup open at f
// (clone3 with CLONE_INTO_CGROUP): the process is never outside it.
func intoCgroup(attr *syscall.SysProcAttr, f *os.File) {
	attr.UseCgroupFD = true
	attr.CgroupFD = int(f.Fd())
}

// sweepCgroups removes the empty server cgroups this folder has below
// procfleet's own cgroup (left by servers that ended while no procfleet
// watched them), and the folder cgroup when it is left empty. A cgroup that
// holds processes is left alone: rmdir refuses it. So is the cgroup of a
// server that has a record: it holds the live server (an rmdir refused
// under the kernel's cgroup lock, 1,000 of them at each Lock of a running
// fleet of 1,000), or the record is stale, and the stop, cleanup or start
// that finds it so removes or replaces the empty cgroup (else the first
// sweep after the record is gone does).
func (d *StateDir) sweepCgroups() {
	cg, err := cgroup2()
	if err != nil {
		return
	}
	dir, err := cg.Dir(path.Join(cg.Self, cgroupPrefix+d.ID()))
	if err != nil {
		return
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	recorded := d.recordedNames()
	for _, e := range entries {
		if e.IsDir() && checkName(e.Name()) == nil && !recorded[e.Name()] {
			_ = rmdir(filepath.Join(dir, e.Name())) // EBUSY while populated
		}
	}
	_ = rmdir(dir)
}

// recordedNames is the set of servers with a record file (a name ending
// in .json in the servers folder; its content is not read), nil when the
// folder cannot be listed.
func (d *StateDir) recordedNames() map[string]bool {
	f, err := os.Open(filepath.Join(d.Path, serversDir))
	if err != nil {
		return nil
	}
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return nil
	}
	set := make(map[string]bool, len(names))
	for _, n := range names {
		if name, ok := strings.CutSuffix(n, ".json"); ok {
			set[name] = true
		}
	}
	return set
}

// cloneRefused reports a spawn error that clone3 with CLONE_INTO_CGROUP
// gives when it is not allowed (ENOSYS, EPERM or EOPNOTSUPP: a seccomp
// filter, an old kernel). Go reports a failed clone and a failed exec
// alike ("fork/exec"); a spawn retried without the cgroup that fails again
// was the exec's fault, and says so.
func cloneRefused(err error) bool {
	return errors.Is(err, syscall.ENOSYS) || errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EOPNOTSUPP)
}
