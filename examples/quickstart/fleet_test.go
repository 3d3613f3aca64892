package quickstart_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/procfleet/procfleet/internal/testserver"
)

// TestFleet runs the quick start the way run.sh does, through the real
// procfleet binary: apply --wait, status -o json, the check program, down.
// It copies procfleet.yaml with free ports in place of 18081-18083 and the
// built binaries' paths in place of ./bin/, so it runs beside a quick start
// (or another test run) without clashing.
func TestFleet(t *testing.T) {
	bin := buildBinaries(t)
	pf := filepath.Join(bin, "procfleet")

	dir := t.TempDir()
	state := filepath.Join(t.TempDir(), "state")
	free := testserver.FreePorts(t, 3)
	ports := map[string]int{"18081": free[0], "18082": free[1], "18083": free[2]}
	fleet := writeFleet(t, dir, bin, ports)
	url := func(old string) string { return "http://127.0.0.1:" + strconv.Itoa(ports[old]) }

	// procfleet runs the binary and returns its stdout, and its stdout and
	// stderr together for messages.
	procfleet := func(args ...string) (stdout, all string, err error) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, pf, append(args, "--state-dir", state)...)
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		err = cmd.Run()
		return out.String(), out.String() + errOut.String(), err
	}
	stopped := false
	t.Cleanup(func() {
		if stopped {
			return
		}
		if _, out, err := procfleet("down", "-f", fleet); err != nil {
			t.Errorf("cleanup: procfleet down: %v\n%s", err, out)
		}
	})

	if _, out, err := procfleet("apply", "--wait", "--timeout", "90s", "-f", fleet); err != nil {
		t.Fatalf("procfleet apply --wait: %v\n%s", err, out)
	}

	checkStatus(t, procfleet, fleet)

	check := exec.Command(filepath.Join(bin, "check"), "-backend", url("18081"), "-api", url("18082"), "-web", url("18083"))
	if out, err := check.CombinedOutput(); err != nil {
		t.Errorf("check: %v\n%s", err, out)
	}

	if _, out, err := procfleet("down", "-f", fleet); err != nil {
		t.Fatalf("procfleet down: %v\n%s", err, out)
	}
	stopped = true
	for old, port := range ports {
		if accepting(port) {
			t.Errorf("port %d (%s in procfleet.yaml) still accepts connections after down", port, old)
		}
	}
}

// writeFleet copies procfleet.yaml into dir with the ports replaced and
// ./bin/ pointing at bin, and returns the new file's path.
func writeFleet(t *testing.T, dir, bin string, ports map[string]int) string {
	t.Helper()
	b, err := os.ReadFile("procfleet.yaml")
	if err != nil {
		t.Fatal(err)
	}
	text := strings.ReplaceAll(string(b), "./bin/", bin+string(filepath.Separator))
	for old, port := range ports {
		text = strings.ReplaceAll(text, old, strconv.Itoa(port))
	}
	path := filepath.Join(dir, "procfleet.yaml")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// accepting reports whether something accepts TCP connections on port.
func accepting(port int) bool {
	c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), time.Second)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// checkStatus expects procfleet status -o json to show the three servers
// Running and ready.
func checkStatus(t *testing.T, procfleet func(args ...string) (string, string, error), fleet string) {
	t.Helper()
	out, all, err := procfleet("status", "-f", fleet, "-o", "json")
	if err != nil {
		t.Errorf("procfleet status -o json: %v\n%s", err, all)
		return
	}
	var status struct {
		Servers []struct {
			Name  string `json:"name"`
			Phase string `json:"phase"`
			Ready bool   `json:"ready"`
			PID   int    `json:"pid"`
			Port  int    `json:"port"`
		} `json:"servers"`
	}
	if err := json.Unmarshal([]byte(out), &status); err != nil {
		t.Errorf("status -o json does not decode: %v\n%s", err, out)
		return
	}
	if len(status.Servers) != 3 {
		t.Errorf("status lists %d servers, want 3:\n%s", len(status.Servers), out)
	}
	for _, s := range status.Servers {
		if !s.Ready || s.Phase != "Running" || s.PID <= 0 {
			t.Errorf("server %s: phase %q ready %v pid %d, want Running, ready, with a pid", s.Name, s.Phase, s.Ready, s.PID)
		}
	}
}
