//go:build unix

package safefile

import (
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// noHang runs fn and fails the test if it has not returned within 30 s: a
// broken open would block forever on a FIFO.
func noHang(t *testing.T, what string, fn func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); fn() }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s did not return within 30 s", what)
	}
}

// planted makes path hold something other than a regular file.
var planted = map[string]func(t *testing.T, path string){
	"a symbolic link": func(t *testing.T, path string) {
		target := filepath.Join(t.TempDir(), "outside")
		if err := os.WriteFile(target, []byte("keep\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, path); err != nil {
			t.Fatal(err)
		}
	},
	"a FIFO": func(t *testing.T, path string) {
		if err := unix.Mkfifo(path, 0o600); err != nil {
			t.Fatal(err)
		}
	},
	"a folder": func(t *testing.T, path string) {
		if err := os.Mkdir(path, 0o700); err != nil {
			t.Fatal(err)
		}
	},
	"a socket": func(t *testing.T, path string) {
		l, err := net.Listen("unix", path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
	},
}

func TestOpenRefusesWhatIsNotARegularFile(t *testing.T) {
	for kind, plant := range planted {
		for _, flag := range []int{os.O_RDONLY, os.O_WRONLY | os.O_CREATE | os.O_APPEND} {
			t.Run(kind, func(t *testing.T) {
				path := filepath.Join(t.TempDir(), "x.log")
				plant(t, path)
				var err error
				noHang(t, "Open", func() {
					var f *os.File
					f, err = Open(path, flag, 0o600)
					if f != nil {
						f.Close()
					}
				})
				var nr *NotRegularError
				if !errors.As(err, &nr) || nr.Path != path {
					t.Fatalf("Open(%s, %#x) = %v, want *NotRegularError naming the path", kind, flag, err)
				}
				if !strings.Contains(err.Error(), path) {
					t.Errorf("error %q does not name the path", err)
				}
			})
		}
	}
}

// A FIFO that has a reader opens for writing without blocking: the check
// of the opened descriptor refuses it.
func TestOpenRefusesFIFOWithReader(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.log")
	planted["a FIFO"](t, path)
	r, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	_, err = Open(path, os.O_WRONLY|os.O_APPEND, 0)
	var nr *NotRegularError
	if !errors.As(err, &nr) || nr.Kind != "a FIFO" {
		t.Fatalf("Open(FIFO with a reader) = %v, want *NotRegularError \"a FIFO\"", err)
	}
}

func TestOpenRegularFileIsBlocking(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.log")
	f, err := Open(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fl, err := unix.FcntlInt(f.Fd(), unix.F_GETFL, 0)
	if err != nil {
		t.Fatal(err)
	}
	if fl&unix.O_NONBLOCK != 0 {
		t.Error("O_NONBLOCK is still set on the returned file")
	}
	if fl&unix.O_APPEND == 0 {
		t.Error("O_APPEND is not set")
	}
	fd, err := unix.FcntlInt(f.Fd(), unix.F_GETFD, 0)
	if err != nil || fd&unix.FD_CLOEXEC == 0 {
		t.Errorf("descriptor is not close-on-exec (%#x, %v)", fd, err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("created with %v, %v; want mode 0600", fi.Mode(), err)
	}
	if _, err := Open(filepath.Join(t.TempDir(), "missing"), os.O_RDONLY, 0); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Open(missing) = %v, want fs.ErrNotExist", err)
	}
}

func TestOpenAppendMovesAsideAndStartsFresh(t *testing.T) {
	for kind, plant := range planted {
		t.Run(kind, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "api.log")
			plant(t, path)
			var f *os.File
			var moved string
			var err error
			noHang(t, "OpenAppend", func() { f, moved, err = OpenAppend(path, 0o600) })
			if err != nil {
				t.Fatalf("OpenAppend: %v", err)
			}
			defer f.Close()
			if !strings.HasPrefix(moved, path+CorruptInfix) {
				t.Fatalf("moved to %q, want %s%s<time>", moved, path, CorruptInfix)
			}
			if _, err := os.Lstat(moved); err != nil {
				t.Errorf("what was there is not kept at %s: %v", moved, err)
			}
			if _, err := f.WriteString("line\n"); err != nil {
				t.Fatal(err)
			}
			if b, err := os.ReadFile(path); err != nil || string(b) != "line\n" {
				t.Errorf("fresh file holds %q, %v", b, err)
			}
		})
	}
	// A regular file is appended to, nothing moved.
	path := filepath.Join(t.TempDir(), "ok.log")
	if err := os.WriteFile(path, []byte("a\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f, moved, err := OpenAppend(path, 0o600)
	if err != nil || moved != "" {
		t.Fatalf("OpenAppend(regular) = %q, %v", moved, err)
	}
	_, _ = f.WriteString("b\n")
	f.Close()
	if b, _ := os.ReadFile(path); string(b) != "a\nb\n" {
		t.Errorf("appended file holds %q", b)
	}
}

// A path that cannot be moved aside fails, naming it: /proc/self/cwd is a
// symbolic link in a file system that refuses renames.
func TestOpenAppendCannotMoveAside(t *testing.T) {
	const path = "/proc/self/cwd"
	if fi, err := os.Lstat(path); err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		t.Skipf("%s is not a symbolic link here (%v)", path, err)
	}
	_, moved, err := OpenAppend(path, 0o600)
	if err == nil || moved != "" {
		t.Fatalf("OpenAppend(%s) = moved %q, %v; want an error", path, moved, err)
	}
	if !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "moving it aside failed") {
		t.Errorf("error %q does not name the path and the failed move", err)
	}
}

func TestReadFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "status.json")
	if err := os.WriteFile(path, []byte("12345"), 0o600); err != nil {
		t.Fatal(err)
	}
	if b, err := ReadFile(path, 5); err != nil || string(b) != "12345" {
		t.Errorf("ReadFile = %q, %v", b, err)
	}
	if _, err := ReadFile(path, 4); err == nil || !strings.Contains(err.Error(), "larger than 4 bytes") {
		t.Errorf("ReadFile over the bound = %v", err)
	}
	fifo := filepath.Join(dir, "fifo")
	planted["a FIFO"](t, fifo)
	noHang(t, "ReadFile(FIFO)", func() {
		if _, err := ReadFile(fifo, 10); err == nil {
			t.Error("ReadFile(FIFO) succeeded")
		}
	})
}

// A device node (here one for /dev/null, made with mknod: root only) opens
// without error; the check of the opened descriptor refuses it.
func TestOpenRefusesDevice(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mknod needs root (not root here)")
	}
	path := filepath.Join(t.TempDir(), "x.log")
	if err := unix.Mknod(path, unix.S_IFCHR|0o600, int(unix.Mkdev(1, 3))); err != nil {
		t.Skipf("mknod: %v", err)
	}
	_, err := Open(path, os.O_WRONLY|os.O_APPEND, 0)
	var nr *NotRegularError
	if !errors.As(err, &nr) || nr.Kind != "a device" {
		t.Fatalf("Open(device) = %v, want *NotRegularError \"a device\"", err)
	}
}
