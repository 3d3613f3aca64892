package actuate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// RecordVersion is the version of the record format written by this package.
// Version 2 added instance, stateDir, spawnCmdline and cgroup, and intent
// records; version 1 records (no token) are read as before.
const RecordVersion = 2

// maxRecordSize bounds what is read from a record file.
const maxRecordSize = 1 << 20

// Record is the ownership record of a server: what procfleet saw of the
// process right after it started it. The JSON is DESIGN.md's.
//
// An intent record (Intent) is written before the spawn: name, instance
// and state folder, no pid. The full record replaces it right after.
type Record struct {
	Version int    `json:"version"`
	Name    string `json:"name"`
	// PID is the server's process, the leader of its own session and
	// process group; 0 in an intent record.
	PID  int `json:"pid"`
	PGID int `json:"pgid"`
	// StartTime is the kernel's start time of the process (Linux: field 22 of
	// /proc/PID/stat, clock ticks since boot; macOS: microseconds since the
	// epoch). 0 (absent or null) means the record cannot prove ownership
	// (rule 5).
	StartTime uint64 `json:"startTime"`
	BootID    string `json:"bootId"`
	// UID is the uid the process runs as, as last seen: evidence, not
	// identity (a server may drop privileges).
	UID int `json:"uid"`
	// Cmdline is the process's command line as last seen (evidence, not
	// identity: a held process may exec or retitle itself).
	Cmdline []string `json:"cmdline"`
	// SpawnCmdline is the command line the process showed right after the
	// spawn; Cmdline moves on from it (v2).
	SpawnCmdline []string  `json:"spawnCmdline,omitempty"`
	Port         int       `json:"port"`
	SpecHash     string    `json:"specHash"`
	StartedAt    time.Time `json:"startedAt"`
	// PidfdInode is the pidfs inode of a pidfd for the process (Linux >= 6.9);
	// 0 when unknown.
	PidfdInode uint64 `json:"pidfdInode,omitempty"`
	// Instance is the server's instance token (v2): 128 random bits in 32
	// hex digits, put in its environment as PROCFLEET_INSTANCE at spawn.
	Instance string `json:"instance,omitempty"`
	// StateDir is the state folder the record was written in (v2): a
	// record read from another folder is foreign.
	StateDir *FolderID `json:"stateDir,omitempty"`
	// Cgroup is the server's cgroup v2 path (/.../procfleet-<folder
	// id>/<name>) when its membership is a cgroup (v2); "" otherwise.
	Cgroup string `json:"cgroup,omitempty"`
}

// Intent reports whether r is an intent record: written before a spawn,
// naming the instance token but no process yet (rule 8).
func (r Record) Intent() bool { return r.PID == 0 && r.Instance != "" }

// FolderID is a folder's device and inode: what tells the state folder
// from a copy of it.
type FolderID struct {
	Dev uint64 `json:"dev"`
	Ino uint64 `json:"ino"`
}

func (f FolderID) String() string { return fmt.Sprintf("device %d inode %d", f.Dev, f.Ino) }

// ParseRecord decodes and checks a record's bytes. It never panics; name is
// the name the file is stored under and must match the record's. A record
// whose pgid is not its pid is refused (rule 7: every server leads its own
// session and group, so such a record was edited); one without a pgid (a
// hand-written one) names no other group, and its pgid is read as its pid.
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
	case r.Instance != "" && !validToken(r.Instance):
		return Record{}, fmt.Errorf("invalid instance token %q (want 32 hex digits)", r.Instance)
	case r.Port < 0 || r.Port > 65535:
		return Record{}, fmt.Errorf("invalid port %d", r.Port)
	case r.Cgroup != "" && !validCgroupPath(r.Cgroup, r.Name):
		return Record{}, fmt.Errorf("invalid cgroup %q (want an absolute path ending in /procfleet-<folder id>/%s)", r.Cgroup, r.Name)
	case r.PID == 0 && r.Instance != "":
		// An intent record.
		if r.Version < 2 || r.PGID != 0 || r.StartTime != 0 {
			return Record{}, errors.New("an intent record (no pid) must be version 2 with no pgid and no start time")
		}
	case r.PID <= 0:
		return Record{}, fmt.Errorf("invalid pid %d", r.PID)
	case r.PGID != r.PID && r.PGID != 0:
		return Record{}, fmt.Errorf("pgid %d is not pid %d: every server leads its own process group", r.PGID, r.PID)
	}
	if r.PGID == 0 {
		r.PGID = r.PID // a hand-written record without one: it names no other group
	}
	return r, nil
}

// WriteRecord writes a server's record atomically: a temp file in servers/
// (mode 0600), write, fsync, rename over the record, fsync the folder. A
// reader sees the old record or the new one, never a part.
func (d *StateDir) WriteRecord(r Record) error {
	return d.writeRecord(r, true)
}

// writeIntent writes an intent record as WriteRecord does but for the
// fsync of the folder, which Spawn leaves to the full record written right
// after the exec: that fsync makes the folder durable with the last rename
// in it. The intent record is complete wherever it is seen (its data is
// synced before the rename), and every process sees it before the exec.
// Only a crash of the machine can lose the rename, and that crash ends the
// process the record would have named.
func (d *StateDir) writeIntent(r Record) error {
	return d.writeRecord(r, false)
}

func (d *StateDir) writeRecord(r Record, syncFolder bool) error {
	data, err := d.recordData(r)
	if err != nil {
		return err
	}
	if err := d.writeFileAtomic(r.Name+recordExt, data, syncFolder); err != nil {
		return fmt.Errorf("write record of server %s: %w", r.Name, err)
	}
	return nil
}

// recordData is r as a record file holds it.
func (d *StateDir) recordData(r Record) ([]byte, error) {
	if err := checkName(r.Name); err != nil {
		return nil, fmt.Errorf("write record: %w", err)
	}
	if r.Version == 0 {
		r.Version = RecordVersion
	}
	if r.StateDir == nil && r.Version >= 2 {
		if id, err := d.folderID(); err == nil {
			r.StateDir = &id
		}
	}
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("write record of server %s: %w", r.Name, err)
	}
	return append(data, '\n'), nil
}

// writeFileAtomic writes servers/name through a temp file, synced before
// it is renamed over servers/name; syncFolder then syncs servers/.
func (d *StateDir) writeFileAtomic(name string, data []byte, syncFolder bool) error {
	tmp, err := d.writeTemp(name, tempInfix, data)
	if err != nil {
		return err
	}
	if err := d.renameOver(tmp, name); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	if !syncFolder {
		return nil
	}
	return syncDir(filepath.Join(d.Path, serversDir))
}

// renameOver renames tmp over servers/name, keeping the inode it replaces
// as a spare.
func (d *StateDir) renameOver(tmp, name string) error {
	return d.renameOverPath(tmp, filepath.Join(d.Path, serversDir, name))
}

// renameOverPath is renameOver for any path of the state folder.
func (d *StateDir) renameOverPath(tmp, path string) error {
	spare := d.keepReplaced(path)
	err := os.Rename(tmp, path)
	d.replaced(spare, err == nil)
	return err
}

// writeTemp writes data to a temp file in servers/ for name (mode 0600),
// named "."+name+infix+random, and syncs it; nothing is left behind when
// it fails. The file is a spare when there is one (see spareDir).
func (d *StateDir) writeTemp(name, infix string, data []byte) (string, error) {
	return d.writeTempIn(filepath.Join(d.Path, serversDir), name, infix, data, true)
}

// writeTempIn is writeTemp in the folder dir of the state folder; sync
// false leaves the data unsynced.
func (d *StateDir) writeTempIn(dir, name, infix string, data []byte, sync bool) (string, error) {
	tmp := filepath.Join(dir, "."+name+infix+strconv.FormatUint(rand.Uint64(), 36))
	if ok, err := d.writeSpare(tmp, data, sync); ok || err != nil {
		if err != nil {
			return "", err
		}
		return tmp, nil
	}
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL|noFollow, recordMode)
	if err != nil {
		return "", err
	}
	if err := writeSynced(f, tmp, data, sync); err != nil {
		return "", err
	}
	return tmp, nil
}

// WriteFile replaces the file at path, in a folder of the state folder,
// with data (mode 0600): a temp file beside it, a spare when there is one,
// renamed over it, so a reader sees the old file or the new one. durable
// syncs the data before the rename and the folder after it.
func (d *StateDir) WriteFile(path string, data []byte, durable bool) error {
	dir, name := filepath.Split(path)
	tmp, err := d.writeTempIn(dir, name, tempInfix, data, durable)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := d.renameOverPath(tmp, path); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, err)
	}
	if durable {
		if err := syncDir(dir); err != nil {
			return fmt.Errorf("write %s: sync folder: %w", path, err)
		}
	}
	return nil
}

// RemoveFile removes the file at path, in a folder of the state folder,
// keeping it as a spare; a missing file is not an error.
func (d *StateDir) RemoveFile(path string) error {
	if err := d.retire(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove %s: %w", path, err)
	}
	return nil
}

// stagedIntent is an intent record whose temp file is being written and
// synced in the background while Spawn checks the port, opens the log and
// makes the cgroup (stageIntent); commit renames it into place as
// writeIntent would, discard removes it.
type stagedIntent struct {
	d           *StateDir
	name, infix string
	data        []byte
	done        chan struct{} // closed once tmp and err are set
	tmp         string
	err         error
}

// stageIntent starts writing the intent record r (see writeIntent).
func (d *StateDir) stageIntent(r Record) *stagedIntent {
	s := d.newStaged(r, tempInfix)
	go s.write()
	return s
}

// newStaged is an intent record r to be written (write) to a temp file
// named with infix.
func (d *StateDir) newStaged(r Record, infix string) *stagedIntent {
	s := &stagedIntent{d: d, name: r.Name + recordExt, infix: infix, done: make(chan struct{})}
	s.data, s.err = d.recordData(r)
	return s
}

// write writes and syncs the temp file; it is called once.
func (s *stagedIntent) write() {
	defer close(s.done)
	if s.err == nil {
		s.tmp, s.err = s.d.writeTemp(s.name, s.infix, s.data)
	}
}

// errNotWritten is the error of a staged intent cancelled before its write.
var errNotWritten = errors.New("intent record not written")

// cancel ends a staged intent whose write never started.
func (s *stagedIntent) cancel() {
	s.err = errNotWritten
	close(s.done)
}

// commit waits for the temp file and renames it over the record.
func (s *stagedIntent) commit() error {
	<-s.done
	if s.err != nil {
		return fmt.Errorf("write record of server %s: %w", strings.TrimSuffix(s.name, recordExt), s.err)
	}
	if err := s.d.renameOver(s.tmp, s.name); err != nil {
		_ = os.Remove(s.tmp)
		return fmt.Errorf("write record of server %s: %w", strings.TrimSuffix(s.name, recordExt), err)
	}
	return nil
}

// discard waits for the temp file and removes it.
func (s *stagedIntent) discard() {
	<-s.done
	if s.err == nil {
		_ = s.d.retire(s.tmp)
	}
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
			if ferr := d.checkFolder(r, path, act); ferr != nil {
				return Record{}, ferr
			}
			if r.Cgroup != "" && !d.ownCgroup(r) {
				return Record{}, d.untrusted(name, path, fmt.Sprintf("names cgroup %s, which procfleet does not make for server %s of this state folder", r.Cgroup, name), act)
			}
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

// checkFolder reports a record written in another state folder (a copied
// project) as *ForeignRecordError and, for the lock holder, moves it aside
// to <name>.json.foreign-<time>. A record that names no folder (version 1)
// is not foreign.
func (d *StateDir) checkFolder(r Record, path string, act untrustedAction) error {
	if r.StateDir == nil {
		return nil
	}
	own, err := d.folderID()
	if err != nil {
		return fmt.Errorf("read record of server %s: %w", r.Name, err)
	}
	if *r.StateDir == own {
		return nil
	}
	e := &ForeignRecordError{Name: r.Name, Path: path, Folder: *r.StateDir, Here: own}
	if act == keepUntrusted {
		return e
	}
	to := path + foreignInfix + time.Now().UTC().Format(corruptLayout)
	if err := os.Rename(path, to); err != nil {
		e.MoveErr = err
		return e
	}
	asideChanges.Add(1)
	_ = syncDir(filepath.Dir(path))
	e.MovedTo = to
	return e
}

// processEUID is procfleet's effective uid, read once: procfleet never
// changes its own uid.
var processEUID = sync.OnceValue(os.Geteuid)

// recordStat is what readTrusted checks of an opened record file.
type recordStat struct {
	regular bool
	uid     int
	hasUID  bool // uid is known (Unix)
	perm    fs.FileMode
	size    int64
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
	f, st, err := openRecordFile(path)
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
	if !st.regular {
		return nil, "not a regular file", nil
	}
	if euid := processEUID(); st.hasUID && st.uid != euid {
		return nil, fmt.Sprintf("owned by uid %d, not by this user (uid %d)", st.uid, euid), nil
	}
	// DESIGN.md rule 7: a record anyone else could have written proves
	// nothing. Read bits do no harm: a hand-written record made under the
	// usual umask (0644) is still judged by rule 5, not thrown aside.
	if perm := st.perm; perm&0o022 != 0 {
		return nil, fmt.Sprintf("mode %04o lets group or others write it (want 0600)", perm), nil
	}
	data, err = readSized(f, st.size, maxRecordSize+1)
	if err != nil {
		return nil, "", err
	}
	if len(data) > maxRecordSize {
		return nil, "larger than 1 MiB", nil
	}
	return data, "", nil
}

// readSized reads f to its end, at most limit bytes, into a buffer of
// the size its fstat gave (size) and one more byte: a file that has not
// grown since takes two reads, its content and its end, where io.ReadAll's
// 512-byte start took three for a record.
func readSized(f io.Reader, size, limit int64) ([]byte, error) {
	buf := make([]byte, 0, min(max(size, 0), limit)+1)
	r := io.LimitReader(f, limit)
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return nil, err
		}
	}
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
	asideChanges.Add(1)
	_ = syncDir(filepath.Dir(path))
	e.MovedTo = to
	return e
}

// asideChanges counts the records this process moved aside or resolved.
var asideChanges atomic.Uint64

// AsideChanges returns how many times this process has moved a record
// aside or resolved one (renamed .resolved-<time>) so far, in any state
// folder. While it holds a folder's lock no other process does either, so
// a list of its quarantines (UntrustedQuarantines) taken when it returned
// n is still whole while it returns n.
func AsideChanges() uint64 { return asideChanges.Load() }

// Records reads every record in servers/, sorted by name. Records that could
// not be read are left out and reported in errs (*UntrustedRecordError for
// those moved aside). A foreign record (written in another state folder) is
// moved aside and left out of both, as if there were no record; ReadAll
// reports it.
//
// Like ReadRecord, it is for the holder of the state folder's lock only;
// everyone else calls InspectRecords.
func (d *StateDir) Records() (recs []Record, errs []error) {
	rs := d.records(moveUntrusted)
	return rs.Records, rs.Errs
}

// InspectRecords is Records for a reader that does not hold the state
// folder's lock: it changes nothing. Untrusted records are reported as
// *UntrustedRecordError with an empty MovedTo and left where they are;
// foreign ones are left where they are and out of both lists.
func (d *StateDir) InspectRecords() (recs []Record, errs []error) {
	rs := d.records(keepUntrusted)
	return rs.Records, rs.Errs
}

// RecordSet is what ReadAll and InspectAll find in servers/.
type RecordSet struct {
	// Records are the trusted records, sorted by name (intent records
	// included).
	Records []Record
	// Foreign are records written in another state folder: they count as
	// no record and quarantine nothing; the caller says so.
	Foreign []*ForeignRecordError
	// Errs are the records that could not be read (*UntrustedRecordError,
	// *NewerRecordError, or an error listing the folder).
	Errs []error
}

// ReadAll is Records with the foreign records reported: for the lock
// holder, which moves untrusted and foreign records aside.
func (d *StateDir) ReadAll() RecordSet { return d.records(moveUntrusted) }

// InspectAll is ReadAll for a reader without the lock: it changes nothing.
func (d *StateDir) InspectAll() RecordSet { return d.records(keepUntrusted) }

func (d *StateDir) records(act untrustedAction) RecordSet {
	var rs RecordSet
	entries, err := os.ReadDir(filepath.Join(d.Path, serversDir))
	if err != nil {
		if act == keepUntrusted && errors.Is(err, fs.ErrNotExist) {
			return rs // InspectStateDir: no servers/ yet, no records
		}
		rs.Errs = []error{fmt.Errorf("list records: %w", err)}
		return rs
	}
	for _, e := range entries {
		fname := e.Name()
		if strings.HasPrefix(fname, ".") || !strings.HasSuffix(fname, recordExt) {
			continue
		}
		name := strings.TrimSuffix(fname, recordExt)
		if checkName(name) != nil {
			rs.Errs = append(rs.Errs, d.untrusted(name, filepath.Join(d.Path, serversDir, fname), "file name is not a server name", act))
			continue
		}
		r, err := d.readRecord(name, act)
		var fe *ForeignRecordError
		switch {
		case errors.As(err, &fe):
			rs.Foreign = append(rs.Foreign, fe)
		case errors.Is(err, fs.ErrNotExist):
			// removed since the listing
		case err != nil:
			rs.Errs = append(rs.Errs, err)
		default:
			rs.Records = append(rs.Records, r)
		}
	}
	sort.Slice(rs.Records, func(i, j int) bool { return rs.Records[i].Name < rs.Records[j].Name })
	return rs
}

// RemoveRecord removes a server's record, keeping its file as a spare; a
// missing record is not an error.
// The removal is not synced to disk: a record that a crash of the machine
// brings back names a process of an earlier boot, which Verify finds stale
// or reused (another boot id) and removes without a signal, and an intent
// record's token is carried by no process after a reboot (ResolveIntent).
func (d *StateDir) RemoveRecord(name string) error {
	if err := checkName(name); err != nil {
		return fmt.Errorf("remove record: %w", err)
	}
	if err := d.retire(d.RecordPath(name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove record of server %s: %w", name, err)
	}
	return nil
}
