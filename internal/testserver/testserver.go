package testserver

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// EnvVar is the variable that makes RunIfHelper take over a test binary.
const EnvVar = "PROCFLEET_TESTSERVER"

// RunIfHelper runs the server and exits the process when the environment says
// this test binary was started as a helper. Call it first in TestMain.
func RunIfHelper() {
	if os.Getenv(EnvVar) != "1" {
		return
	}
	os.Exit(Main(os.Args[1:], os.Stdout, os.Stderr))
}

// Env returns the environment entry that turns a test binary into the helper.
func Env() string { return EnvVar + "=1" }

// Command returns the argv that runs the current test binary as the helper
// with the given server flags. The caller adds Env() to the environment.
func Command(args ...string) []string {
	self, err := os.Executable()
	if err != nil {
		self = os.Args[0]
	}
	return append([]string{self}, args...)
}

var (
	buildOnce sync.Once
	buildPath string
	buildErr  error
)

// Build compiles the stand-alone test server once per test binary and returns
// the path of the executable.
func Build(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "procfleet-testserver-")
		if err != nil {
			buildErr = err
			return
		}
		buildPath = filepath.Join(dir, "testserver")
		_, file, _, _ := runtime.Caller(0)
		pkg := filepath.Join(filepath.Dir(file), "cmd", "testserver")
		cmd := exec.Command("go", "build", "-o", buildPath, ".")
		cmd.Dir = pkg
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("build test server: %w: %s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return buildPath
}

// Main runs the server with the given flags and returns its exit code.
//
// With a port it answers GET /health (200 with its pid, or
// -health-status) and GET /print?line=S, which writes S and a line feed to
// stdout in one write before it answers.
//
// Flags:
//
//	-port N              listen on 127.0.0.1:N (0: no listener)
//	-health-status N     status answered on /health (default 200)
//	-stamp FILE          append "<unix ns> <pid>\n" at start
//	-signals FILE        append the name of each signal received
//	-ready-file FILE     write "<pid>\n" once listening (a handshake for tests)
//	-ignore-term         ignore SIGTERM (and SIGINT, SIGHUP)
//	-listen-delay D      wait D before listening
//	-exit-after D        exit after D with -exit-code
//	-exit-code N         exit code for -exit-after (default 0)
//	-kill-self-after D   SIGKILL itself after D (an OOM-kill stand-in)
//	-print S             write S on stdout and stderr at start
//	-grandchild FILE     start a grandchild (this program, no port) in the
//	                     same process group and write its pid to FILE
//	-grandchild-setsid   start the grandchild in its own session instead
//	-grandchild-holds-port  give the grandchild the listener: it serves the
//	                     port too, and keeps it when this process dies
//	-retitle S           overwrite its own argument area with S, as
//	                     setproctitle does (Linux): /proc/PID/cmdline then
//	                     shows S padded with empty arguments
//	-retitle-wipe-env    with -retitle, zero its environment area too, as
//	                     nginx and redis do (/proc/PID/environ shows none)
//	-daemonize           double-fork a daemon (its own session, parent
//	                     init) that runs the other flags, wait until it is
//	                     ready, and exit 0, as a server without "daemon off"
//	-daemon-pid-file F   with -daemonize, write the daemon's pid to F
//	-exec                replace itself (same pid) with the program and
//	                     arguments after the flags, after -exec-after
//	-exec-after D        wait D (listening, with -port) before -exec
//
// The listener, the grandchild, the handshake files and the retitle happen
// in that order, so a ready file means all of them are done.
func Main(args []string, stdout, stderr io.Writer) int {
	// The flag values must not point into the process's argument area,
	// which -retitle overwrites.
	args = slices.Clone(args)
	for i := range args {
		args[i] = strings.Clone(args[i])
	}
	fs := flag.NewFlagSet("testserver", flag.ContinueOnError)
	fs.SetOutput(stderr)
	port := fs.Int("port", 0, "")
	healthStatus := fs.Int("health-status", http.StatusOK, "")
	stamp := fs.String("stamp", "", "")
	signals := fs.String("signals", "", "")
	readyFile := fs.String("ready-file", "", "")
	ignoreTerm := fs.Bool("ignore-term", false, "")
	listenDelay := fs.Duration("listen-delay", 0, "")
	exitAfter := fs.Duration("exit-after", 0, "")
	exitCode := fs.Int("exit-code", 0, "")
	killSelfAfter := fs.Duration("kill-self-after", 0, "")
	printS := fs.String("print", "", "")
	grandchild := fs.String("grandchild", "", "")
	grandchildSetsid := fs.Bool("grandchild-setsid", false, "")
	grandchildPort := fs.Bool("grandchild-holds-port", false, "")
	retitle := fs.String("retitle", "", "")
	wipeEnv := fs.Bool("retitle-wipe-env", false, "")
	daemonize := fs.Bool("daemonize", false, "")
	daemonPIDFile := fs.String("daemon-pid-file", "", "")
	daemonStage := fs.Int("daemon-stage", 0, "")
	execArgs := fs.Bool("exec", false, "")
	execAfter := fs.Duration("exec-after", 0, "")
	listenFD := fs.Int("listen-fd", 0, "")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	switch {
	case *daemonize:
		return runDaemonize(args, *daemonPIDFile, stderr)
	case *daemonStage == 1:
		return runDaemonStage1(args, stderr)
	}
	if *execArgs && *execAfter <= 0 {
		return execNow(fs.Args(), stderr)
	}

	if *stamp != "" {
		if err := appendLine(*stamp, fmt.Sprintf("%d %d", time.Now().UnixNano(), os.Getpid())); err != nil {
			fmt.Fprintln(stderr, "testserver:", err)
			return 3
		}
	}
	if *printS != "" {
		fmt.Fprintln(stdout, *printS)
		fmt.Fprintln(stderr, *printS)
	}

	sigc := make(chan os.Signal, 8)
	watched := []os.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGUSR1, syscall.SIGCONT}
	signal.Notify(sigc, watched...)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if *killSelfAfter > 0 {
		time.AfterFunc(*killSelfAfter, func() { _ = syscall.Kill(os.Getpid(), syscall.SIGKILL) })
	}
	exitc := make(chan int, 1)
	if *exitAfter > 0 {
		time.AfterFunc(*exitAfter, func() { exitc <- *exitCode })
	}

	var srv *http.Server
	var l net.Listener
	if *port > 0 || *listenFD > 0 {
		if *listenDelay > 0 {
			select {
			case <-time.After(*listenDelay):
			case code := <-exitc:
				return code
			}
		}
		var err error
		if *listenFD > 0 {
			l, err = net.FileListener(os.NewFile(uintptr(*listenFD), "listener"))
		} else {
			l, err = net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(*port)))
		}
		if err != nil {
			fmt.Fprintln(stderr, "testserver:", err)
			return 4
		}
		mux := http.NewServeMux()
		mux.HandleFunc("/health", func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(*healthStatus)
			fmt.Fprintf(w, "pid %d\n", os.Getpid())
		})
		mux.HandleFunc("/print", func(w http.ResponseWriter, r *http.Request) {
			// One write of the line and its line feed, as a logger does,
			// done before the answer: a 200 means it is in the log.
			if _, err := io.WriteString(stdout, r.URL.Query().Get("line")+"\n"); err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
			}
		})
		srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
		go func() { _ = srv.Serve(l) }()
	}
	if *grandchild != "" {
		var share net.Listener
		if *grandchildPort {
			share = l
		}
		pid, err := startGrandchild(*grandchildSetsid, *signals, share)
		if err != nil {
			fmt.Fprintln(stderr, "testserver: grandchild:", err)
			return 3
		}
		if err := os.WriteFile(*grandchild, []byte(strconv.Itoa(pid)+"\n"), 0o644); err != nil {
			fmt.Fprintln(stderr, "testserver:", err)
			return 3
		}
	}
	if *readyFile != "" {
		if err := os.WriteFile(*readyFile, []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644); err != nil {
			fmt.Fprintln(stderr, "testserver:", err)
			return 3
		}
	}
	if *daemonStage == 2 {
		// Tell the first process the daemon is ready: its pid on fd 3.
		ready := os.NewFile(3, "daemon-ready")
		_, _ = fmt.Fprintf(ready, "%d\n", os.Getpid())
		_ = ready.Close()
	}
	if *retitle != "" {
		if err := setTitle(*retitle, *wipeEnv); err != nil {
			fmt.Fprintln(stderr, "testserver: retitle:", err)
			return 3
		}
	}
	var execTimer <-chan time.Time
	if *execArgs {
		execTimer = time.After(*execAfter)
	}

	for {
		select {
		case <-execTimer:
			return execNow(fs.Args(), stderr)
		case code := <-exitc:
			return code
		case sig := <-sigc:
			if *signals != "" {
				_ = appendLine(*signals, fmt.Sprintf("%d %s", os.Getpid(), signalName(sig)))
			}
			if sig == syscall.SIGUSR1 || sig == syscall.SIGCONT || *ignoreTerm {
				continue
			}
			if srv != nil {
				sctx, scancel := context.WithTimeout(ctx, 2*time.Second)
				_ = srv.Shutdown(sctx)
				scancel()
			}
			return 0
		}
	}
}

func startGrandchild(setsid bool, signals string, share net.Listener) (int, error) {
	self, err := os.Executable()
	if err != nil {
		return 0, err
	}
	args := []string{}
	if signals != "" {
		args = append(args, "-signals", signals)
	}
	cmd := exec.Command(self, args...)
	cmd.Env = os.Environ()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: setsid}
	if share != nil {
		f, err := share.(*net.TCPListener).File()
		if err != nil {
			return 0, err
		}
		defer f.Close()
		cmd.ExtraFiles = []*os.File{f}
		cmd.Args = append(cmd.Args, "-listen-fd", "3")
	}
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	pid := cmd.Process.Pid
	go func() { _ = cmd.Wait() }()
	return pid, nil
}

func signalName(sig os.Signal) string {
	s, ok := sig.(syscall.Signal)
	if !ok {
		return sig.String()
	}
	switch s {
	case syscall.SIGTERM:
		return "SIGTERM"
	case syscall.SIGINT:
		return "SIGINT"
	case syscall.SIGHUP:
		return "SIGHUP"
	case syscall.SIGUSR1:
		return "SIGUSR1"
	case syscall.SIGCONT:
		return "SIGCONT"
	}
	return s.String()
}

func appendLine(path, line string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	_, werr := f.WriteString(line + "\n")
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		return errors.Join(fmt.Errorf("append to %s", path), werr)
	}
	return nil
}

// PortFree reports whether a listener can bind 127.0.0.1:port right now,
// that is, nothing holds the port on loopback.
func PortFree(port int) bool {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return false
	}
	l.Close()
	return true
}

// execNow replaces this process with argv (looked up in PATH), keeping its
// pid and environment.
func execNow(argv []string, stderr io.Writer) int {
	if len(argv) == 0 {
		fmt.Fprintln(stderr, "testserver: -exec: no program after the flags")
		return 2
	}
	path, err := exec.LookPath(argv[0])
	if err != nil {
		fmt.Fprintln(stderr, "testserver: -exec:", err)
		return 3
	}
	err = syscall.Exec(path, argv, os.Environ())
	fmt.Fprintln(stderr, "testserver: -exec:", err)
	return 3
}

// withoutFlag returns args without the boolean flag name and, for a flag
// that takes a value, its value.
func withoutFlag(args []string, name string, hasValue bool) []string {
	var out []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "-"+name || a == "--"+name:
			if hasValue {
				i++
			}
			continue
		case strings.HasPrefix(a, "-"+name+"=") || strings.HasPrefix(a, "--"+name+"="):
			continue
		}
		out = append(out, a)
	}
	return out
}

// runDaemonize is the first process of a daemonizing server: it starts a
// first child (stage 1) that starts the daemon (stage 2, its own session)
// and exits at once, so that the daemon is orphaned, as a classic double
// fork leaves it. It waits until the daemon says it is ready (its pid on a
// pipe), writes the pid to pidFile, and exits 0.
func runDaemonize(args []string, pidFile string, stderr io.Writer) int {
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintln(stderr, "testserver: daemonize:", err)
		return 3
	}
	rest := withoutFlag(withoutFlag(args, "daemonize", false), "daemon-pid-file", true)
	r, w, err := os.Pipe()
	if err != nil {
		fmt.Fprintln(stderr, "testserver: daemonize:", err)
		return 3
	}
	cmd := exec.Command(self, append([]string{"-daemon-stage", "1"}, rest...)...)
	cmd.Env = os.Environ()
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	cmd.ExtraFiles = []*os.File{w}
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(stderr, "testserver: daemonize:", err)
		return 3
	}
	_ = w.Close()
	_ = cmd.Wait()
	line, err := io.ReadAll(io.LimitReader(r, 64))
	_ = r.Close()
	pid := strings.TrimSpace(string(line))
	if err != nil || pid == "" {
		fmt.Fprintln(stderr, "testserver: daemonize: the daemon did not get ready")
		return 3
	}
	if pidFile != "" {
		if err := os.WriteFile(pidFile, []byte(pid+"\n"), 0o644); err != nil {
			fmt.Fprintln(stderr, "testserver: daemonize:", err)
			return 3
		}
	}
	return 0
}

// runDaemonStage1 starts the daemon in a session of its own, handing on the
// ready pipe (fd 3), and exits without waiting for it.
func runDaemonStage1(args []string, stderr io.Writer) int {
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintln(stderr, "testserver: daemonize:", err)
		return 3
	}
	rest := withoutFlag(args, "daemon-stage", true)
	cmd := exec.Command(self, append([]string{"-daemon-stage", "2"}, rest...)...)
	cmd.Env = os.Environ()
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	cmd.ExtraFiles = []*os.File{os.NewFile(3, "daemon-ready")}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(stderr, "testserver: daemonize:", err)
		return 3
	}
	return 0
}
