//go:build unix

package actuate

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/procfleet/procfleet/internal/safefile"
)

// Lock takes the state folder's lock: flock(LOCK_EX|LOCK_NB) on the lock
// file, then writes this process's pid into it, and removes the folder's
// empty server cgroups (left by servers that ended unwatched) and the
// intent records an earlier holder prepared and never used (PrepareNext),
// and record temp files older than a minute (sweepTemps).
// When another process (or
// another open of the lock file in this one) holds it, Lock fails at once
// with *LockedError naming the holder's pid. release unlocks and closes;
// the lock also ends when the process does.
func (d *StateDir) Lock() (release func() error, err error) {
	path := d.LockPath()
	f, err := safefile.Open(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock state folder: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		defer f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, &LockedError{Path: path, PID: readLockPID(f)}
		}
		return nil, fmt.Errorf("lock state folder %s: %w", path, err)
	}
	if err := writeLockPID(f); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("lock state folder %s: write pid: %w", path, err)
	}
	d.sweepCgroups()
	d.sweepPrepared()
	d.sweepTemps(time.Now())
	released := false
	return func() error {
		if released {
			return nil
		}
		released = true
		uerr := unix.Flock(int(f.Fd()), unix.LOCK_UN)
		cerr := f.Close()
		if uerr != nil {
			return fmt.Errorf("unlock state folder %s: %w", path, uerr)
		}
		return cerr
	}, nil
}

// writeLockPID writes this process's pid into the held lock file, for a
// second actor to name the holder. It is not synced: other processes read
// it through the page cache, and after a crash of the machine no process
// holds the lock, so what the file then says is never read as a holder.
func writeLockPID(f *os.File) error {
	if err := f.Truncate(0); err != nil {
		return err
	}
	_, err := f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	return err
}

// readLockPID reads the holder's pid; 0 when the file is empty (the holder
// has not written it yet) or unparsable.
func readLockPID(f *os.File) int {
	b, err := io.ReadAll(io.NewSectionReader(f, 0, 64))
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0
	}
	return pid
}
