//go:build integration && linux

package integration

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// debPackage is a Debian package the suite needs and a file that shows it
// is installed.
type debPackage struct {
	name string
	// files: any one existing (a glob) means installed.
	file string
}

// debPackages are the servers and the clients the tests talk to them with.
// postgresql brings postgresql-client (psql, pg_isready); redis-server
// brings redis-tools (redis-cli).
var debPackages = []debPackage{
	{"nginx-light", "/usr/sbin/nginx"},
	{"redis-server", "/usr/bin/redis-server"},
	{"redis-tools", "/usr/bin/redis-cli"},
	{"memcached", "/usr/bin/memcached"},
	{"postgresql", "/usr/lib/postgresql/*/bin/postgres"},
	{"postgresql-client", "/usr/bin/psql"},
}

// policyRC is where invoke-rc.d asks whether a package's service may start;
// exit status 101 means "no". Installing a server package must not start its
// system service: it would take the package's default port and run beside
// the tests.
const policyRC = "/usr/sbin/policy-rc.d"

// aptLockTimeout is how long apt-get waits for another apt or dpkg (other
// work on the machine) to release the dpkg lock, in seconds.
const aptLockTimeout = "300"

// ensurePackages installs the missing packages when install is set and
// this process is root; otherwise a missing package is an error naming it.
func ensurePackages(install bool) error {
	var missing []string
	for _, p := range debPackages {
		if m, _ := filepath.Glob(p.file); len(m) == 0 {
			missing = append(missing, p.name)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	if !install || os.Geteuid() != 0 {
		return fmt.Errorf("missing Debian packages %s: install them (apt-get install %s) or run the suite as root with -integration.install (the default)",
			strings.Join(missing, ", "), strings.Join(missing, " "))
	}
	restore, err := forbidServiceStarts()
	if err != nil {
		return err
	}
	defer restore()
	fmt.Fprintf(os.Stderr, "integration: installing %s\n", strings.Join(missing, " "))
	apt := func(args ...string) error {
		cmd := exec.Command("apt-get", append([]string{"-o", "DPkg::Lock::Timeout=" + aptLockTimeout, "-q"}, args...)...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		out, err := cmd.CombinedOutput()
		if err != nil {
			return fmt.Errorf("apt-get %s: %w\n%s", strings.Join(args, " "), err, out)
		}
		return nil
	}
	if err := apt("update"); err != nil {
		return err
	}
	return apt(append([]string{"install", "-y", "--no-install-recommends"}, missing...)...)
}

// forbidServiceStarts puts a policy-rc.d that exits 101 in place, keeping
// one already there aside, and returns the function that puts things back.
func forbidServiceStarts() (restore func(), err error) {
	saved := policyRC + ".procfleet-integration-saved"
	had := true
	if err := os.Rename(policyRC, saved); errors.Is(err, os.ErrNotExist) {
		had = false
	} else if err != nil {
		return nil, fmt.Errorf("keep %s aside: %w", policyRC, err)
	}
	put := func() {
		os.Remove(policyRC)
		if had {
			if err := os.Rename(saved, policyRC); err != nil {
				fmt.Fprintf(os.Stderr, "integration: restore %s from %s: %v\n", policyRC, saved, err)
			}
		}
	}
	if err := os.WriteFile(policyRC, []byte("#!/bin/sh\n# procfleet integration suite: no service starts while it installs packages\nexit 101\n"), 0o755); err != nil {
		put()
		return nil, fmt.Errorf("write %s: %w", policyRC, err)
	}
	return put, nil
}
