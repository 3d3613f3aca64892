//go:build linux || darwin

package observe

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/procfleet/procfleet/internal/testserver"
)

// startSleep starts `sleep 1000` as a child of the test; it is killed and
// reaped in Cleanup.
func startSleep(t testing.TB) *exec.Cmd {
	t.Helper()
	return startCmd(t, exec.Command("sleep", "1000"))
}

func startCmd(t testing.TB, cmd *exec.Cmd) *exec.Cmd {
	t.Helper()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return cmd
}

// startTestServer starts the test server (this test binary in its helper
// role) with args as a child of the test; it is killed and reaped in
// Cleanup.
func startTestServer(t testing.TB, args ...string) *exec.Cmd {
	t.Helper()
	argv := testserver.Command(args...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), testserver.Env())
	return startCmd(t, cmd)
}

// startNonChild starts `sleep 1000` as a child of a shell (so not a child
// of the test) and returns its pid. The shell reaps it; both are killed in
// Cleanup (the sleep through a pidfd).
func startNonChild(t testing.TB) int {
	t.Helper()
	pid, _ := startNonChildShell(t)
	return pid
}

// startNonChildShell is startNonChild that also returns the shell, whose
// exit (after its wait reaped the sleep) a test can wait for.
func startNonChildShell(t testing.TB) (int, *exec.Cmd) {
	t.Helper()
	cmd := exec.Command("sh", "-c", "sleep 1000 & echo $!; wait")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	startCmd(t, cmd)
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("read the pid of the shell's child: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatal(err)
	}
	// Killed through a pidfd, not by number: a test may let the shell reap
	// the sleep (and wait for that), after which its pid can be reused.
	// Until the sleep exits the shell cannot reap it, so the pid is still it.
	h, err := Pin(pid)
	if err != nil {
		_ = syscall.Kill(pid, syscall.SIGKILL)
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = h.Signal(syscall.SIGKILL)
		_ = h.Close()
	})
	return pid, cmd
}

// otherUserBinary copies the test binary where user nobody can run it.
func otherUserBinary(t *testing.T) string {
	t.Helper()
	skipUnlessLinux(t)
	if os.Geteuid() != 0 {
		t.Skip("needs root to run a helper as nobody")
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "observe-nobody-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "observe.test")
	data, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	return bin
}

const nobody = 65534

// runAsNobody runs the helper as uid/gid 65534 and decodes its result.
func runAsNobody(t *testing.T, bin, mode string, arg int) helperResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, strconv.Itoa(arg))
	cmd.Env = append(os.Environ(), helperEnv+"="+mode)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	cmd.Dir = "/"
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("helper %s as nobody: %v\n%s", mode, err, stderr.String())
	}
	var r helperResult
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("helper output %q: %v", out, err)
	}
	return r
}

// skipUnlessLinux skips tests of Linux-only facts (procfs, pidfs, setsid(1),
// uid 65534 as nobody).
func skipUnlessLinux(t testing.TB) {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skipf("Linux only (GOOS %s)", runtime.GOOS)
	}
}

// nativePinMode is what Pin gives on this system.
func nativePinMode() PinMode {
	if runtime.GOOS == "darwin" {
		return PinKqueue
	}
	return PinPidfd
}

// waitFor polls cond every few milliseconds until it holds, failing the
// test after 30 s: for states the kernel gives no event for (a file
// written, a title set).
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		<-tick.C
	}
}

// waitFile waits for a handshake file to hold a line.
func waitFile(t testing.TB, path string) {
	t.Helper()
	waitFor(t, path, func() bool {
		b, err := os.ReadFile(path)
		return err == nil && strings.HasSuffix(string(b), "\n")
	})
}
