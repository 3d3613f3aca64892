//go:build linux || darwin

package observe

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestReadIdentityLiveChild(t *testing.T) {
	cmd := exec.Command("sleep", "1000")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	startCmd(t, cmd)
	pid := cmd.Process.Pid
	// cmd.Start returns before the child's execve has finished: until it
	// has, /proc shows the forked test binary, or an empty command line
	// while the new program's arguments are being set up. No event marks
	// the end of exec, so poll, bounded by a deadline.
	var id Identity
	deadline := time.Now().Add(10 * time.Second)
	for {
		var err error
		if id, err = ReadIdentity(pid); err != nil {
			t.Fatal(err)
		}
		if id.Comm == "sleep" && len(id.Cmdline) > 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(2 * time.Millisecond)
	}
	boot, _ := BootID()
	wantSID := pid
	if runtime.GOOS != "linux" {
		wantSID = 0 // not in kinfo_proc
	}
	if id.PID != pid || id.PPID != os.Getpid() || id.PGID != pid || id.SID != wantSID {
		t.Errorf("pid/ppid/pgid/sid = %d/%d/%d/%d, want %d/%d/%d/%d", id.PID, id.PPID, id.PGID, id.SID, pid, os.Getpid(), pid, wantSID)
	}
	if id.UID != os.Getuid() || id.BootID != boot || id.Comm != "sleep" {
		t.Errorf("uid %d boot %q comm %q; want %d %q sleep", id.UID, id.BootID, id.Comm, os.Getuid(), boot)
	}
	if !slices.Equal(id.Cmdline, []string{"sleep", "1000"}) {
		t.Errorf("Cmdline = %q", id.Cmdline)
	}
	// Disk sleep too: a process just exec'd on a loaded machine may be
	// paging its program in.
	if id.State != StateSleeping && id.State != StateRunning && id.State != StateDiskSleep {
		t.Errorf("State = %v, want sleeping, running or disk-sleep", id.State)
	}
	self, err := ReadIdentity(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if id.StartTime < self.StartTime {
		t.Errorf("child start time %d before the test's %d", id.StartTime, self.StartTime)
	}
	if got := CheckLiveness(pid); got != LivenessAlive {
		t.Errorf("CheckLiveness(live child) = %v", got)
	}
}

// A comm with spaces and parentheses, as the kernel prints it raw: the
// process is started through a symlink named like stat fields.
func TestReadIdentityHostileComm(t *testing.T) {
	skipUnlessLinux(t)
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(t.TempDir(), "x) R 1 (y z")
	if err := os.Symlink(sleep, link); err != nil {
		t.Fatal(err)
	}
	cmd := startCmd(t, exec.Command(link, "1000"))
	id, err := ReadIdentity(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	if id.Comm != "x) R 1 (y z" || id.PPID != os.Getpid() {
		t.Errorf("comm %q ppid %d, want %q %d", id.Comm, id.PPID, "x) R 1 (y z", os.Getpid())
	}
	if id.State != StateSleeping && id.State != StateRunning && id.State != StateDiskSleep {
		t.Errorf("State = %v (a naive split would say running from the comm)", id.State)
	}
}

func TestZombieCountsAsExited(t *testing.T) {
	cmd := startSleep(t) // reaped only in Cleanup
	pid := cmd.Process.Pid
	h, err := Pin(pid)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := h.Wait(testCtx(t, 10*time.Second)); err != nil {
		t.Fatalf("Wait: %v", err)
	}
	// Not reaped yet: the pid exists as a zombie and kill(pid, 0) succeeds.
	if err := syscall.Kill(pid, 0); err != nil {
		t.Fatalf("kill(zombie, 0) = %v, want success", err)
	}
	id, err := ReadIdentity(pid)
	if err != nil {
		t.Fatal(err)
	}
	if id.State != StateZombie || len(id.Cmdline) != 0 {
		t.Errorf("state %v cmdline %q, want zombie with no cmdline", id.State, id.Cmdline)
	}
	if got := CheckLiveness(pid); got != LivenessGone {
		t.Errorf("CheckLiveness(zombie) = %v, want gone", got)
	}
	if !h.Exited() {
		t.Error("Exited() = false for a zombie")
	}
	if _, err := h.Identity(); !errors.Is(err, ErrUntrusted) {
		t.Errorf("Identity() of an exited pinned process: %v, want ErrUntrusted", err)
	}
	if err := h.Signal(syscall.SIGTERM); !errors.Is(err, ErrGone) {
		t.Errorf("Signal(zombie) = %v, want ErrGone", err)
	}
	if members, err := GroupMembers(id.PGID); err != nil || slices.Contains(members, pid) {
		t.Errorf("GroupMembers lists the zombie: %v, %v", members, err)
	}
	if groups, err := ProcessGroups(); err != nil || slices.Contains(groups[id.PGID], pid) {
		t.Errorf("ProcessGroups lists the zombie: %v, %v", groups[id.PGID], err)
	}
}

func TestGonePid(t *testing.T) {
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid // reaped; may be reused by then, so check kill first
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Skipf("pid %d was reused already", pid)
	}
	if got := CheckLiveness(pid); got != LivenessGone {
		t.Errorf("CheckLiveness(gone) = %v", got)
	}
	if _, err := ReadIdentity(pid); !errors.Is(err, ErrGone) {
		t.Errorf("ReadIdentity(gone) = %v, want ErrGone", err)
	}
	if _, err := Pin(pid); !errors.Is(err, ErrGone) {
		t.Errorf("Pin(gone) = %v, want ErrGone", err)
	}
	for _, bad := range []int{0, -1} {
		if got := CheckLiveness(bad); got != LivenessGone {
			t.Errorf("CheckLiveness(%d) = %v", bad, got)
		}
		if _, err := Pin(bad); !errors.Is(err, ErrGone) {
			t.Errorf("Pin(%d) = %v, want ErrGone", bad, err)
		}
	}
}

// A process of another user: root sees a nobody process alive; nobody sees
// a root process alive through EPERM, reads its identity, and cannot signal
// it (EPERM, not ErrGone).
func TestOtherUser(t *testing.T) {
	bin := otherUserBinary(t)
	nob := exec.Command("sleep", "1000")
	nob.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	startCmd(t, nob)
	id, err := ReadIdentity(nob.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	if id.UID != nobody || CheckLiveness(nob.Process.Pid) != LivenessAlive {
		t.Errorf("nobody's sleep: uid %d liveness %v", id.UID, CheckLiveness(nob.Process.Pid))
	}

	root := startSleep(t)
	if err := syscall.Kill(root.Process.Pid, 0); err != nil {
		t.Fatal(err)
	}
	r := runAsNobody(t, bin, "liveness", root.Process.Pid)
	if r.Liveness != "alive" || r.Identity == nil || r.Identity.UID != 0 || r.Identity.StartTime == 0 {
		t.Errorf("nobody's view of a root sleep: %+v", r)
	}
	r = runAsNobody(t, bin, "signal", root.Process.Pid)
	if r.Mode != "pidfd" || !strings.Contains(r.Err, "operation not permitted") {
		t.Errorf("nobody signalling root's sleep through a pidfd: %+v, want EPERM", r)
	}
	if CheckLiveness(root.Process.Pid) != LivenessAlive {
		t.Error("root's sleep died from nobody's signal")
	}
}

func TestGroupMembersAndDescendants(t *testing.T) {
	skipUnlessLinux(t) // setsid(1)
	// sh (own group) -> sleep (same group) and setsid sleep (escaped).
	cmd := exec.Command("sh", "-c", "sleep 1000 & setsid sleep 1001 & wait")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	startCmd(t, cmd)
	sh := cmd.Process.Pid
	t.Cleanup(func() {
		if pids, err := Descendants(sh); err == nil {
			for _, p := range pids {
				_ = syscall.Kill(p, syscall.SIGKILL)
			}
		}
	})
	deadline := time.Now().Add(10 * time.Second)
	var desc, members []int
	for {
		var err error
		if desc, err = Descendants(sh); err != nil {
			t.Fatal(err)
		}
		if members, err = GroupMembers(sh); err != nil {
			t.Fatal(err)
		}
		if len(desc) == 2 && len(members) == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("descendants %v members %v, want 2 and 2", desc, members)
		}
		// No event tells when the shell has forked and setsid ran: poll,
		// bounded by the deadline.
		time.Sleep(5 * time.Millisecond)
	}
	if !slices.Contains(members, sh) {
		t.Errorf("GroupMembers(%d) = %v, want the shell in it", sh, members)
	}
	// The one-scan view of every group agrees (the group's processes sleep,
	// so both scans see the same ones).
	groups, err := ProcessGroups()
	if err != nil {
		t.Fatal(err)
	}
	if got := groups[sh]; !slices.Equal(slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(members))) {
		t.Errorf("ProcessGroups()[%d] = %v, GroupMembers = %v, want the same pids", sh, got, members)
	}
	escaped := 0
	for _, p := range desc {
		if !slices.Contains(members, p) {
			escaped++
			id, err := ReadIdentity(p)
			if err != nil || id.SID != p {
				t.Errorf("escaped descendant %d: %+v %v", p, id, err)
			}
		}
	}
	if escaped != 1 {
		t.Errorf("descendants %v, members %v: want exactly one escaped", desc, members)
	}
	if _, err := GroupMembers(0); err == nil {
		t.Error("GroupMembers(0) succeeded")
	}
}
