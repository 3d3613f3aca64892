package reconciler

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/procfleet/procfleet/actuate"
)

// recordScan lists the servers that have a record, for every resync. It
// reads (opens, trust-checks, parses, and moves aside when untrusted) only
// the record files that changed since it last read them whole and trusted:
// an idle fleet's resync costs one lstat per record instead of a read
// (BenchmarkResync1000: the reads were 90% of a resync's CPU). A file whose
// inode, change time, size and mode are those of its last trusted read has
// not been written, replaced, chmod-ed or chown-ed since (every one of those
// sets the change time, which no caller can set back), so its verdict
// stands. Where the kernel gives no such key every record is read, as
// before.
type recordScan struct {
	mu      sync.Mutex
	trusted map[string]fileKey // name -> key of its last trusted read
	// keep: names keeps each record it reads in kept, for take (a
	// standalone down, which reads each record again to stop it).
	keep bool
	kept map[string]keptRecord
	// seen is names' scratch, empty between scans.
	seen map[string]bool
}

// keptRecord is a record as names read it, with the key taken before.
type keptRecord struct {
	key fileKey
	rec actuate.Record
}

// fileKey identifies one content and one set of attributes of a file.
type fileKey struct {
	dev, ino   uint64
	ctimeNanos int64
	size       int64
	mode       uint32
}

// names appends to dst the names of the records in sd's servers folder,
// and returns the errors of the records that could not be read
// (*UntrustedRecordError for one moved aside), as Records reports them.
func (rs *recordScan) names(sd *actuate.StateDir, dst []string) (names []string, errs []error) {
	names = dst
	d, err := os.Open(filepath.Dir(sd.RecordPath("x")))
	if err != nil {
		return fullScan(sd, dst)
	}
	defer d.Close()
	fnames, err := d.Readdirnames(-1)
	if err != nil {
		return fullScan(sd, dst)
	}
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.seen == nil {
		rs.seen = make(map[string]bool, len(fnames))
	}
	seen := rs.seen // kept between scans: clear keeps its room
	defer clear(seen)
	for _, fname := range fnames {
		if strings.HasPrefix(fname, ".") || !strings.HasSuffix(fname, ".json") {
			continue
		}
		name := strings.TrimSuffix(fname, ".json")
		key, ok, err := statAt(d, fname)
		if errors.Is(err, fs.ErrNotExist) {
			continue // removed since the listing
		}
		if err == nil && ok && rs.trusted[name] == key {
			seen[name] = true
			names = append(names, name)
			continue
		}
		delete(rs.trusted, name)
		rec, err := sd.ReadRecord(name)
		if err != nil {
			var ue *actuate.UntrustedRecordError
			var ne *actuate.NewerRecordError
			var fe *actuate.ForeignRecordError
			switch {
			case errors.As(err, &fe):
				errs = append(errs, err) // moved aside: its server is told
			case errors.Is(err, fs.ErrNotExist):
			case errors.As(err, &ue), errors.As(err, &ne):
				errs = append(errs, err)
			default:
				// Not a server's name, or the folder failing: Records
				// deals with each (it moves a misnamed file aside).
				rs.trusted = nil
				return fullScan(sd, dst)
			}
			continue
		}
		seen[name] = true
		names = append(names, name)
		if err == nil && ok {
			// The key taken before the read: a change made since shows as
			// a new key, and the record is read again.
			if rs.trusted == nil {
				rs.trusted = map[string]fileKey{}
			}
			rs.trusted[name] = key
			if rs.keep {
				if rs.kept == nil {
					rs.kept = map[string]keptRecord{}
				}
				rs.kept[name] = keptRecord{key: key, rec: rec}
			}
		}
	}
	for name := range rs.trusted {
		if !seen[name] {
			delete(rs.trusted, name)
		}
	}
	return names, errs
}

// take returns, once, the record of name that names kept (keep), if its
// file still has the key it had before that read: the same content, owner
// and mode, so the same verdict, and a second read and parse is saved.
// false when none was kept or the file has changed: the caller reads it.
func (rs *recordScan) take(sd *actuate.StateDir, name string) (actuate.Record, bool) {
	rs.mu.Lock()
	k, found := rs.kept[name]
	delete(rs.kept, name)
	rs.mu.Unlock()
	if !found {
		return actuate.Record{}, false
	}
	key, ok, err := statPath(sd.RecordPath(name))
	if err != nil || !ok || key != k.key {
		return actuate.Record{}, false
	}
	return k.rec, true
}

// readRecord reads the record of server name, or takes the one a down's
// listing read when its file is unchanged since (recordScan.take).
func (r *Reconciler) readRecord(name string) (actuate.Record, error) {
	if sd, ok := r.records.(*actuate.StateDir); ok {
		if rec, ok := r.recScan.take(sd, name); ok {
			return rec, nil
		}
	}
	return r.records.ReadRecord(name)
}

// learn keys the record of name that up itself has just written (its own
// spawn, rewrite or refresh of it), so that the next scan does not read it
// back: after a cold start of 1,000 the first resync read every record,
// 73 cpu-ms and 5.8 MB of garbage at load 40 against 4 cpu-ms for a scan
// of known keys. The key is taken right after the write returned, in the
// goroutine that wrote it, on a folder only this user may write and only
// this up (the lock holder) writes records in; a change made after it
// shows as a new key (the change time cannot be set back), and is read at
// the next scan as before. A key that cannot be taken is forgotten: the
// record is read.
func (rs *recordScan) learn(sd *actuate.StateDir, name string) {
	key, ok, err := statPath(sd.RecordPath(name))
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if err != nil || !ok {
		delete(rs.trusted, name)
		return
	}
	if rs.trusted == nil {
		rs.trusted = map[string]fileKey{}
	}
	rs.trusted[name] = key
}

// ownRecordWritten keys the record of server name that this reconciler has
// just written (recordScan.learn), on a state folder.
func (r *Reconciler) ownRecordWritten(name string) {
	if sd, ok := r.records.(*actuate.StateDir); ok {
		r.recScan.learn(sd, name)
	}
}

// fullScan is Records, reduced to the names appended to dst.
func fullScan(sd *actuate.StateDir, dst []string) (names []string, errs []error) {
	names = dst
	recs, errs := sd.Records()
	for _, rec := range recs {
		names = append(names, rec.Name)
	}
	return names, errs
}
