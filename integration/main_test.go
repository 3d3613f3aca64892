//go:build integration && linux

package integration

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"testing"
)

var (
	flagProcfleet = flag.String("integration.procfleet", "", "test this procfleet binary instead of building ./cmd/procfleet")
	flagInstall   = flag.Bool("integration.install", true, "install missing Debian packages (as root, with apt-get)")
)

// tools is what TestMain found or built: the binaries the tests run.
var tools struct {
	procfleet string // the binary under test
	app       string // examples/real-servers/app
	example   string // examples/real-servers, the fleet the tests copy
	// serverExes are the resolved executables of the packages' servers
	// (/proc/PID/exe shows the target of a symlink: redis-server is a link
	// to redis-check-rdb).
	serverExes  map[string]bool
	postgresBin string // the folder with postgres, initdb
	work        string // a folder for the built binaries, removed at exit
}

func TestMain(m *testing.M) {
	flag.Parse()
	code := 1
	if err := setup(); err != nil {
		fmt.Fprintln(os.Stderr, "integration:", err)
	} else {
		code = m.Run()
	}
	if tools.work != "" {
		os.RemoveAll(tools.work)
	}
	os.Exit(code)
}

// setup installs what is missing, builds procfleet and the example app, and
// finds the servers' executables.
func setup() error {
	if err := ensurePackages(*flagInstall); err != nil {
		return err
	}
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Dir(filepath.Dir(file))
	tools.example = filepath.Join(root, "examples", "real-servers")

	work, err := os.MkdirTemp("", "procfleet-integration-")
	if err != nil {
		return err
	}
	tools.work = work
	// The binaries must be reachable by the user postgres (procfleet runs
	// as that user in one scenario).
	if err := os.Chmod(work, 0o755); err != nil {
		return err
	}
	tools.app = filepath.Join(work, "app")
	targets := [][2]string{{tools.app, "./examples/real-servers/app"}}
	tools.procfleet = *flagProcfleet
	if tools.procfleet == "" {
		tools.procfleet = filepath.Join(work, "procfleet")
		targets = append(targets, [2]string{tools.procfleet, "./cmd/procfleet"})
	} else if tools.procfleet, err = filepath.Abs(tools.procfleet); err != nil {
		return err
	}
	for _, tg := range targets {
		cmd := exec.Command("go", "build", "-o", tg[0], tg[1])
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("go build %s: %w\n%s", tg[1], err, out)
		}
	}

	tools.serverExes = map[string]bool{}
	for _, p := range []string{"/usr/sbin/nginx", "/usr/bin/redis-server", "/usr/bin/memcached"} {
		real, err := filepath.EvalSymlinks(p)
		if err != nil {
			return fmt.Errorf("resolve %s: %w", p, err)
		}
		tools.serverExes[real] = true
	}
	bin, err := postgresBinDir()
	if err != nil {
		return err
	}
	tools.postgresBin = bin
	tools.serverExes[filepath.Join(bin, "postgres")] = true
	return nil
}

// postgresBinDir returns the newest /usr/lib/postgresql/*/bin holding
// postgres, as examples/real-servers/postgres.sh chooses it.
func postgresBinDir() (string, error) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin/postgres")
	if len(dirs) == 0 {
		return "", errors.New("no /usr/lib/postgresql/*/bin/postgres: is the package postgresql installed?")
	}
	sort.Slice(dirs, func(i, j int) bool { return versionLess(dirs[i], dirs[j]) })
	return filepath.Dir(dirs[len(dirs)-1]), nil
}

// versionLess orders paths that differ in a numeric folder (15 < 16 < 100).
func versionLess(a, b string) bool {
	na := strings.Split(a, "/")
	nb := strings.Split(b, "/")
	for i := range min(len(na), len(nb)) {
		if na[i] == nb[i] {
			continue
		}
		if len(na[i]) != len(nb[i]) {
			return len(na[i]) < len(nb[i])
		}
		return na[i] < nb[i]
	}
	return len(na) < len(nb)
}
