package actuate

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// serversSnapshot describes every entry of servers/ as Lstat and the bytes
// (or link target) show it: name, type and mode, owner, content.
func serversSnapshot(t *testing.T, d *StateDir) []string {
	t.Helper()
	dir := filepath.Join(d.Path, serversDir)
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		fi, err := os.Lstat(p)
		if err != nil {
			t.Fatal(err)
		}
		uid, _ := fileOwner(fi)
		content := "" // a FIFO is not read: that would block
		if fi.Mode().IsRegular() || fi.Mode()&fs.ModeSymlink != 0 {
			content = readLink(t, p)
		}
		out = append(out, fmt.Sprintf("%s %v uid=%d %q", e.Name(), fi.Mode(), uid, content))
	}
	sort.Strings(out)
	return out
}

// unblockAfter bounds the reads of a record that could block (a FIFO): if
// they still run after d, it reports the hang and from then on keeps
// opening path for writing, which releases each open for reading waiting
// on the FIFO, until the returned function ends the guard.
func unblockAfter(t *testing.T, path string, d time.Duration) (stop func()) {
	done := make(chan struct{})
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		select {
		case <-done:
			return
		case <-time.After(d):
		}
		t.Errorf("reading %s still blocks after %s", path, d)
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			if f, err := os.OpenFile(path, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
				_ = f.Close()
			}
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()
	return func() { close(done); <-exited }
}

// TestInspectRecordsLeaveUntrustedInPlace: for every kind of untrusted
// record (rule 7), InspectRecord and InspectRecords report the same
// *UntrustedRecordError as ReadRecord and Records, with an empty MovedTo,
// and leave servers/ exactly as it was (names, modes, owners, bytes); the
// lock holder's Records still moves the file aside afterwards.
func TestInspectRecordsLeaveUntrustedInPlace(t *testing.T) {
	valid := `{"version":1,"name":"api","pid":10,"pgid":10,"startTime":5,"bootId":"b","cmdline":["a"]}`
	tests := []struct {
		name    string
		file    string // record file name in servers/; "api.json" when empty
		data    string
		prepare func(t *testing.T, path string)
		reason  string
	}{
		{name: "bad json", data: "not json {", reason: "parse"},
		{name: "other name", data: strings.Replace(valid, `"api"`, `"web"`, 1), reason: `names server "web"`},
		{name: "mode 0666", data: valid, prepare: func(t *testing.T, p string) { chmod(t, p, 0o666) }, reason: "mode 0666"},
		{name: "other uid", data: valid, prepare: giveToNobody, reason: "owned by uid 65534"},
		{name: "symlink", prepare: symlinkTo(valid), reason: "symbolic link"},
		{name: "file name not a server name", file: "API.json", data: valid, reason: "not a server name"},
		{name: "fifo", prepare: func(t *testing.T, p string) {
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
			if err := syscall.Mkfifo(p, 0o600); err != nil {
				t.Fatal(err)
			}
		}, reason: "not a regular file"},
		{name: "directory", prepare: func(t *testing.T, p string) {
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
			if err := os.Mkdir(p, 0o700); err != nil {
				t.Fatal(err)
			}
		}, reason: "not a regular file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := newStateDir(t)
			good := Record{Name: "good", PID: 5, PGID: 5, StartTime: 1, BootID: "b", Cmdline: []string{"g"}}
			if err := d.WriteRecord(good); err != nil {
				t.Fatal(err)
			}
			file := tt.file
			if file == "" {
				file = "api.json"
			}
			recName := strings.TrimSuffix(file, recordExt)
			path := filepath.Join(d.Path, serversDir, file)
			if err := os.WriteFile(path, []byte(tt.data), 0o600); err != nil {
				t.Fatal(err)
			}
			if tt.prepare != nil {
				tt.prepare(t, path)
			}
			before := serversSnapshot(t, d)
			defer unblockAfter(t, path, 30*time.Second)()

			checkUntrusted := func(what string, err error) {
				t.Helper()
				var ue *UntrustedRecordError
				if !errors.As(err, &ue) {
					t.Fatalf("%s error = %v, want *UntrustedRecordError", what, err)
				}
				if ue.Name != recName || ue.Path != path || ue.MovedTo != "" || !strings.Contains(ue.Reason, tt.reason) {
					t.Errorf("%s = %+v; want name %q, path %s, no MovedTo, a reason with %q", what, ue, recName, path, tt.reason)
				}
				if msg := ue.Error(); !strings.Contains(msg, path) || !strings.Contains(msg, ue.Reason) || strings.Contains(msg, "moved") {
					t.Errorf("%s message %q: want the path and the reason, and no word of a move", what, msg)
				}
			}
			if checkName(recName) == nil {
				_, err := d.InspectRecord(recName)
				checkUntrusted("InspectRecord", err)
			}
			recs, errs := d.InspectRecords()
			if len(recs) != 1 || recs[0].Name != "good" {
				t.Errorf("InspectRecords() records = %+v, want [good]", recs)
			}
			if len(errs) != 1 {
				t.Fatalf("InspectRecords() errors = %v, want one", errs)
			}
			checkUntrusted("InspectRecords", errs[0])
			if after := serversSnapshot(t, d); !cmp.Equal(before, after) {
				t.Errorf("servers/ changed by inspecting (-before +after):\n%s", cmp.Diff(before, after))
			}

			// The lock holder's reader still moves it aside, with the same
			// reason.
			recs, errs = d.Records()
			var ue *UntrustedRecordError
			if len(recs) != 1 || len(errs) != 1 || !errors.As(errs[0], &ue) {
				t.Fatalf("Records() = %+v, %v; want [good] and one *UntrustedRecordError", recs, errs)
			}
			if !strings.HasPrefix(ue.MovedTo, path+corruptInfix) || !strings.Contains(ue.Reason, tt.reason) {
				t.Errorf("Records() error %+v: want it moved to %s%s<time> for %q", ue, path, corruptInfix, tt.reason)
			}
			if _, err := os.Lstat(path); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("Records() left the untrusted record at %s (%v)", path, err)
			}
			if recs, errs := d.InspectRecords(); len(recs) != 1 || len(errs) != 0 {
				t.Errorf("InspectRecords() after the move = %+v, %v; want [good] alone", recs, errs)
			}
		})
	}
}

// TestInspectRecordAsReadRecord: for a trusted record, a newer version and
// a missing file, InspectRecord answers what ReadRecord answers, and
// neither changes the folder.
func TestInspectRecordAsReadRecord(t *testing.T) {
	d := newStateDir(t)
	good := Record{Version: RecordVersion, Name: "good", PID: 5, PGID: 5, StartTime: 1, BootID: "b", Cmdline: []string{"g"},
		StartedAt: time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)}
	if err := d.WriteRecord(good); err != nil {
		t.Fatal(err)
	}
	fid, _ := d.folderID()
	good.StateDir = &fid // WriteRecord stamps the folder on a version 2 record
	newer := `{"version":3,"name":"next","pid":10}`
	if err := os.WriteFile(d.RecordPath("next"), []byte(newer), 0o600); err != nil {
		t.Fatal(err)
	}
	before := serversSnapshot(t, d)

	for _, name := range []string{"good", "next", "missing"} {
		wantRec, wantErr := d.ReadRecord(name)
		gotRec, gotErr := d.InspectRecord(name)
		if !cmp.Equal(wantRec, gotRec) || fmt.Sprint(wantErr) != fmt.Sprint(gotErr) {
			t.Errorf("InspectRecord(%s) = %+v, %v; ReadRecord gives %+v, %v", name, gotRec, gotErr, wantRec, wantErr)
		}
		var ue *UntrustedRecordError
		if errors.As(gotErr, &ue) {
			t.Errorf("InspectRecord(%s) = %v, not an untrusted record", name, gotErr)
		}
	}
	if got, err := d.InspectRecord("good"); err != nil || !cmp.Equal(got, good) {
		t.Errorf("InspectRecord(good) = %+v, %v; want %+v", got, err, good)
	}
	if _, err := d.InspectRecord("next"); err == nil || !strings.Contains(err.Error(), "record version 3") {
		t.Errorf("InspectRecord(next) = %v, want the newer version's error", err)
	}
	if _, err := d.InspectRecord("missing"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("InspectRecord(missing) = %v, want fs.ErrNotExist", err)
	}
	if _, err := d.InspectRecord("../x"); err == nil || !strings.Contains(err.Error(), "invalid server name") {
		t.Errorf("InspectRecord(../x) = %v, want an invalid name error", err)
	}

	wantRecs, wantErrs := d.Records()
	gotRecs, gotErrs := d.InspectRecords()
	if !cmp.Equal(wantRecs, gotRecs) || fmt.Sprint(wantErrs) != fmt.Sprint(gotErrs) {
		t.Errorf("InspectRecords() = %+v, %v; Records() gives %+v, %v", gotRecs, gotErrs, wantRecs, wantErrs)
	}
	if len(gotRecs) != 1 || len(gotErrs) != 1 || !strings.Contains(gotErrs[0].Error(), "record version 3") {
		t.Errorf("InspectRecords() = %+v, %v; want [good] and the newer version's error", gotRecs, gotErrs)
	}
	if after := serversSnapshot(t, d); !cmp.Equal(before, after) {
		t.Errorf("servers/ changed (-before +after):\n%s", cmp.Diff(before, after))
	}
}
