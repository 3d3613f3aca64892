package observe

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestProbeDiesWithProcfleet: an exec probe still running when the process
// that started it is killed with -9 (an up killed mid-probe) gets SIGKILL
// from the kernel and does not live on unsupervised.
func TestProbeDiesWithProcfleet(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "pid")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// The probe says its pid through the FIFO, then runs for longer than
	// the test: only the parent-death signal can end it in time.
	helper := exec.Command(exe, "sh", "-c", `echo $$ > "$0"; exec sleep 300`, fifo)
	helper.Env = append(os.Environ(), helperEnv+"=probe")
	if err := helper.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = helper.Process.Kill(); _ = helper.Wait() })

	got := make(chan string, 1)
	go func() {
		b, _ := os.ReadFile(fifo) // returns once the probe wrote and closed it
		got <- strings.TrimSpace(string(b))
	}()
	var line string
	select {
	case line = <-got:
	case <-time.After(10 * time.Second):
		_ = helper.Process.Kill()
		t.Fatal("the probe did not report its pid within 10s")
	}
	pid, err := strconv.Atoi(line)
	if err != nil {
		t.Fatalf("probe pid %q: %v", line, err)
	}
	h, err := Pin(pid)
	if err != nil {
		t.Fatalf("pin the probe (pid %d): %v", pid, err)
	}
	t.Cleanup(func() { _ = h.Signal(syscall.SIGKILL); _ = h.Close() })

	if err := helper.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = helper.Wait()
	if err := h.Wait(testCtx(t, 10*time.Second)); err != nil {
		t.Errorf("probe pid %d still runs after the process that started it was killed: %v", pid, err)
	}
}
