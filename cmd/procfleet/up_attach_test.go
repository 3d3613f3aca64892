package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/procfleet/procfleet/internal/logfile"
	"github.com/procfleet/procfleet/internal/testserver"
)

// TestUpAttach runs the real binary with --attach: real test servers print
// on demand, and up's stdout holds their lines, each after "name | ", in the
// order written, across a rotation and a kill -9 (the restart shown by one
// marker with the new pid, before the new process's lines), and from a
// server that a fleet-file edit adds. Progress stays on stderr; stdout is a
// file: no colors. SIGTERM ends up with exit 0, the output complete.
func TestUpAttach(t *testing.T) {
	f := newE2EFleet(t, "api", "web")
	f.write(nil, nil)
	stdout := filepath.Join(f.dir, "attach.out")
	stderr := filepath.Join(f.dir, "attach.err")
	up, exited := f.upWithStdout(stdout, stderr, "--attach")
	st := f.waitStatus("all ready", readyWith("api", "web"))

	var sent []string
	say := func(name, line string) {
		t.Helper()
		httpPrint(t, f.ports[name], line)
		l := fmt.Sprintf("%s | %s\n", name, line)
		waitLog(t, stdout, l)
		sent = append(sent, l)
	}
	for i, name := range []string{"web", "api", "api", "web"} {
		say(name, fmt.Sprintf("%s line %d", name, i))
	}

	if err := logfile.Rotate(filepath.Join(f.state, "logs", "api.log"), logfile.Options{}); err != nil {
		t.Fatal(err)
	}
	say("api", "api after rotation")

	old := pidIn(st, "api")
	st = f.killAndRestart(st, "api")
	marker := fmt.Sprintf("api | --- procfleet: started pid %d at ", pidIn(st, "api"))
	waitLog(t, stdout, marker)
	say("api", "api after restart")

	// A server added by an edit of the fleet file is followed from its
	// first line.
	f.ports["job"] = testserver.FreePorts(t, 1)[0]
	f.write(nil, nil)
	f.waitStatus("job ready", readyWith("job"))
	say("job", "job's first words")
	say("web", "web at the end")

	if err := up.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			b, _ := os.ReadFile(stderr)
			t.Fatalf("up --attach after SIGTERM: %v\n%s", err, b)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("up --attach did not exit 30 s after SIGTERM")
	}

	b, err := os.ReadFile(stdout)
	if err != nil {
		t.Fatal(err)
	}
	got := string(b)
	inOrder(t, got, sent)
	if m, l := strings.Index(got, marker), strings.Index(got, "api | api after restart\n"); m > l {
		t.Errorf("the restart marker is not before the restarted server's line:\n%s", got)
	}
	// The first start shows too when up's follower saw it happen.
	for _, pid := range []int{old, pidIn(st, "api")} {
		if n := strings.Count(got, fmt.Sprintf("api | --- procfleet: started pid %d at ", pid)); n > 1 || (n == 0 && pid != old) {
			t.Errorf("%d start markers for api's pid %d:\n%s", n, pid, got)
		}
	}
	if strings.Contains(got, "\x1b[") {
		t.Errorf("colors in output that is not a terminal:\n%s", got)
	}
	if strings.Contains(got, "procfleet up") {
		t.Errorf("up's progress on stdout, with the servers' output:\n%s", got)
	}
	for _, l := range strings.SplitAfter(got, "\n") {
		if l != "" && !regexp.MustCompile(`^(api|web|job) \| .*\n$`).MatchString(l) {
			t.Errorf("a line without a server's prefix, or torn: %q", l)
		}
	}
}

// upWithStdout starts `procfleet up` in the background, its stdout and
// stderr in two files. The returned channel receives its Wait's result; it
// is killed when the test ends.
func (f *e2eFleet) upWithStdout(stdout, stderr string, extra ...string) (*exec.Cmd, <-chan error) {
	f.t.Helper()
	c := exec.Command(procfleetBin(f.t), append([]string{"up", "-f", f.file, "--state-dir", f.state, "--log-format", "console"}, extra...)...)
	out, err := os.Create(stdout)
	if err != nil {
		f.t.Fatal(err)
	}
	defer out.Close()
	errf, err := os.Create(stderr)
	if err != nil {
		f.t.Fatal(err)
	}
	defer errf.Close()
	c.Stdout, c.Stderr = out, errf
	if err := c.Start(); err != nil {
		f.t.Fatal(err)
	}
	done := make(chan error, 1)
	waited := make(chan struct{})
	go func() {
		defer close(waited)
		done <- c.Wait()
	}()
	f.t.Cleanup(func() {
		_ = c.Process.Kill()
		<-waited
	})
	return c, done
}
