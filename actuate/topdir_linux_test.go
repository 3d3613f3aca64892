package actuate

import (
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// dirFlags reads path's inode flags, or skips the test where the file
// system has none (tmpfs).
func dirFlags(t *testing.T, path string) uint32 {
	t.Helper()
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	flags, err := unix.IoctlGetUint32(fd, unix.FS_IOC_GETFLAGS)
	if err != nil {
		t.Skipf("no inode flags on this file system: %v", err)
	}
	return flags
}

// TestOpenStateDirMarksTopDir: a state folder OpenStateDir makes gets the
// ext4 top-directory flag (where the file system keeps it); one that was
// already there is left as it is.
func TestOpenStateDirMarksTopDir(t *testing.T) {
	parent := t.TempDir()
	dirFlags(t, parent)
	made := filepath.Join(parent, "made")
	d, err := OpenStateDir(made)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	var st unix.Statfs_t
	if err := unix.Statfs(parent, &st); err != nil {
		t.Fatal(err)
	}
	const ext4Magic = 0xEF53 // ext2, ext3 and ext4
	if st.Type != ext4Magic {
		t.Skipf("not ext4 here (statfs type %#x): the flag is ext4's", st.Type)
	}
	if flags := dirFlags(t, made); flags&fsTopdirFL == 0 {
		t.Errorf("state folder made by OpenStateDir has flags %#x, want FS_TOPDIR_FL", flags)
	}
	there := filepath.Join(parent, "there")
	if err := unix.Mkdir(there, 0o700); err != nil {
		t.Fatal(err)
	}
	d2, err := OpenStateDir(there)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d2.Close() })
	if dirFlags(t, there)&fsTopdirFL != 0 {
		t.Error("OpenStateDir marked a folder it did not make")
	}
}
