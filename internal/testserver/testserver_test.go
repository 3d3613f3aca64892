package testserver

import (
	"net"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// TestFreePortsDistinct: FreePorts hands out n different ports, each free
// to listen on once returned.
func TestFreePortsDistinct(t *testing.T) {
	const n = 50
	ports := FreePorts(t, n)
	if len(ports) != n {
		t.Fatalf("FreePorts(%d) returned %d ports", n, len(ports))
	}
	seen := map[int]bool{}
	for _, p := range ports {
		if seen[p] {
			t.Fatalf("port %d returned twice in %v", p, ports)
		}
		seen[p] = true
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			t.Errorf("port %d is not free: %v", p, err)
			continue
		}
		l.Close()
	}
}

// -exec replaces the server with another program in the same process.
func TestExecKeepsPid(t *testing.T) {
	bin := Build(t)
	cmd := exec.Command(bin, "-exec", "--", "sh", "-c", "echo $$")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if got := strings.TrimSpace(string(out)); got != strconv.Itoa(cmd.Process.Pid) {
		t.Errorf("the exec'd shell has pid %s, the server had %d", got, cmd.Process.Pid)
	}
}
