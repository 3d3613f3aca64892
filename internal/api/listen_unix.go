//go:build unix

package api

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/go-logr/logr"
)

// socketMode is the only mode the socket file may have.
const socketMode fs.FileMode = 0o600

// staleProbeTimeout bounds the connect that tells a live socket from a
// stale one.
const staleProbeTimeout = time.Second

// Listener is the API's listening socket. Accept returns only connections
// whose peer has our effective uid; Close removes the socket file if it is
// still the one Listen created.
type Listener struct {
	ln   *net.UnixListener
	path string
	fi   os.FileInfo // the socket file as created, to remove only ours
	uid  int
	log  logr.Logger

	closeOnce sync.Once
	closeErr  error
}

// Listen creates the socket at path, mode 0600 whatever the umask, and
// listens on it. A stale socket file (ours, nobody accepting) is replaced; a
// live one gives ErrInUse; a file that is not a socket, or is another user's,
// is left alone and gives an error. The caller should hold the state folder's
// lock, so no other procfleet process races the check and the replacement.
// log receives refused connections.
func Listen(path string, log logr.Logger) (*Listener, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("api: listen on %s: %w", path, err)
	}
	uid := os.Geteuid()
	if err := checkExisting(abs, uid); err != nil {
		return nil, err
	}

	// Bind at a temporary name in the same folder: the socket is created
	// with 0777 &^ umask and cannot be created tighter, so it gets its mode
	// and is checked before the rename gives it the name clients use. (The
	// process-wide umask is not touched: other goroutines create files.)
	// The temporary name is no longer than procfleet.sock, so it fits in a
	// socket address whenever the final name does.
	var rnd [4]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return nil, fmt.Errorf("api: listen on %s: %w", abs, err)
	}
	tmp := filepath.Join(filepath.Dir(abs), ".sock-"+hex.EncodeToString(rnd[:]))
	ln, err := listenUnix(tmp)
	if err != nil {
		return nil, fmt.Errorf("api: listen on %s: %w", abs, err)
	}
	ln.SetUnlinkOnClose(false) // Close removes the final name, and only if ours
	fail := func(err error) (*Listener, error) {
		_ = ln.Close()
		_ = os.Remove(tmp)
		return nil, fmt.Errorf("api: listen on %s: %w", abs, err)
	}
	if err := os.Chmod(tmp, socketMode); err != nil {
		return fail(err)
	}
	fi, err := os.Lstat(tmp)
	if err != nil {
		return fail(err)
	}
	if err := checkSocketFile(fi, uid); err != nil {
		return fail(err)
	}
	if fi.Mode().Perm() != socketMode {
		return fail(fmt.Errorf("socket mode is %v after chmod, want %v", fi.Mode().Perm(), socketMode))
	}
	if err := os.Rename(tmp, abs); err != nil {
		return fail(err)
	}
	final, err := os.Lstat(abs)
	if err != nil || !os.SameFile(fi, final) {
		_ = ln.Close()
		return nil, fmt.Errorf("api: listen on %s: socket file replaced while it was being created", abs)
	}
	return &Listener{ln: ln, path: abs, fi: final, uid: uid, log: log.WithValues("socket", abs)}, nil
}

// checkExisting decides what to do with a file already at path: nothing
// there or a stale socket of ours is fine (the rename replaces it).
func checkExisting(path string, uid int) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("api: listen on %s: %w", path, err)
	}
	if err := checkSocketFile(fi, uid); err != nil {
		return fmt.Errorf("api: listen on %s: refusing to replace it: %w", path, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), staleProbeTimeout)
	defer cancel()
	c, err := dialUnix(ctx, path)
	switch {
	case err == nil:
		_ = c.Close()
		return fmt.Errorf("api: listen on %s: %w", path, ErrInUse)
	case errors.Is(err, syscall.ECONNREFUSED):
		return nil // stale: its listener is gone
	default:
		return fmt.Errorf("api: listen on %s: cannot tell whether the socket is in use: %w", path, err)
	}
}

// checkSocketFile accepts only a socket (not a symlink to one) owned by uid.
func checkSocketFile(fi os.FileInfo, uid int) error {
	if fi.Mode().Type() != fs.ModeSocket {
		return fmt.Errorf("not a socket (mode %v)", fi.Mode())
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return errors.New("cannot read the file's owner")
	}
	if int(st.Uid) != uid {
		return fmt.Errorf("owned by uid %d, not by us (uid %d)", st.Uid, uid)
	}
	return nil
}

// Accept waits for the next connection from our own user. Connections from
// other users, or whose peer cannot be identified, are closed unread and
// logged.
func (l *Listener) Accept() (net.Conn, error) {
	for {
		c, err := l.ln.AcceptUnix()
		if err != nil {
			return nil, err
		}
		peer, err := peerCred(c)
		if err == nil && peer.UID == l.uid {
			return c, nil
		}
		if err != nil {
			l.log.Error(err, "API connection refused: peer credentials unreadable")
		} else {
			l.log.Info("API connection refused: peer is another user", "peerUID", peer.UID, "peerPID", peer.PID)
		}
		_ = c.Close()
	}
}

// Close stops listening and removes the socket file if it is still the one
// Listen created. It is idempotent.
func (l *Listener) Close() error {
	l.closeOnce.Do(func() {
		l.closeErr = l.ln.Close()
		if fi, err := os.Lstat(l.path); err == nil && os.SameFile(fi, l.fi) {
			if err := os.Remove(l.path); err != nil && l.closeErr == nil {
				l.closeErr = err
			}
		}
	})
	return l.closeErr
}

// Addr is the socket's address.
func (l *Listener) Addr() net.Addr { return &net.UnixAddr{Name: l.path, Net: "unix"} }

// Path is the socket file's path.
func (l *Listener) Path() string { return l.path }

// peer is what the kernel says about the other end of a connection.
type peer struct {
	UID int
	PID int // 0 when the system does not say
}

// peerCred reads the peer credentials of c.
func peerCred(c *net.UnixConn) (peer, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return peer{}, err
	}
	var p peer
	var credErr error
	if err := raw.Control(func(fd uintptr) { p, credErr = peerCredFD(int(fd)) }); err != nil {
		return peer{}, err
	}
	return p, credErr
}
