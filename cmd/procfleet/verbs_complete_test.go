package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestCompleteVerbs: completion lists the new verbs, and completes server
// names for stop, start, restart, ps and down (each name offered once, the
// ones already typed left out, a prefix honoured).
func TestCompleteVerbs(t *testing.T) {
	state := filepath.Join(t.TempDir(), "state")
	r := procfleet(t, "__complete", "")
	for _, verb := range []string{"stop", "start", "restart", "status", "diff", "describe", "down"} {
		if r.code != 0 || !strings.Contains(r.stdout, "\n"+verb+"\t") && !strings.HasPrefix(r.stdout, verb+"\t") {
			t.Errorf("__complete \"\": no %q among the commands (exit %d):\n%s", verb, r.code, r.stdout)
		}
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"stop", ""}, "api\ndb\n:4\n"},
		{[]string{"start", "api", ""}, "db\n:4\n"},
		{[]string{"restart", "d"}, "db\n:4\n"},
		{[]string{"ps", ""}, "api\ndb\n:4\n"},
		{[]string{"down", "db", ""}, "api\n:4\n"},
	} {
		args := append([]string{"__complete", tt.args[0], "-f", "testdata/good.yaml", "--state-dir", state}, tt.args[1:]...)
		r := procfleet(t, args...)
		if r.code != 0 || r.stdout != tt.want {
			t.Errorf("%v: exit %d, stdout %q; want %q", args, r.code, r.stdout, tt.want)
		}
	}
}
