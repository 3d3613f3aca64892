//go:build soak && linux

package soak

import (
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestStrangerRecordsSignals checks the soak's own instrument: a stranger
// with a borrowed command line records a signal sent to it, is told apart
// from a server by pid and start time, and its unexpected end is a
// violation.
func TestStrangerRecordsSignals(t *testing.T) {
	h := newHarness(t, 1)
	argv := []string{"/nonexistent/testserver", "-port", "1", "-stamp", "x"}
	h.want[argvKey(argv)] = "s00"
	h.servers["s00"] = &server{name: "s00", argv: argv, keys: []string{argvKey(argv)}, tainted: map[int]string{}}
	st, err := h.startStranger("argv", "s00", argv, 0)
	if err != nil || st == nil {
		t.Fatalf("start stranger: %v", err)
	}
	if got := cmdlineOf(st.pid); got != argvKey(argv) {
		t.Fatalf("stranger command line %q, want %q", got, argvKey(argv))
	}
	if live := h.instances(h.servers["s00"]); len(live) != 0 {
		t.Fatalf("stranger counted as an instance of s00: %v", live)
	}
	if err := syscall.Kill(st.pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if _, ok := waitFor(t.Context(), 10*time.Second, func() bool {
		b, _ := os.ReadFile(st.sigFile)
		return strings.Contains(string(b), "terminated")
	}); !ok {
		t.Fatalf("stranger did not record SIGTERM")
	}
	// An unexpected end is a violation.
	_ = syscall.Kill(st.pid, syscall.SIGKILL)
	<-st.done
	h.mu.Lock()
	n := len(h.violations)
	h.mu.Unlock()
	if n != 1 {
		t.Fatalf("violations after a stranger was killed: %d, want 1", n)
	}
}

// TestStrangerPortHeld checks that a port stranger holds its port and that a
// second one on the same port reports the bind failure.
func TestStrangerPortHeld(t *testing.T) {
	h := newHarness(t, 2)
	port := h.pickPorts(1)[0]
	st, err := h.startStranger("port", "s00", []string{h.self, "soak-port-stranger"}, port)
	if err != nil || st == nil {
		t.Fatalf("start port stranger: %v", err)
	}
	if !portAccepts(port) {
		t.Fatalf("port %d not accepting with a stranger on it", port)
	}
	second, err := h.startStranger("port", "s00", []string{h.self, "soak-port-stranger"}, port)
	if err != nil || second != nil {
		t.Fatalf("second stranger on a held port: %v, %v", second, err)
	}
	h.stopStranger(st)
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.violations) != 0 {
		t.Fatalf("violations: %v", h.violations)
	}
}

// TestGroupStrangerRecordsSignals checks the instrument of the "pgid"
// fault: a signal to a group stranger's process group reaches the leader
// and its member, and both record it.
func TestGroupStrangerRecordsSignals(t *testing.T) {
	h := newHarness(t, 3)
	st, err := h.startStranger("group", "s00", []string{h.self, "soak-group-stranger"}, 0)
	if err != nil || st == nil {
		t.Fatalf("start group stranger: %v", err)
	}
	t.Cleanup(func() { h.stopStranger(st) })
	if st.member.pid == 0 || st.member.pid == st.pid {
		t.Fatalf("group stranger pid %d has member %d", st.pid, st.member.pid)
	}
	if pgid, err := syscall.Getpgid(st.member.pid); err != nil || pgid != st.pid {
		t.Fatalf("member pid %d in group %d (%v), want %d", st.member.pid, pgid, err, st.pid)
	}
	if err := syscall.Kill(-st.pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if _, ok := waitFor(t.Context(), 10*time.Second, func() bool {
		b, _ := os.ReadFile(st.sigFile)
		return strings.Count(string(b), "terminated") == 2
	}); !ok {
		b, _ := os.ReadFile(st.sigFile)
		t.Fatalf("SIGTERM to the group not recorded by both: %q", b)
	}
}
