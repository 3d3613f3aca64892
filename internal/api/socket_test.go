//go:build unix

package api

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"

	"github.com/procfleet/procfleet/internal/testutil"
)

// staleSocket leaves a socket file at path that nobody accepts on, as a
// killed `up` does.
func staleSocket(t *testing.T, path string) {
	t.Helper()
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	ln.SetUnlinkOnClose(false)
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(path); err != nil {
		t.Fatalf("stale socket file missing: %v", err)
	}
}

func TestSocketModeIgnoresUmask(t *testing.T) {
	old := syscall.Umask(0) // the widest umask: a plain bind would give 0777
	t.Cleanup(func() { syscall.Umask(old) })
	l := serve(t, t.TempDir(), &fakeBackend{})
	fi, err := os.Lstat(l.Path())
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Type() != fs.ModeSocket || fi.Mode().Perm() != 0o600 {
		t.Errorf("socket file mode %v, want a socket with 0600", fi.Mode())
	}
	// No temporary name is left behind.
	entries, _ := os.ReadDir(filepath.Dir(l.Path()))
	if len(entries) != 1 {
		t.Errorf("folder holds %d entries, want only the socket: %v", len(entries), entries)
	}
}

func TestStaleSocketReplaced(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "procfleet.sock")
	staleSocket(t, path)
	if _, err := Dial(testContext(t), path); !errors.Is(err, ErrNoServer) {
		t.Fatalf("Dial of a stale socket: %v, want ErrNoServer", err)
	}
	b := &fakeBackend{result: result{Servers: []string{"api"}}}
	serve(t, dir, b)
	var out result
	if err := dial(t, path).Status(testContext(t), nil, &out); err != nil {
		t.Fatalf("Status through the replaced socket: %v", err)
	}
	if len(out.Servers) != 1 {
		t.Errorf("got %+v, want the backend's result", out)
	}
}

func TestLiveSocketNotStolen(t *testing.T) {
	dir := t.TempDir()
	first := serve(t, dir, &fakeBackend{})
	before, _ := os.Lstat(first.Path())
	_, err := Listen(first.Path(), testr.New(t))
	if !errors.Is(err, ErrInUse) {
		t.Fatalf("second Listen: %v, want ErrInUse", err)
	}
	after, _ := os.Lstat(first.Path())
	if !os.SameFile(before, after) {
		t.Errorf("the live socket file was replaced")
	}
	if err := dial(t, first.Path()).Status(testContext(t), nil, nil); err != nil {
		t.Errorf("first server no longer answers: %v", err)
	}
}

func TestListenRefusesOtherFiles(t *testing.T) {
	tests := []struct {
		name  string
		setup func(t *testing.T, path string)
		want  string
	}{
		{"regular file", func(t *testing.T, path string) {
			if err := os.WriteFile(path, []byte("keep me"), 0o600); err != nil {
				t.Fatal(err)
			}
		}, "not a socket"},
		{"symlink to a stale socket", func(t *testing.T, path string) {
			target := filepath.Join(filepath.Dir(path), "elsewhere.sock")
			staleSocket(t, target)
			if err := os.Symlink(target, path); err != nil {
				t.Fatal(err)
			}
		}, "not a socket"},
		{"folder", func(t *testing.T, path string) {
			if err := os.Mkdir(path, 0o700); err != nil {
				t.Fatal(err)
			}
		}, "not a socket"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "procfleet.sock")
			tt.setup(t, path)
			before, _ := os.Lstat(path)
			l, err := Listen(path, testr.New(t))
			if err == nil {
				l.Close()
				t.Fatal("Listen replaced a file that is not a stale socket of ours")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q, want it to say %q", err, tt.want)
			}
			after, err := os.Lstat(path)
			if err != nil || !os.SameFile(before, after) {
				t.Errorf("the file at the socket path was changed: %v", err)
			}
			if _, err := Dial(testContext(t), path); err == nil || errors.Is(err, ErrNoServer) {
				t.Errorf("Dial: %v, want an error other than ErrNoServer", err)
			}
		})
	}
}

func TestListenRefusesOtherUsersSocket(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to create a socket file owned by another user")
	}
	path := filepath.Join(t.TempDir(), "procfleet.sock")
	staleSocket(t, path)
	if err := os.Lchown(path, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	if _, err := Listen(path, testr.New(t)); err == nil || !strings.Contains(err.Error(), "owned by uid 65534") {
		t.Fatalf("Listen over another user's socket: %v, want a refusal naming its owner", err)
	}
	if _, err := os.Lstat(path); err != nil {
		t.Errorf("another user's socket file was removed: %v", err)
	}
	if _, err := Dial(testContext(t), path); err == nil || !strings.Contains(err.Error(), "owned by uid 65534") {
		t.Errorf("Dial of another user's socket: %v, want a refusal", err)
	}
}

func TestDialNoServer(t *testing.T) {
	_, err := Dial(testContext(t), filepath.Join(t.TempDir(), "procfleet.sock"))
	if !errors.Is(err, ErrNoServer) {
		t.Errorf("Dial without a socket: %v, want ErrNoServer", err)
	}
	_, err = Dial(testContext(t), filepath.Join(t.TempDir(), "missing", "procfleet.sock"))
	if !errors.Is(err, ErrNoServer) {
		t.Errorf("Dial without a state folder: %v, want ErrNoServer", err)
	}
}

func TestCloseRemovesOnlyItsSocket(t *testing.T) {
	dir := t.TempDir()
	l, err := Listen(filepath.Join(dir, "procfleet.sock"), testr.New(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(l.Path()); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("socket file left after Close: %v", err)
	}

	// A socket file that is no longer ours (replaced under us) stays.
	l, err = Listen(filepath.Join(dir, "procfleet.sock"), testr.New(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(l.Path()); err != nil {
		t.Fatal(err)
	}
	staleSocket(t, l.Path())
	_ = l.Close()
	if _, err := os.Lstat(l.Path()); err != nil {
		t.Errorf("Close removed a socket file it did not create: %v", err)
	}
}

func TestLongSocketPath(t *testing.T) {
	dir := t.TempDir()
	for len(dir) < 150 {
		dir = filepath.Join(dir, strings.Repeat("d", 40))
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	b := &fakeBackend{}
	l, err := Listen(filepath.Join(dir, "procfleet.sock"), testr.New(t))
	if err != nil {
		if strings.Contains(err.Error(), "too long") {
			t.Skipf("this system cannot shorten socket paths: %v", err)
		}
		t.Fatalf("Listen at a %d-byte path: %v", len(dir), err)
	}
	srv := &Server{Backend: b}
	testutil.RunUntilCleanup(t, "Serve", func(ctx context.Context) error { return srv.Serve(ctx, l) })
	if err := dial(t, l.Path()).Status(testContext(t), []string{"api"}, nil); err != nil {
		t.Fatalf("Status at a long path: %v", err)
	}
	if len(b.Calls()) != 1 {
		t.Errorf("backend calls %+v, want one", b.Calls())
	}
}

func TestServeEndsInFlightCalls(t *testing.T) {
	b := &fakeBackend{block: make(chan struct{}), called: make(chan call, 1)}
	l, err := Listen(filepath.Join(t.TempDir(), "procfleet.sock"), testr.New(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- (&Server{Backend: b, Log: testr.New(t)}).Serve(ctx, l) }()
	c := dial(t, l.Path())
	callErr := make(chan error, 1)
	go func() { callErr <- c.Reload(testContext(t), true, time.Hour, nil) }()
	select {
	case <-b.called:
	case <-time.After(30 * time.Second):
		t.Fatal("the reload did not reach the backend")
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Serve: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Serve did not return after its context ended")
	}
	if err := <-callErr; err == nil {
		t.Errorf("the in-flight reload succeeded, want an error as the server went away")
	}
	if _, err := os.Lstat(l.Path()); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("socket file left after Serve returned: %v", err)
	}
}

// TestOtherUserRefused runs a peer as uid 65534 (nobody) against the socket.
// The socket's mode is the first gate; the peer credential check is the
// second, so the test opens the first (chmod 0666 on the socket) to show the
// second refuses on its own, and checks the first separately.
func TestOtherUserRefused(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run a peer as another user (uid 65534)")
	}
	// A folder the other user can traverse, holding a copy of this test
	// binary it can run (go test's build folder is private).
	dir, err := os.MkdirTemp("", "procfleet-api-peer-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o711); err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "peer.test")
	copyFile(t, self, bin, 0o755)

	b := &fakeBackend{}
	l := serve(t, dir, b)
	peer := func(t *testing.T) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin)
		cmd.Env = []string{peerEnv + "=" + l.Path()}
		cmd.Dir = dir
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("peer as uid 65534: %v: %s", err, out)
		}
		return strings.TrimSpace(string(out))
	}

	t.Run("socket mode", func(t *testing.T) {
		if got := peer(t); !strings.HasPrefix(got, "connect:") || !strings.Contains(got, "permission denied") {
			t.Errorf("peer saw %q, want connect: permission denied", got)
		}
	})
	t.Run("peer credentials", func(t *testing.T) {
		if err := os.Chmod(l.Path(), 0o666); err != nil {
			t.Fatal(err)
		}
		got := peer(t)
		if !strings.HasPrefix(got, "closed:") {
			t.Errorf("peer saw %q, want the connection closed unanswered", got)
		}
	})
	if calls := b.Calls(); len(calls) != 0 {
		t.Errorf("backend called on behalf of another user: %+v", calls)
	}
	// Our own user still gets answers.
	if err := dial(t, l.Path()).Status(testContext(t), nil, nil); err != nil {
		t.Errorf("Status as our own user: %v", err)
	}
}

func copyFile(t *testing.T, from, to string, mode os.FileMode) {
	t.Helper()
	src, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
}
