package actuate

import (
	"os/exec"
	"slices"
	"syscall"
	"testing"

	"github.com/procfleet/procfleet/internal/testserver"
	"github.com/procfleet/procfleet/observe"
)

func TestParseStatGroup(t *testing.T) {
	tests := []struct {
		in       string
		pgid     int
		live, ok bool
	}{
		{"123 (srv) S 1 123 123 0 -1", 123, true, true},
		{"124 (a b) (c)) R 1 99 99 0", 99, true, true},
		{"125 (dead) Z 1 123 123 0", 123, false, true},
		{"126 (gone) X 1 123 123", 123, false, true},
		{"127 (cut) S 1", 0, false, false},
		{"128 no paren S 1 2", 0, false, false},
		{"129 (x) S 1 notanumber", 0, false, false},
		{"", 0, false, false},
	}
	for _, tt := range tests {
		pgid, live, ok := parseStatGroup([]byte(tt.in))
		if pgid != tt.pgid || live != tt.live || ok != tt.ok {
			t.Errorf("parseStatGroup(%q) = %d, %v, %v; want %d, %v, %v", tt.in, pgid, live, ok, tt.pgid, tt.live, tt.ok)
		}
	}
}

// TestScanGroupsFindsGroup: a real process in its own group (a test server
// in a new session) is listed under its group, as observe.GroupMembers
// lists it, and not once it has exited.
func TestScanGroupsFindsGroup(t *testing.T) {
	argv := testserver.Command()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(cmd.Environ(), testserver.Env())
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })

	groups, err := scanGroups()
	if err != nil {
		t.Fatal(err)
	}
	want, err := observe.GroupMembers(pid)
	if err != nil {
		t.Fatal(err)
	}
	if got := groups[pid]; !slices.Contains(got, pid) || !slices.Equal(got, want) {
		t.Errorf("scanGroups()[%d] = %v, observe.GroupMembers = %v, want both holding %d", pid, got, want, pid)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	groups, err = scanGroups()
	if err != nil {
		t.Fatal(err)
	}
	if got := groups[pid]; len(got) != 0 {
		t.Errorf("scanGroups()[%d] = %v after the process was reaped, want none", pid, got)
	}
}
