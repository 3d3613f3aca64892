package actuate

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/procfleet/procfleet/internal/testserver"
	"github.com/procfleet/procfleet/observe"
)

// A folder cgroup left by root for a state folder whose device and inode a
// non-root user's folder now has (inodes are reused once a folder is
// deleted) makes that user's spawn use the session mode instead of failing.
// The spawner runs as uid 65534; root alone can arrange that.
func TestSpawnBesideAnotherUsersFolderCgroup(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run a spawner as uid 65534 (not root here)")
	}
	t.Setenv(CgroupEnv, "on")
	if m := (&StateDir{Path: t.TempDir()}).Membership(); m.Mode != MembershipCgroup {
		t.Skipf("cgroups not available here: %s", m.Why)
	}
	// A folder uid 65534 can enter, holding a copy of this test binary (the
	// spawner and the server) and the state folder, which is uid 65534's.
	dir, err := os.MkdirTemp("", "procfleet-foreign-cgroup-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "actuate.test")
	copyFile(t, self, bin, 0o755)
	state := filepath.Join(dir, "state")
	if err := os.Mkdir(state, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(state, 65534, 65534); err != nil {
		t.Fatal(err)
	}

	// root's folder cgroup for this folder's device and inode.
	sd := &StateDir{Path: state}
	cg, err := cgroup2()
	if err != nil {
		t.Fatal(err)
	}
	pdir, err := cg.Dir(path.Join(cg.Self, cgroupPrefix+sd.ID()))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(pdir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Remove(filepath.Join(pdir, "api")); _ = os.Remove(pdir) })

	port := testserver.FreePort(t)
	req, err := json.Marshal(spawnerRequest{Dir: state, Name: "api", Port: port,
		Argv: []string{bin, "-port", strconv.Itoa(port)}, Env: []string{testserver.Env()}})
	if err != nil {
		t.Fatal(err)
	}
	spawner := exec.Command(bin)
	spawner.Env = append(os.Environ(), spawnerEnv+"="+string(req))
	spawner.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	var out, stderr bytes.Buffer
	spawner.Stdout, spawner.Stderr = &out, &stderr
	runErr := spawner.Run()
	// Whatever the spawner said, the server it may have left is ended.
	data, readErr := os.ReadFile(sd.RecordPath("api"))
	var rec Record
	if readErr == nil {
		if err := json.Unmarshal(data, &rec); err != nil {
			t.Fatalf("record %s: %v", data, err)
		}
		killCarriersAtCleanup(t, rec.Instance)
	}
	if runErr != nil {
		t.Fatalf("spawn as uid 65534 beside root's folder cgroup %s: %v: %s", pdir, runErr, stderr.String())
	}
	if readErr != nil {
		t.Fatal(readErr)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(out.String()))
	if err != nil || pid != rec.PID {
		t.Fatalf("spawner printed %q, the record names pid %d", out.String(), rec.PID)
	}
	if rec.Cgroup != "" {
		t.Errorf("record names cgroup %q, want the session mode", rec.Cgroup)
	}
	if got, err := observe.ProcessCgroup(pid); err != nil || strings.HasPrefix(got, path.Join(cg.Self, cgroupPrefix)) {
		t.Errorf("server %d is in cgroup %q (%v), want its spawner's", pid, got, err)
	}
}

func copyFile(t *testing.T, src, dst string, mode os.FileMode) {
	t.Helper()
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	outf, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(outf, in); err != nil {
		t.Fatal(err)
	}
	if err := outf.Close(); err != nil {
		t.Fatal(err)
	}
}
