package spec

import "testing"

func TestShellText(t *testing.T) {
	for _, tc := range []struct {
		argv []string
		want string
	}{
		{nil, ""},
		{[]string{"./bin/api", "-port", "8080", "hello world", "", "$(PORT)"}, `./bin/api -port 8080 "hello world" "" "$(PORT)"`},
		{[]string{"sh", "-c", "exec sleep 9; echo 'x'"}, `sh -c "exec sleep 9; echo 'x'"`},
		{[]string{"nginx", "-g", "daemon off;"}, `nginx -g "daemon off;"`},
		{[]string{"ls", "*.go", "a\tb"}, `ls "*.go" "a\tb"`},
	} {
		if got := ShellText(tc.argv); got != tc.want {
			t.Errorf("ShellText(%q) = %s, want %s", tc.argv, got, tc.want)
		}
	}
}

func TestProbeText(t *testing.T) {
	for _, tc := range []struct {
		p    *Probe
		port int
		want string
	}{
		{nil, 0, "none (running is ready)"},
		{nil, 8080, "none"},
		{&Probe{HTTPGet: &HTTPGetAction{Path: "/health"}}, 8080, "GET http://127.0.0.1:8080/health, every 1s (timeout 1s, delay 0s, 3 failures)"},
		{&Probe{HTTPGet: &HTTPGetAction{Host: "::1", Port: 81}}, 8080, "GET http://[::1]:81/, every 1s (timeout 1s, delay 0s, 3 failures)"},
		{&Probe{TCPSocket: &TCPSocketAction{Port: 9}, PeriodSeconds: 5, FailureThreshold: 2}, 8080, "TCP connect to port 9, every 5s (timeout 1s, delay 0s, 2 failures)"},
		{&Probe{Exec: &ExecAction{Command: []string{"pg_isready", "-q"}}, InitialDelaySeconds: 2}, 0, "exec pg_isready -q, every 1s (timeout 1s, delay 2s, 3 failures)"},
	} {
		if got := ProbeText(tc.p, tc.port); got != tc.want {
			t.Errorf("ProbeText = %q, want %q", got, tc.want)
		}
	}
}
