//go:build integration && linux

package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestNginxDaemonized runs nginx without "daemon off": its first process
// forks the master and exits 0 at once. DESIGN.md "Starting": reported
// Failed / Daemonized naming the daemon's pid, the daemon stopped, nothing
// left after down.
func TestNginxDaemonized(t *testing.T) {
	f := newFleet(t, fleetOptions{files: nginxCase.files})
	f.edit("nginx.yaml", `, -g, "daemon off;"]`, `]`)
	f.startUp()

	// nginx writes its master's pid to run/nginx.pid; procfleet may stop
	// the daemon (and nginx then removes the file) at any moment, so it is
	// read on every look, with the status.
	pidFile := filepath.Join(f.dir, "run", "nginx.pid")
	daemon := 0
	var last serverStatus
	var stuck streak
	msg, ok := f.poll(readyBound, func() (bool, string) {
		if b, err := os.ReadFile(pidFile); err == nil && daemon == 0 {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
				daemon = pid
				f.snapshot(fmt.Sprintf("once nginx's daemon (master pid %d) wrote its pid file", pid))
			}
		}
		last = f.status("nginx")
		if last.Phase == "Failed" && last.Reason == "Daemonized" {
			return true, ""
		}
		if stuck.held(last.Phase == "Quarantined" || last.Phase == "Failed", stuckBound) {
			return true, "stuck"
		}
		return false, last.String()
	})
	reported := ok && msg != "stuck"
	if !reported {
		f.snapshot("when nginx was not reported Daemonized")
		f.logs("nginx")
		t.Errorf("nginx without daemon off: not Failed / Daemonized; status: %s", last)
	} else if daemon != 0 && !strings.Contains(last.Message, strconv.Itoa(daemon)) {
		t.Errorf("the Daemonized message does not name the daemon's pid %d: %q", daemon, last.Message)
	}
	if daemon == 0 && reported {
		// On a quiet machine procfleet can stop the daemon (and nginx remove
		// its pid file) before the first look: the message names it then.
		if m := daemonPid.FindStringSubmatch(last.Message); m != nil {
			daemon, _ = strconv.Atoi(m[1])
			t.Logf("nginx's pid file was gone before the first look; the Daemonized message names pid %d", daemon)
		}
	}
	if daemon == 0 {
		t.Errorf("nginx's daemon never wrote %s, and no message named its pid", relTo(pidFile, f.root))
	}

	// Once reported, the daemon is stopped (it is the server's).
	if reported {
		if _, ok := f.poll(goneBound, func() (bool, string) {
			return len(live(f.procs())) == 0 && !portListening(f.port("22080")), ""
		}); !ok {
			t.Errorf("nginx's daemon still running %s after the server was reported (%s):\n%s", goneBound, last, table(live(f.procs()), f.scanSpec()))
		}
	}

	r := f.cli("down", "-f", ".")
	if r.code != 0 {
		t.Errorf("down failed:\n%s", r)
	}
	checkNothingLeft(f, []string{"22080"}, "after down")
}

// daemonPid finds the daemon's pid in a Daemonized message ("... left pid
// N (...) running in the background ...").
var daemonPid = regexp.MustCompile(`left pid (\d+) `)

// exampleServers are the servers of examples/real-servers and their
// ports there.
var exampleServers = map[string]string{
	"nginx": "22080", "redis": "22379", "postgres": "22432", "memcached": "22211", "app": "22090",
}

// TestExampleFleet runs the whole example as a user would: up, apply
// --wait (postgres, redis and memcached, then the app that needs them;
// nginx beside them), the app reached through nginx talking to the three,
// then down leaving nothing. postgres.sh makes its cluster here (initdb).
func TestExampleFleet(t *testing.T) {
	f := newFleet(t, fleetOptions{files: []string{
		"app.yaml", "nginx.yaml", "nginx.conf", "redis.yaml", "postgres.yaml", "postgres.sh", "memcached.yaml",
	}})
	f.startUp()
	if r := f.cli("apply", "--wait", "--timeout", "100s", "-f", "."); r.code != 0 {
		f.snapshot("after apply --wait failed")
		f.logs("postgres")
		t.Fatalf("apply --wait failed:\n%s", r)
	}
	for name := range exampleServers {
		if st := f.status(name); st.Phase != "Running" || !st.Ready {
			t.Errorf("%s after apply --wait: %s", name, st)
		}
	}
	f.snapshot("with the example fleet Ready")

	nginx := f.port("22080")
	code, body, err := httpGet(fmt.Sprintf("http://127.0.0.1:%d/app/health", nginx))
	if err != nil || code != 200 || body != "ok\n" {
		t.Errorf("GET /app/health through nginx: %d %q %v", code, body, err)
	}
	code, body, err = httpGet(fmt.Sprintf("http://127.0.0.1:%d/app/", nginx))
	for _, want := range []string{"postgres 127.0.0.1:", "server_version ", "redis 127.0.0.1:", "PONG", "memcached 127.0.0.1:", "version 1."} {
		if err != nil || code != 200 || !strings.Contains(body, want) {
			t.Errorf("GET /app/ through nginx: %d %v, want %q in:\n%s", code, err, want, body)
		}
	}

	r := f.cli("down", "-f", ".")
	if r.code != 0 {
		t.Errorf("down failed:\n%s", r)
	}
	var ports []string
	for _, p := range exampleServers {
		ports = append(ports, p)
	}
	checkNothingLeft(f, ports, "after down")
}
