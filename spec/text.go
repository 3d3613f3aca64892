package spec

import (
	"fmt"
	"net"
	"strconv"
	"strings"
)

// ShellText renders an argv for people on one line: an argument is quoted
// (Go syntax) when it is empty or holds a space, a quote or a character a
// shell would treat specially, so that the words stay apart as the kernel
// gets them. For display only: never pass it to a shell.
func ShellText(argv []string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		if a == "" || strings.ContainsAny(a, " \t\n'\"\\$`*?[]{}()<>|&;#~") {
			q[i] = strconv.Quote(a)
		} else {
			q[i] = a
		}
	}
	return strings.Join(q, " ")
}

// ProbeText describes a probe in one line, its defaults filled in; port is
// the server's port, used where the probe names none. A nil probe is
// "none", or "none (running is ready)" for a server without a port.
func ProbeText(p *Probe, port int) string {
	if p == nil {
		if port == 0 {
			return "none (running is ready)"
		}
		return "none"
	}
	or := func(n int) int {
		if n == 0 {
			return port
		}
		return n
	}
	var what string
	switch {
	case p.HTTPGet != nil:
		host := p.HTTPGet.Host
		if host == "" {
			host = "127.0.0.1"
		}
		path := p.HTTPGet.Path
		if path == "" {
			path = "/"
		}
		what = "GET http://" + net.JoinHostPort(host, strconv.Itoa(or(p.HTTPGet.Port))) + path
	case p.TCPSocket != nil:
		what = fmt.Sprintf("TCP connect to port %d", or(p.TCPSocket.Port))
	case p.Exec != nil:
		what = "exec " + ShellText(p.Exec.Command)
	}
	fail := p.FailureThreshold
	if fail <= 0 {
		fail = DefaultFailureThreshold
	}
	return fmt.Sprintf("%s, every %s (timeout %s, delay %s, %d failures)", what, p.Period(), p.Timeout(), p.InitialDelay(), fail)
}
