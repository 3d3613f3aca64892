package actuate

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

// Names of the entries of a state folder (DESIGN.md "State folder").
const (
	serversDir    = "servers"
	logsDir       = "logs"
	lockFile      = "lock"
	socketFile    = "procfleet.sock"
	statusFile    = "status.json"
	gitignoreFile = ".gitignore"

	recordExt     = ".json"
	tempInfix     = ".tmp-"
	corruptInfix  = ".corrupt-"
	foreignInfix  = ".foreign-"
	resolvedInfix = ".resolved-"
	staleTempAge  = time.Minute
	dirMode       = 0o700
	recordMode    = 0o600
	logMode       = 0o600
	corruptLayout = "20060102T150405.000000000Z"
)

// StateDir is an opened, trusted state folder. Path is absolute.
type StateDir struct {
	Path string
	// id is the folder's device and inode when it was opened; zero for a
	// StateDir made as a literal, whose id is read at each use.
	id FolderID
	// held is the folder, kept open so that its inode cannot be reused
	// while this StateDir lives (a folder deleted and made again at once
	// often gets the freed inode back): Check compares the path with it.
	// The garbage collector closes it with the StateDir.
	held *os.File
	// spares are the record inodes kept for reuse (see spareDir).
	spares sparePool
}

// OpenStateDir creates the state folder if needed (mode 0700, with servers/,
// servers/.spare/, logs/ and a .gitignore containing "*"), and refuses it
// when it, or one of its sub-folders, is owned by another user or writable
// by group or others. Lock removes the temp files an interrupted record
// write left behind.
func OpenStateDir(path string) (*StateDir, error) {
	if path == "" {
		return nil, errors.New("open state folder: empty path")
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("open state folder %s: %w", path, err)
	}
	_, statErr := os.Lstat(abs)
	if err := os.MkdirAll(abs, dirMode); err != nil {
		return nil, fmt.Errorf("open state folder %s: %w", abs, err)
	}
	if errors.Is(statErr, fs.ErrNotExist) {
		markTopDir(abs)
	}
	if err := checkDirTrust(abs); err != nil {
		return nil, err
	}
	for _, sub := range []string{serversDir, logsDir} {
		p := filepath.Join(abs, sub)
		if err := os.Mkdir(p, dirMode); err != nil && !errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("open state folder %s: %w", abs, err)
		}
		if err := checkDirTrust(p); err != nil {
			return nil, err
		}
	}
	if err := os.Mkdir(filepath.Join(abs, serversDir, spareDir), dirMode); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("open state folder %s: %w", abs, err)
	}
	gi := filepath.Join(abs, gitignoreFile)
	if _, err := os.Lstat(gi); errors.Is(err, fs.ErrNotExist) {
		if err := os.WriteFile(gi, []byte("*\n"), 0o600); err != nil {
			return nil, fmt.Errorf("open state folder %s: write .gitignore: %w", abs, err)
		}
	}
	d := &StateDir{Path: abs}
	if err := d.hold(); err != nil {
		return nil, fmt.Errorf("open state folder %s: %w", abs, err)
	}
	return d, nil
}

// InspectStateDir opens an existing state folder for a reader that does not
// hold its lock (status, describe, diff): the same trust checks as
// OpenStateDir, but it creates nothing and removes nothing. A missing
// servers/ or logs/ folder reads as empty. Such a reader must use the
// Inspect forms (InspectRecords, InspectRecord), which leave untrusted
// records where they are.
func InspectStateDir(path string) (*StateDir, error) {
	if path == "" {
		return nil, errors.New("inspect state folder: empty path")
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("inspect state folder %s: %w", path, err)
	}
	if err := checkDirTrust(abs); err != nil {
		return nil, err
	}
	for _, sub := range []string{serversDir, logsDir} {
		p := filepath.Join(abs, sub)
		if _, err := os.Lstat(p); errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err := checkDirTrust(p); err != nil {
			return nil, err
		}
	}
	d := &StateDir{Path: abs}
	if err := d.hold(); err != nil {
		return nil, fmt.Errorf("inspect state folder %s: %w", abs, err)
	}
	return d, nil
}

// hold opens the folder and keeps it open, and reads its id from the
// descriptor.
func (d *StateDir) hold() error {
	f, err := os.Open(d.Path)
	if err != nil {
		return err
	}
	fi, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return err
	}
	id, ok := fileID(fi)
	if !ok || !fi.IsDir() {
		_ = f.Close()
		return fmt.Errorf("%s: not a folder with a device and inode", d.Path)
	}
	d.id, d.held = id, f
	return nil
}

// Close releases the folder held open since OpenStateDir or
// InspectStateDir; Check fails after it. Calling it is optional (the
// garbage collector closes the folder with an unreachable StateDir) and
// idempotent.
func (d *StateDir) Close() error {
	if d.held == nil {
		return nil
	}
	err := d.held.Close()
	if errors.Is(err, os.ErrClosed) {
		return nil
	}
	return err
}

// folderID is the folder's device and inode as opened.
func (d *StateDir) folderID() (FolderID, error) {
	if d.id != (FolderID{}) {
		return d.id, nil
	}
	return statFolderID(d.Path)
}

// ID names the state folder by its device and inode ("2049-1234567"): the
// same folder has the same ID under any path, and a copy has another. It
// names the folder's cgroups (procfleet-<ID>).
func (d *StateDir) ID() string {
	id, err := d.folderID()
	if err != nil {
		return "unknown"
	}
	return fmt.Sprintf("%d-%d", id.Dev, id.Ino)
}

// Check reports whether Path still names the folder that was opened: a
// stat of the path compared with the folder held open since (device and
// inode, and that the held one still has a name), cheap enough for every
// resync. A folder deleted, or replaced by another at the same path, gives
// *StateDirChangedError; up then stops acting on it.
func (d *StateDir) Check() error {
	if d.held == nil {
		return fmt.Errorf("check state folder %s: not opened with OpenStateDir or InspectStateDir", d.Path)
	}
	now, err := statFolderID(d.Path)
	if err != nil {
		return &StateDirChangedError{Path: d.Path, Was: d.id, Err: err}
	}
	if now != d.id {
		return &StateDirChangedError{Path: d.Path, Was: d.id, Now: now}
	}
	if fi, err := d.held.Stat(); err == nil && linkCount(fi) == 0 {
		return &StateDirChangedError{Path: d.Path, Was: d.id, Err: fs.ErrNotExist}
	}
	return nil
}

// statFolderID reads the device and inode of the folder at path.
func statFolderID(path string) (FolderID, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return FolderID{}, err
	}
	id, ok := fileID(fi)
	if !ok {
		return FolderID{}, fmt.Errorf("%s: no device and inode on this system", path)
	}
	return id, nil
}

// checkDirTrust refuses a folder that is not a folder, is owned by another
// user, or is writable by group or others.
func checkDirTrust(path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("open state folder: %w", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("open state folder: %s is not a folder", path)
	}
	if uid, ok := fileOwner(fi); ok && uid != os.Geteuid() {
		return fmt.Errorf("open state folder: refusing %s: owned by uid %d, not by this user (uid %d)", path, uid, os.Geteuid())
	}
	if perm := fi.Mode().Perm(); perm&0o022 != 0 {
		return fmt.Errorf("open state folder: refusing %s: mode %04o is writable by group or others (want 0700; fix with chmod 700 %s)", path, perm, path)
	}
	return nil
}

// sweepTemps removes record temp files older than staleTempAge: they were
// left by a writer that died between create and rename. Younger ones may
// belong to a writer of this process. Only the lock holder sweeps: a temp
// file taken from the spares keeps the spare's age until it is written.
func (d *StateDir) sweepTemps(now time.Time) {
	entries, err := os.ReadDir(filepath.Join(d.Path, serversDir))
	if err != nil {
		return
	}
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), ".") || !strings.Contains(e.Name(), tempInfix) {
			continue
		}
		fi, err := e.Info()
		if err != nil || !fi.Mode().IsRegular() || now.Sub(fi.ModTime()) < staleTempAge {
			continue
		}
		_ = os.Remove(filepath.Join(d.Path, serversDir, e.Name()))
	}
}

// nameRE is a DNS label (DESIGN.md), which also keeps names out of paths.
var nameRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

func checkName(name string) error {
	if len(name) > 63 || !nameRE.MatchString(name) {
		return fmt.Errorf("invalid server name %q: want a DNS label", name)
	}
	return nil
}

// RecordPath is the path of the ownership record of a server.
func (d *StateDir) RecordPath(name string) string {
	return filepath.Join(d.Path, serversDir, name+recordExt)
}

// LogPath is the path of a server's log (its stdout and stderr).
func (d *StateDir) LogPath(name string) string {
	return filepath.Join(d.Path, logsDir, name+".log")
}

// EventsPath is the path of a server's event log (JSON lines), kept beside
// its log.
func (d *StateDir) EventsPath(name string) string {
	return filepath.Join(d.Path, logsDir, name+".events.jsonl")
}

// SocketPath is the path of the running reconciler's API socket.
func (d *StateDir) SocketPath() string { return filepath.Join(d.Path, socketFile) }

// StatusPath is the path of the last status written by up or apply.
func (d *StateDir) StatusPath() string { return filepath.Join(d.Path, statusFile) }

// LockPath is the path of the lock file.
func (d *StateDir) LockPath() string { return filepath.Join(d.Path, lockFile) }
