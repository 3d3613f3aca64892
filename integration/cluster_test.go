//go:build integration && linux

package integration

import (
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sync"
	"testing"
)

// postgresOSUser is the user postgres runs as when procfleet runs as root
// (postgres.sh's default), and the user procfleet runs as in the
// postgres-as-user scenarios.
const postgresOSUser = "postgres"

var cluster struct {
	once sync.Once
	path string
	err  error
}

// copyCluster puts a fresh copy of a postgres cluster, made once per test
// binary with initdb as postgres.sh makes it, at dst (run/postgres of a
// fleet): initdb takes seconds, a copy milliseconds. As root the cluster
// belongs to the user postgres, else to the test's user.
func copyCluster(t *testing.T, dst string) {
	t.Helper()
	cluster.once.Do(func() { cluster.path, cluster.err = makeCluster() })
	if cluster.err != nil {
		t.Fatal(cluster.err)
	}
	// cp -a keeps the owner and the modes postgres insists on (0700).
	if out, err := exec.Command("cp", "-a", cluster.path, dst).CombinedOutput(); err != nil {
		t.Fatalf("copy the postgres cluster: %v: %s", err, out)
	}
}

// makeCluster runs initdb into a folder under tools.work.
func makeCluster() (string, error) {
	parent := filepath.Join(tools.work, "cluster")
	data := filepath.Join(parent, "postgres")
	if err := os.MkdirAll(data, 0o700); err != nil {
		return "", err
	}
	if err := os.Chmod(parent, 0o755); err != nil {
		return "", err
	}
	var argv []string
	if os.Geteuid() == 0 {
		u, err := user.Lookup(postgresOSUser)
		if err != nil {
			return "", fmt.Errorf("the user %s (made by the postgresql package): %w", postgresOSUser, err)
		}
		var uid, gid int
		fmt.Sscan(u.Uid, &uid)
		fmt.Sscan(u.Gid, &gid)
		if err := os.Chown(data, uid, gid); err != nil {
			return "", err
		}
		argv = []string{"setpriv", "--reuid=" + postgresOSUser, "--regid=" + postgresOSUser, "--init-groups", "--"}
	}
	argv = append(argv, filepath.Join(tools.postgresBin, "initdb"), "-D", data, "-U", "postgres", "--auth=trust", "--encoding=UTF8", "--no-sync")
	if out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput(); err != nil {
		return "", fmt.Errorf("initdb: %w\n%s", err, out)
	}
	return data, nil
}
