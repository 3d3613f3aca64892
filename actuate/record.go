package actuate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// RecordVersion is the version of the record format written by this package.
const RecordVersion = 1

// maxRecordSize bounds what is read from a record file.
const maxRecordSize = 1 << 20

// Record is the ownership record of a server: what procfleet saw of the
// process right after it started it. The JSON is DESIGN.md's.
type Record struct {
	Version int    `json:"version"`
	Name    string `json:"name"`
	PID     int    `json:"pid"`
	PGID    int    `json:"pgid"`
	// StartTime is the kernel's start time of the process (Linux: field 22 of
	// /proc/PID/stat, clock ticks since boot; macOS: microseconds since the
	// epoch). 0 (absent or null) means the record cannot prove ownership
	// (rule 5).
	StartTime uint64    `json:"startTime"`
	BootID    string    `json:"bootId"`
	UID       int       `json:"uid"`
	Cmdline   []string  `json:"cmdline"`
	Port      int       `json:"port"`
	SpecHash  string    `json:"specHash"`
	StartedAt time.Time `json:"startedAt"`
	// PidfdInode is the pidfs inode of a pidfd for the process (Linux >= 6.9);
	// 0 when unknown.
	PidfdInode uint64 `json:"pidfdInode,omitempty"`
}

// ParseRecord decodes and checks a record's bytes. It never panics; name is
// the name the file is stored under and must match the record's.
func ParseRecord(name string, data []byte) (Record, error) {
	var r Record
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&r); err != nil {
		return Record{}, fmt.Errorf("parse: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return Record{}, errors.New("parse: trailing data after the record")
	}
	switch {
	case r.Version < 0 || r.Version > RecordVersion:
		return Record{}, fmt.Errorf("unsupported record version %d (this procfleet reads up to %d)", r.Version, RecordVersion)
	case r.Name != name:
		return Record{}, fmt.Errorf("record names server %q, stored as %q", r.Name, name)
	case r.PID <= 0:
		return Record{}, fmt.Errorf("invalid pid %d", r.PID)
	case r.PGID < 0:
		return Record{}, fmt.Errorf("invalid pgid %d", r.PGID)
	case r.Port < 0 || r.Port > 65535:
		return Record{}, fmt.Errorf("invalid port %d", r.Port)
	}
	return r, nil
}

// WriteRecord writes a server's record atomically: a temp file in servers/
// (mode 0600), write, fsync, rename over the record, fsync the folder. A
// reader sees the old record or the new one, never a part.
func (d *StateDir) WriteRecord(r Record) error {
	if err := checkName(r.Name); err != nil {
		return fmt.Errorf("write record: %w", err)
	}
	if r.Version == 0 {
		r.Version = RecordVersion
	}
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("write record of server %s: %w", r.Name, err)
	}
	data = append(data, '\n')
	dir := filepath.Join(d.Path, serversDir)
	if err := writeFileAtomic(dir, r.Name+recordExt, data); err != nil {
		return fmt.Errorf("write record of server %s: %w", r.Name, err)
	}
	return nil
}

// writeFileAtomic writes dir/name through a temp file in dir.
func writeFileAtomic(dir, name string, data []byte) (err error) {
	f, err := os.CreateTemp(dir, "."+name+tempInfix+"*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	renamed := false
	defer func() {
		if !renamed {
			_ = os.Remove(tmp)
		}
	}()
	if err := f.Chmod(recordMode); err != nil {
		_ = f.Close()
		return err
	}
	if _, err := f.Write(data); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
		return err
	}
	renamed = true
	return syncDir(dir)
}

func syncDir(dir string) error {
	df, err := os.Open(dir)
	if err != nil {
		return err
	}
	serr := df.Sync()
	cerr := df.Close()
	if serr != nil {
		return serr
	}
	return cerr
}

// ReadRecord reads a server's record. The file is opened without following
// symlinks and trusted only when it is a regular file owned by this user with
// no permission bits for group or others; a record that fails that check, or
// does not parse, is moved aside and reported as *UntrustedRecordError. A
// missing record is an error wrapping fs.ErrNotExist. A record of a newer
// version is reported and left in place.
//
// Only the holder of the state folder's lock (up, apply, down) may call
// ReadRecord: moving a record aside changes the folder. Everyone else
// calls InspectRecord.
func (d *StateDir) ReadRecord(name string) (Record, error) {
	return d.readRecord(name, moveUntrusted)
}

// InspectRecord is ReadRecord for a reader that does not hold the state
// folder's lock (status, describe, diff): it changes nothing. An untrusted
// record is reported as *UntrustedRecordError with the same Reason that
// ReadRecord gives and an empty MovedTo, and its file stays where it is, as
// it is, for the lock holder to move aside.
func (d *StateDir) InspectRecord(name string) (Record, error) {
	return d.readRecord(name, keepUntrusted)
}

// untrustedAction says what a reader does with an untrusted record file.
type untrustedAction bool

const (
	// moveUntrusted renames it aside (the lock holder's readers).
	moveUntrusted untrustedAction = true
	// keepUntrusted only reports it (read-only readers).
	keepUntrusted untrustedAction = false
)

func (d *StateDir) readRecord(name string, act untrustedAction) (Record, error) {
	if err := checkName(name); err != nil {
		return Record{}, fmt.Errorf("read record: %w", err)
	}
	path := d.RecordPath(name)
	data, reason, err := readTrusted(path)
	if err != nil {
		return Record{}, fmt.Errorf("read record of server %s: %w", name, err)
	}
	if reason == "" {
		r, perr := ParseRecord(name, data)
		if perr == nil {
			return r, nil
		}
		var probe struct {
			Version int `json:"version"`
		}
		if json.Unmarshal(data, &probe) == nil && probe.Version > RecordVersion {
			return Record{}, &NewerRecordError{Name: name, Path: path, Version: probe.Version}
		}
		reason = perr.Error()
	}
	return Record{}, d.untrusted(name, path, reason, act)
}

// readTrusted opens path with O_NOFOLLOW and checks the opened file (not the
// path) before reading it. A non-empty reason means "do not trust"; err is
// for I/O errors, including a missing file.
func readTrusted(path string) (data []byte, reason string, err error) {
	// Opening a FIFO for reading blocks until a writer comes (status, apply
	// and up hung on a FIFO named <name>.json, deaf to SIGTERM): refuse what
	// is not a regular file before opening it. The checks of the opened
	// file below still decide; this one keeps the open from blocking (only
	// a FIFO swapped in between this look and the open still could).
	if fi, err := os.Lstat(path); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, "", err
		}
	} else if fi.Mode()&fs.ModeSymlink != 0 {
		return nil, "a symbolic link", nil
	} else if !fi.Mode().IsRegular() {
		return nil, "not a regular file", nil
	}
	f, err := os.OpenFile(path, os.O_RDONLY|noFollow|nonBlock, 0)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, "", err
		}
		if isSymlinkLoop(err) {
			return nil, "a symbolic link", nil
		}
		if errors.Is(err, fs.ErrPermission) {
			return nil, "unreadable: " + err.Error(), nil
		}
		return nil, "", err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, "", err
	}
	if !fi.Mode().IsRegular() {
		return nil, "not a regular file", nil
	}
	if uid, ok := fileOwner(fi); ok && uid != os.Geteuid() {
		return nil, fmt.Sprintf("owned by uid %d, not by this user (uid %d)", uid, os.Geteuid()), nil
	}
	// DESIGN.md rule 7: a record anyone else could have written proves
	// nothing. Read bits do no harm: a hand-written record made under the
	// usual umask (0644) is still judged by rule 5, not thrown aside.
	if perm := fi.Mode().Perm(); perm&0o022 != 0 {
		return nil, fmt.Sprintf("mode %04o lets group or others write it (want 0600)", perm), nil
	}
	data, err = io.ReadAll(io.LimitReader(f, maxRecordSize+1))
	if err != nil {
		return nil, "", err
	}
	if len(data) > maxRecordSize {
		return nil, "larger than 1 MiB", nil
	}
	return data, "", nil
}

// untrusted reports an untrusted record file and, for moveUntrusted, moves
// it aside.
func (d *StateDir) untrusted(name, path, reason string, act untrustedAction) error {
	if act == keepUntrusted {
		return &UntrustedRecordError{Name: name, Path: path, Reason: reason}
	}
	return d.moveAside(name, path, reason)
}

// moveAside renames an untrusted record to <name>.json.corrupt-<UTC time>,
// so that it is kept for a person to look at and never read again.
func (d *StateDir) moveAside(name, path, reason string) error {
	e := &UntrustedRecordError{Name: name, Path: path, Reason: reason}
	to := path + corruptInfix + time.Now().UTC().Format(corruptLayout)
	if err := os.Rename(path, to); err != nil {
		e.Reason += fmt.Sprintf(" (and moving it aside failed: %v)", err)
		return e
	}
	_ = syncDir(filepath.Dir(path))
	e.MovedTo = to
	return e
}

// Records reads every record in servers/, sorted by name. Records that could
// not be read are left out and reported in errs (*UntrustedRecordError for
// those moved aside).
//
// Like ReadRecord, it is for the holder of the state folder's lock only;
// everyone else calls InspectRecords.
func (d *StateDir) Records() (recs []Record, errs []error) {
	return d.records(moveUntrusted)
}

// InspectRecords is Records for a reader that does not hold the state
// folder's lock: it changes nothing. Untrusted records are reported as
// *UntrustedRecordError with an empty MovedTo and left where they are.
func (d *StateDir) InspectRecords() (recs []Record, errs []error) {
	return d.records(keepUntrusted)
}

func (d *StateDir) records(act untrustedAction) (recs []Record, errs []error) {
	entries, err := os.ReadDir(filepath.Join(d.Path, serversDir))
	if err != nil {
		if act == keepUntrusted && errors.Is(err, fs.ErrNotExist) {
			return nil, nil // InspectStateDir: no servers/ yet, no records
		}
		return nil, []error{fmt.Errorf("list records: %w", err)}
	}
	for _, e := range entries {
		fname := e.Name()
		if strings.HasPrefix(fname, ".") || !strings.HasSuffix(fname, recordExt) {
			continue
		}
		name := strings.TrimSuffix(fname, recordExt)
		if checkName(name) != nil {
			errs = append(errs, d.untrusted(name, filepath.Join(d.Path, serversDir, fname), "file name is not a server name", act))
			continue
		}
		r, err := d.readRecord(name, act)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue // removed since the listing
			}
			errs = append(errs, err)
			continue
		}
		recs = append(recs, r)
	}
	sort.Slice(recs, func(i, j int) bool { return recs[i].Name < recs[j].Name })
	return recs, errs
}

// RemoveRecord removes a server's record; a missing record is not an error.
func (d *StateDir) RemoveRecord(name string) error {
	if err := checkName(name); err != nil {
		return fmt.Errorf("remove record: %w", err)
	}
	if err := os.Remove(d.RecordPath(name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove record of server %s: %w", name, err)
	}
	return syncDir(filepath.Join(d.Path, serversDir))
}
