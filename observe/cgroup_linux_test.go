package observe

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// testCgroup makes a cgroup below this process's own and returns its path
// (as /proc/PID/cgroup names it), its folder, and an open descriptor on it
// for SysProcAttr.CgroupFD. Cleanup kills what is left in it (cgroup.kill)
// and removes it. Skipped where cgroups v2 cannot be created here.
func testCgroup(t testing.TB) (cgpath, dir string, fd int) {
	t.Helper()
	cg, err := FindCgroup2()
	if err != nil {
		t.Skipf("no cgroup v2 here: %v", err)
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	cgpath = path.Join(cg.Self, "observe-test-"+hex.EncodeToString(b[:]))
	dir, err = cg.Dir(cgpath)
	if err != nil {
		t.Skip(err)
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Skipf("cannot create a cgroup here (needs root or a delegated subtree): %v", err)
	}
	f, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = f.Close()
		_ = os.WriteFile(filepath.Join(dir, "cgroup.kill"), []byte("1"), 0)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = WaitCgroupEmpty(ctx, dir)
		if err := os.Remove(dir); err != nil {
			t.Errorf("remove test cgroup: %v", err)
		}
	})
	return cgpath, dir, int(f.Fd())
}

func TestFindCgroup2(t *testing.T) {
	cg, err := FindCgroup2()
	if errors.Is(err, ErrNotSupported) {
		t.Skipf("no cgroup v2 here: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(cg.Mount, "cgroup.procs")); err != nil {
		t.Errorf("mount %s has no cgroup.procs: %v", cg.Mount, err)
	}
	b, _ := os.ReadFile("/proc/self/cgroup")
	if want, _ := parseProcCgroupV2(b); cg.Self != want {
		t.Errorf("Self = %q, /proc/self/cgroup says %q", cg.Self, want)
	}
	dir, err := cg.Dir(cg.Self)
	if err != nil {
		t.Fatal(err)
	}
	pids, err := CgroupProcs(dir)
	if err != nil || !slices.Contains(pids, os.Getpid()) {
		t.Errorf("CgroupProcs(own cgroup %s) = %v, %v; want this process in it", dir, pids, err)
	}
}

// A process spawned straight into a cgroup (clone3 CLONE_INTO_CGROUP) and
// its child are its members; the cgroup empties, and WaitCgroupEmpty wakes,
// when they are killed.
func TestCgroupMembership(t *testing.T) {
	cgpath, dir, fd := testCgroup(t)
	cmd := exec.Command("sh", "-c", "sleep 1000 & echo started; wait")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, UseCgroupFD: true, CgroupFD: fd}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	startCmd(t, cmd)
	if _, err := out.Read(make([]byte, 8)); err != nil {
		t.Fatal(err)
	}
	h := mustPin(t, cmd.Process.Pid)
	if got, err := h.Cgroup(); err != nil || got != cgpath {
		t.Errorf("Handle.Cgroup = %q, %v; want %q", got, err, cgpath)
	}
	if got, err := ProcessCgroup(cmd.Process.Pid); err != nil || got != cgpath {
		t.Errorf("ProcessCgroup = %q, %v; want %q", got, err, cgpath)
	}
	pids, err := CgroupProcs(dir)
	if err != nil || len(pids) != 2 || !slices.Contains(pids, cmd.Process.Pid) {
		t.Errorf("CgroupProcs = %v, %v; want the shell and its sleep", pids, err)
	}
	if pop, err := CgroupPopulated(dir); err != nil || !pop {
		t.Errorf("CgroupPopulated = %v, %v; want true", pop, err)
	}
	_, haveMem := CgroupOOMKills(dir)
	_, statErr := os.Stat(filepath.Join(dir, "memory.events"))
	if haveMem != (statErr == nil) {
		t.Errorf("CgroupOOMKills says memory controller %v; memory.events: %v", haveMem, statErr)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	waited := make(chan error, 1)
	go func() { waited <- WaitCgroupEmpty(ctx, dir) }()
	select {
	case err := <-waited:
		t.Fatalf("WaitCgroupEmpty returned %v while the cgroup holds processes", err)
	default:
	}
	if err := os.WriteFile(filepath.Join(dir, "cgroup.kill"), []byte("1"), 0); err != nil {
		t.Fatal(err)
	}
	if err := <-waited; err != nil {
		t.Fatalf("WaitCgroupEmpty: %v", err)
	}
	if pop, err := CgroupPopulated(dir); err != nil || pop {
		t.Errorf("CgroupPopulated after cgroup.kill = %v, %v", pop, err)
	}
	if err := h.Wait(ctx); err != nil {
		t.Errorf("the shell outlived cgroup.kill: %v", err)
	}
}

func TestWaitCgroupEmptyEnds(t *testing.T) {
	_, dir, _ := testCgroup(t)
	// Empty at once.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := WaitCgroupEmpty(ctx, dir); err != nil {
		t.Errorf("WaitCgroupEmpty(empty) = %v", err)
	}
	// A missing cgroup is empty.
	if err := WaitCgroupEmpty(ctx, filepath.Join(dir, "missing")); err != nil {
		t.Errorf("WaitCgroupEmpty(missing) = %v", err)
	}
	if _, err := CgroupPopulated(filepath.Join(dir, "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("CgroupPopulated(missing) = %v, want fs.ErrNotExist", err)
	}
}

// The kernel log names no out-of-memory kill for a process killed by hand.
func TestKernelOOMKillNotForAManualKill(t *testing.T) {
	cmd := startSleep(t)
	id, err := ReadIdentity(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	if line, found := KernelOOMKill(cmd.Process.Pid, id.StartTime); found {
		t.Errorf("KernelOOMKill found %q for a kill -9", line)
	}
}

// A real out-of-memory kill (a helper that allocates past a 32 MiB limit of
// a cgroup v1 memory controller below this process's own; root only) is
// found in the kernel log, and only for that process.
func TestKernelOOMKillFound(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to create a memory cgroup and read /dev/kmsg (not root here)")
	}
	if _, err := os.Stat("/dev/kmsg"); err != nil {
		t.Skipf("no /dev/kmsg: %v", err)
	}
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	var own string
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.SplitN(line, ":", 3); len(f) == 3 && f[1] == "memory" {
			own = f[2]
		}
	}
	base := "/sys/fs/cgroup/memory" + own
	if own == "" {
		t.Skip("no cgroup v1 memory controller here")
	}
	var rb [6]byte
	_, _ = rand.Read(rb[:])
	dir := filepath.Join(base, "observe-oom-"+hex.EncodeToString(rb[:]))
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Skipf("cannot create a memory cgroup: %v", err)
	}
	t.Cleanup(func() { _ = os.Remove(dir) })
	for file, val := range map[string]string{"memory.limit_in_bytes": "33554432", "memory.memsw.limit_in_bytes": "33554432", "memory.swappiness": "0"} {
		if err := os.WriteFile(filepath.Join(dir, file), []byte(val), 0); err != nil && file == "memory.limit_in_bytes" {
			t.Skipf("cannot set %s: %v", file, err)
		}
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// The log read to its end before the kill: the line is found by
	// reading on from there, as every look after up's first does.
	KernelOOMKill(0, 0)
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), helperEnv+"=alloc", memcgEnv+"="+dir)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	h := mustPin(t, cmd.Process.Pid)
	id, idErr := h.Identity()
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	err = cmd.Wait()
	if idErr != nil {
		t.Fatalf("read the helper's identity: %v", idErr)
	}
	ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if err == nil || !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Skipf("the helper was not SIGKILLed (%v): the limit did not bite here", err)
	}
	line, found := KernelOOMKill(cmd.Process.Pid, id.StartTime)
	if !found || !strings.Contains(line, "Killed process "+strconv.Itoa(cmd.Process.Pid)+" ") {
		t.Fatalf("KernelOOMKill(%d) = %q, %v; want the OOM killer's line", cmd.Process.Pid, line, found)
	}
	// Not for a later process that got the same pid: its start time is
	// after the line.
	if _, found := KernelOOMKill(cmd.Process.Pid, id.StartTime+100*clockTicks()); found {
		t.Error("KernelOOMKill matched a line logged before the process started")
	}
	if _, found := KernelOOMKill(cmd.Process.Pid+1, id.StartTime); found {
		t.Error("KernelOOMKill matched another pid")
	}
}

// BenchmarkCgroupReads: what a stop pays to list a server's cgroup and to
// ask whether it is populated (an empty cgroup here).
func BenchmarkCgroupReads(b *testing.B) {
	_, dir, _ := testCgroup(b)
	b.Run("procs", func(b *testing.B) {
		for b.Loop() {
			if _, err := CgroupProcs(dir); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("populated", func(b *testing.B) {
		for b.Loop() {
			if _, err := CgroupPopulated(dir); err != nil {
				b.Fatal(err)
			}
		}
	})
}
