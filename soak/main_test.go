//go:build soak && linux

package soak

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// Environment of a stranger: the soak re-executes its own test binary with
// any argv (a server's exact command line, or a made-up one); these variables
// turn it into a stranger.
const (
	envStranger        = "PROCFLEET_SOAK_STRANGER"
	envStrangerSignals = "PROCFLEET_SOAK_STRANGER_SIGNALS"
	envStrangerListen  = "PROCFLEET_SOAK_STRANGER_LISTEN"
	// envStrangerMember names a file: the stranger starts a member of its
	// process group (a stranger too, recording signals to the same file)
	// and writes the member's pid there before it says "ready".
	envStrangerMember = "PROCFLEET_SOAK_STRANGER_MEMBER"
)

func TestMain(m *testing.M) {
	if os.Getenv(envStranger) == "1" {
		os.Exit(strangerMain())
	}
	os.Exit(m.Run())
}

// strangerMain is a process procfleet must never signal: it records every
// catchable signal it gets (and keeps running), optionally holds a port, and
// prints "ready" once set up, or "bind-failed" when the port is taken.
func strangerMain() int {
	sigFile := os.Getenv(envStrangerSignals)
	sigc := make(chan os.Signal, 16)
	signal.Notify(sigc)
	if p := os.Getenv(envStrangerListen); p != "" {
		port, err := strconv.Atoi(p)
		if err != nil {
			fmt.Println("bad-port")
			return 2
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			fmt.Println("bind-failed")
			return 3
		}
		defer l.Close()
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				_ = c.Close()
			}
		}()
	}
	if f := os.Getenv(envStrangerMember); f != "" {
		pid, err := startMember(f)
		if err != nil {
			fmt.Println("member-failed:", err)
			return 4
		}
		if err := os.WriteFile(f, []byte(strconv.Itoa(pid)+"\n"), 0o600); err != nil {
			fmt.Println("member-failed:", err)
			return 4
		}
	}
	fmt.Println("ready")
	for sig := range sigc {
		s, _ := sig.(syscall.Signal)
		switch s {
		case syscall.SIGURG, syscall.SIGCHLD, syscall.SIGWINCH, syscall.SIGPIPE:
			continue // the Go runtime's own preemption, and harmless noise
		}
		if sigFile == "" {
			continue
		}
		f, err := os.OpenFile(sigFile, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
		if err != nil {
			continue
		}
		fmt.Fprintf(f, "%d %s\n", os.Getpid(), sig)
		_ = f.Close()
	}
	return 0
}

// startMember starts a stranger in this stranger's process group (not a
// leader: it does not call setpgid) and waits for its "ready".
func startMember(memberFile string) (int, error) {
	cmd := exec.Command(os.Args[0])
	cmd.Args = []string{os.Args[0], "soak-group-member", memberFile}
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, envStrangerMember+"=") && !strings.HasPrefix(kv, envStrangerListen+"=") {
			env = append(env, kv)
		}
	}
	cmd.Env = env
	out, err := cmd.StdoutPipe()
	if err != nil {
		return 0, err
	}
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if strings.TrimSpace(line) != "ready" {
		_ = cmd.Process.Kill()
		return 0, fmt.Errorf("member said %q: %v", line, err)
	}
	go func() { _ = cmd.Wait() }()
	return cmd.Process.Pid, nil
}
