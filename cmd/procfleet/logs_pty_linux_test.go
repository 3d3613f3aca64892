package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// openPTY opens a pseudo-terminal pair: what is written to tty arrives on
// master, as on a user's terminal. Both are closed when the test ends.
func openPTY(t *testing.T) (master, tty *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	t.Cleanup(func() { m.Close() })
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatalf("unlock pty: %v", err)
	}
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatalf("pty number: %v", err)
	}
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatalf("open pty: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return m, s
}

// logsOnTerminal runs logs with args, its stdout a terminal, and returns
// what the terminal received.
func logsOnTerminal(t *testing.T, args ...string) string {
	t.Helper()
	master, tty := openPTY(t)
	got := make(chan string, 1)
	go func() {
		var b bytes.Buffer
		_, _ = io.Copy(&b, master) // ends with EIO once tty is closed
		got <- b.String()
	}()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var stderr bytes.Buffer
	if code := run(ctx, append([]string{"logs"}, args...), tty, &stderr); code != 0 {
		t.Fatalf("logs %v on a terminal: exit %d, stderr %q", args, code, stderr.String())
	}
	tty.Close()
	select {
	case s := <-got:
		return strings.ReplaceAll(s, "\r\n", "\n") // the terminal's own line endings
	case <-time.After(30 * time.Second):
		t.Fatal("the terminal's output never ended")
		return ""
	}
}

// TestLogsColors: on a terminal each server's prefix has its color;
// NO_COLOR and --no-color drop them; a single server has no prefix to
// color. (TestLogs checks that output that is not a terminal has none.)
func TestLogsColors(t *testing.T) {
	dir := logsState(t)
	if err := os.WriteFile(dir+"/logs/db.log", []byte("ready\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("NO_COLOR", "")
	got := logsOnTerminal(t, "api", "db", "--tail", "1", "--state-dir", dir)
	colored := regexp.MustCompile(`^\x1b\[\d+mapi \| \x1b\[0mfive\n\x1b\[\d+mdb  \| \x1b\[0mready\n$`)
	if !colored.MatchString(got) {
		t.Errorf("on a terminal: %q; want each prefix in a color", got)
	}
	if got := logsOnTerminal(t, "api", "db", "--tail", "1", "--no-color", "--state-dir", dir); strings.Contains(got, "\x1b[") {
		t.Errorf("--no-color on a terminal printed colors: %q", got)
	}
	t.Setenv("NO_COLOR", "1")
	if got := logsOnTerminal(t, "api", "db", "--tail", "1", "--state-dir", dir); strings.Contains(got, "\x1b[") || !strings.Contains(got, "db  | ready\n") {
		t.Errorf("NO_COLOR=1 on a terminal: %q; want plain prefixes", got)
	}
	t.Setenv("NO_COLOR", "")
	if got := logsOnTerminal(t, "db", "--state-dir", dir); got != "ready\n" {
		t.Errorf("one server on a terminal: %q, want its line alone", got)
	}
}
