//go:build linux || darwin

package observe

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/procfleet/procfleet/internal/testserver"
)

// Env reads a variable of the environment a process was started with,
// through its pin: present, absent, wiped by a retitle, and unreadable.
func TestHandleEnv(t *testing.T) {
	dir := t.TempDir()
	ready := filepath.Join(dir, "ready")
	argv := testserver.Command("-ready-file", ready)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), testserver.Env(), "PROCFLEET_INSTANCE=tok-1")
	startCmd(t, cmd)
	waitFile(t, ready)
	h := mustPin(t, cmd.Process.Pid)
	v, found, err := h.Env("PROCFLEET_INSTANCE")
	if err != nil || !found || v != "tok-1" {
		t.Fatalf("Env = %q, %v, %v; want tok-1", v, found, err)
	}
	if _, found, err := h.Env("PROCFLEET_NOT_SET"); err != nil || found {
		t.Errorf("Env(absent) = %v, %v; want not found", found, err)
	}
}

func TestHandleEnvWipedByRetitle(t *testing.T) {
	skipUnlessLinux(t) // -retitle writes /proc/self/mem
	dir := t.TempDir()
	ready := filepath.Join(dir, "ready")
	argv := testserver.Command("-ready-file", ready, "-retitle", "server: master", "-retitle-wipe-env")
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), testserver.Env(), "PROCFLEET_INSTANCE=tok-2")
	startCmd(t, cmd)
	waitFile(t, ready)
	h := mustPin(t, cmd.Process.Pid)
	// The ready file is written before the retitle: wait for the title.
	waitFor(t, "the retitle", func() bool {
		id, err := h.Identity()
		return err == nil && len(id.Cmdline) > 0 && id.Cmdline[0] == "server: master"
	})
	id, _ := h.Identity()
	if FormatCmdline(id.Cmdline) != `["server: master"]` {
		t.Errorf("retitled command line %s (%d arguments)", FormatCmdline(id.Cmdline), len(id.Cmdline))
	}
	if _, found, err := h.Env("PROCFLEET_INSTANCE"); err != nil || found {
		t.Errorf("Env after the environment was wiped = %v, %v; want not found", found, err)
	}
}

func TestHandleEnvExited(t *testing.T) {
	cmd := startSleep(t)
	h := mustPin(t, cmd.Process.Pid)
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	if _, _, err := h.Env("PATH"); !errors.Is(err, ErrUntrusted) {
		t.Errorf("Env of an exited process = %v, want ErrUntrusted", err)
	}
}

// Another user's environment cannot be read: an error that is not
// ErrUntrusted (the process lives; its token is unknown, not absent).
func TestHandleEnvOtherUser(t *testing.T) {
	bin := otherUserBinary(t)
	root := startSleep(t)
	r := runAsNobody(t, bin, "env", root.Process.Pid)
	if !strings.Contains(r.Err, "permission denied") || strings.Contains(r.Err, ErrUntrusted.Error()) {
		t.Errorf("nobody reading root's environment: %+v, want permission denied", r)
	}
}

func TestScanProcessesEnv(t *testing.T) {
	mine := exec.Command("sleep", "1000")
	mine.Env = append(os.Environ(), "PROCFLEET_INSTANCE=scan-tok")
	startCmd(t, mine)
	other := startSleep(t)
	id, err := ReadIdentity(mine.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	find := func(es []ProcEntry, pid int) (ProcEntry, bool) {
		for _, e := range es {
			if e.PID == pid {
				return e, true
			}
		}
		return ProcEntry{}, false
	}
	es, err := ScanProcesses(ScanOptions{EnvKey: "PROCFLEET_INSTANCE"})
	if err != nil {
		t.Fatal(err)
	}
	if e, ok := find(es, mine.Process.Pid); !ok || !e.EnvFound || e.Env != "scan-tok" || e.StartTime != id.StartTime {
		t.Errorf("scan entry of the token carrier = %+v, %v", e, ok)
	}
	if e, ok := find(es, other.Process.Pid); !ok || e.EnvFound {
		t.Errorf("scan entry of a process without the variable = %+v, %v", e, ok)
	}
	// Processes started before EnvSince are listed without reading their
	// environment.
	es, err = ScanProcesses(ScanOptions{EnvKey: "PROCFLEET_INSTANCE", EnvSince: id.StartTime + 1_000_000})
	if err != nil {
		t.Fatal(err)
	}
	if e, ok := find(es, mine.Process.Pid); !ok || e.EnvFound || e.Cmdline != nil || e.UID != -1 {
		t.Errorf("scan entry before EnvSince = %+v, %v; want listed, environment and details not read", e, ok)
	}
	es, err = ScanProcesses(ScanOptions{Details: true})
	if err != nil {
		t.Fatal(err)
	}
	if e, ok := find(es, mine.Process.Pid); !ok || !slices.Equal(e.Cmdline, mine.Args) || e.UID != os.Getuid() {
		t.Errorf("scan entry with details = %+v, %v; want command line %q and uid %d", e, ok, mine.Args, os.Getuid())
	}
}
