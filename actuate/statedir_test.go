package actuate

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func newStateDir(t *testing.T) *StateDir {
	t.Helper()
	d, err := OpenStateDir(filepath.Join(t.TempDir(), ".procfleet"))
	if err != nil {
		t.Fatalf("OpenStateDir: %v", err)
	}
	t.Cleanup(func() {
		removeTestCgroups(t, d)
		_ = d.Close()
	})
	return d
}

func TestOpenStateDirCreatesLayout(t *testing.T) {
	d := newStateDir(t)
	for _, p := range []string{d.Path, filepath.Join(d.Path, "servers"), filepath.Join(d.Path, "servers", ".spare"), filepath.Join(d.Path, "logs")} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if !fi.IsDir() || fi.Mode().Perm() != 0o700 {
			t.Errorf("%s: mode %v, want a folder with 0700", p, fi.Mode())
		}
	}
	gi, err := os.ReadFile(filepath.Join(d.Path, ".gitignore"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(string(gi)) != "*" {
		t.Errorf(".gitignore = %q, want \"*\"", gi)
	}
	// Opening again is fine and keeps what is there.
	if d2, err := OpenStateDir(d.Path); err != nil {
		t.Errorf("second OpenStateDir: %v", err)
	} else {
		_ = d2.Close()
	}
	if got, want := d.LogPath("api"), filepath.Join(d.Path, "logs", "api.log"); got != want {
		t.Errorf("LogPath = %s, want %s", got, want)
	}
	if got, want := d.SocketPath(), filepath.Join(d.Path, "procfleet.sock"); got != want {
		t.Errorf("SocketPath = %s, want %s", got, want)
	}
	if got, want := d.StatusPath(), filepath.Join(d.Path, "status.json"); got != want {
		t.Errorf("StatusPath = %s, want %s", got, want)
	}
}

func TestOpenStateDirRefusesUntrustedFolder(t *testing.T) {
	tests := []struct {
		name    string
		prepare func(t *testing.T, dir string)
		want    []string // substrings of the error
	}{
		{"group writable", func(t *testing.T, dir string) { chmod(t, dir, 0o770) }, []string{"0770", "group or others"}},
		{"other writable", func(t *testing.T, dir string) { chmod(t, dir, 0o707) }, []string{"0707", "group or others"}},
		{"servers group writable", func(t *testing.T, dir string) {
			if err := os.Mkdir(filepath.Join(dir, "servers"), 0o700); err != nil {
				t.Fatal(err)
			}
			chmod(t, filepath.Join(dir, "servers"), 0o775)
		}, []string{"servers", "0775"}},
		{"other owner", func(t *testing.T, dir string) {
			if os.Geteuid() != 0 {
				t.Skip("needs root to give the folder to another user")
			}
			if err := os.Chown(dir, 65534, 65534); err != nil {
				t.Fatal(err)
			}
		}, []string{"owned by uid 65534"}},
		{"not a folder", func(t *testing.T, dir string) {
			if err := os.Remove(dir); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(dir, nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}, []string{"not a"}},
	}
	openers := []struct {
		name string
		open func(string) (*StateDir, error)
	}{{"OpenStateDir", OpenStateDir}, {"InspectStateDir", InspectStateDir}}
	for _, op := range openers {
		for _, tt := range tests {
			t.Run(op.name+"/"+tt.name, func(t *testing.T) {
				dir := filepath.Join(t.TempDir(), "state")
				if err := os.Mkdir(dir, 0o700); err != nil {
					t.Fatal(err)
				}
				tt.prepare(t, dir)
				_, err := op.open(dir)
				if err == nil {
					t.Fatalf("%s succeeded, want a refusal", op.name)
				}
				for _, w := range append(tt.want, dir) {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not mention %q", err, w)
					}
				}
			})
		}
	}
}

// TestInspectStateDirChangesNothing: the readers that do not hold the lock
// (status, describe, diff) open the folder with InspectStateDir, which
// creates no subfolder or .gitignore and sweeps no temp file, however old
// (its writer's lock holder sweeps it).
func TestInspectStateDirChangesNothing(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	d, err := InspectStateDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	recs, errs := d.InspectRecords()
	if len(recs) != 0 || len(errs) != 0 {
		t.Errorf("InspectRecords of a folder without servers/ = %v, %v; want nothing", recs, errs)
	}
	if entries, err := os.ReadDir(dir); err != nil || len(entries) != 0 {
		t.Errorf("InspectStateDir changed the folder: entries %v, err %v", entries, err)
	}

	if err := os.Mkdir(filepath.Join(dir, "servers"), 0o700); err != nil {
		t.Fatal(err)
	}
	old := filepath.Join(dir, "servers", ".api.json.tmp-123")
	if err := os.WriteFile(old, []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	past := time.Now().Add(-time.Hour)
	if err := os.Chtimes(old, past, past); err != nil {
		t.Fatal(err)
	}
	if d2, err := InspectStateDir(dir); err != nil {
		t.Fatal(err)
	} else {
		_ = d2.Close()
	}
	if _, err := os.Stat(old); err != nil {
		t.Errorf("InspectStateDir removed a temp file: %v", err)
	}
	for _, name := range []string{"logs", ".gitignore"} {
		if _, err := os.Lstat(filepath.Join(dir, name)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("InspectStateDir created %s (err %v)", name, err)
		}
	}
}

func chmod(t *testing.T, path string, mode os.FileMode) {
	t.Helper()
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}

// giveToNobody gives the file at p to uid 65534; it skips the test when
// not run as root, who alone can.
func giveToNobody(t *testing.T, p string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to give the record to another user")
	}
	if err := os.Chown(p, 65534, 65534); err != nil {
		t.Fatal(err)
	}
}

// symlinkTo returns a prepare step that replaces the file at p with a
// symbolic link to a file elsewhere holding data.
func symlinkTo(data string) func(t *testing.T, p string) {
	return func(t *testing.T, p string) {
		t.Helper()
		target := filepath.Join(t.TempDir(), "target.json")
		if err := os.WriteFile(target, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, p); err != nil {
			t.Fatal(err)
		}
	}
}

func TestLockSweepsStaleTemps(t *testing.T) {
	d := newStateDir(t)
	old := filepath.Join(d.Path, "servers", ".api.json.tmp-123")
	young := filepath.Join(d.Path, "servers", ".web.json.tmp-456")
	for _, p := range []string{old, young} {
		if err := os.WriteFile(p, []byte("{"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	past := time.Now().Add(-time.Hour)
	if err := os.Chtimes(old, past, past); err != nil {
		t.Fatal(err)
	}
	d2, err := OpenStateDir(d.Path)
	if err != nil {
		t.Fatal(err)
	}
	defer d2.Close()
	if _, err := os.Stat(old); err != nil {
		t.Fatalf("OpenStateDir removed a temp file without the lock: %v", err)
	}
	release, err := d2.Lock()
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	if _, err := os.Stat(old); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("stale temp file still there: %v", err)
	}
	if _, err := os.Stat(young); err != nil {
		t.Errorf("young temp file (a writer may still use it) was removed: %v", err)
	}
}

func TestLockContention(t *testing.T) {
	d := newStateDir(t)
	release, err := d.Lock()
	if err != nil {
		t.Fatalf("first Lock: %v", err)
	}
	// A second open of the lock file is a separate open file description,
	// so flock conflicts as it would with another process.
	d2, err := OpenStateDir(d.Path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d2.Close() })
	_, err = d2.Lock()
	var le *LockedError
	if !errors.As(err, &le) {
		t.Fatalf("second Lock error = %v, want *LockedError", err)
	}
	if le.PID != os.Getpid() {
		t.Errorf("LockedError.PID = %d, want the holder %d", le.PID, os.Getpid())
	}
	if !strings.Contains(err.Error(), "locked by pid") {
		t.Errorf("error %q does not name the holder", err)
	}
	if err := release(); err != nil {
		t.Fatalf("release: %v", err)
	}
	if err := release(); err != nil {
		t.Errorf("second release: %v", err)
	}
	release2, err := d2.Lock()
	if err != nil {
		t.Fatalf("Lock after release: %v", err)
	}
	t.Cleanup(func() { _ = release2() })
}

func TestRecordRoundTrip(t *testing.T) {
	d := newStateDir(t)
	want := Record{
		Version: 1, Name: "api", PID: 1234, PGID: 1234, StartTime: 987654, BootID: "0f1e2d",
		UID: os.Geteuid(), Cmdline: []string{"./bin/api", "--port", "8080"}, Port: 8080,
		SpecHash: "sha256:abc", StartedAt: time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC), PidfdInode: 4242,
	}
	if err := d.WriteRecord(want); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(d.RecordPath("api"))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("record mode %v, want 0600", fi.Mode().Perm())
	}
	got, err := d.ReadRecord("api")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ReadRecord mismatch (-want +got):\n%s", diff)
	}
	// Overwrite: still one record, no temp files left, the replaced
	// file kept as the one spare.
	want.PID, want.PGID = 99, 99
	if err := d.WriteRecord(want); err != nil {
		t.Fatal(err)
	}
	if got := dirNames(t, filepath.Join(d.Path, "servers")); !slices.Equal(got, []string{".spare", "api.json"}) {
		t.Errorf("servers/ holds %v, want [.spare api.json]", got)
	}
	if got := dirNames(t, d.spareDirPath()); len(got) != 1 {
		t.Errorf("servers/.spare holds %v, want one spare", got)
	}
	recs, errs := d.Records()
	if len(errs) != 0 || len(recs) != 1 || recs[0].PID != 99 {
		t.Errorf("Records() = %v, %v; want the one record with pid 99", recs, errs)
	}
	if err := d.RemoveRecord("api"); err != nil {
		t.Fatal(err)
	}
	if err := d.RemoveRecord("api"); err != nil {
		t.Errorf("removing a missing record: %v", err)
	}
	if _, err := d.ReadRecord("api"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("ReadRecord after remove = %v, want fs.ErrNotExist", err)
	}
}

func TestRecordJSONFieldNames(t *testing.T) {
	d := newStateDir(t)
	r := Record{Name: "api", PID: 1, PGID: 1, StartTime: 5, BootID: "b", Cmdline: []string{"x"}}
	if err := d.WriteRecord(r); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(d.RecordPath("api"))
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{`"version": 2`, `"stateDir": {`, `"dev":`, `"ino":`, `"name"`, `"pid"`, `"pgid"`, `"startTime"`, `"bootId"`, `"uid"`, `"cmdline"`, `"port"`, `"specHash"`, `"startedAt"`} {
		if !strings.Contains(string(b), key) {
			t.Errorf("record JSON lacks %s:\n%s", key, b)
		}
	}
	for _, key := range []string{"pidfdInode", "instance", "spawnCmdline", "cgroup"} {
		if strings.Contains(string(b), key) {
			t.Errorf("%s should be omitted when empty:\n%s", key, b)
		}
	}
	r.Instance, r.Cgroup, r.SpawnCmdline = "0123456789abcdef0123456789abcdef", "/procfleet-"+d.ID()+"/api", []string{"y"}
	if err := d.WriteRecord(r); err != nil {
		t.Fatal(err)
	}
	b, _ = os.ReadFile(d.RecordPath("api"))
	for _, key := range []string{`"instance": "0123456789abcdef0123456789abcdef"`, `"cgroup": "/procfleet-`, `"spawnCmdline": [`} {
		if !strings.Contains(string(b), key) {
			t.Errorf("record JSON lacks %s:\n%s", key, b)
		}
	}
}

func TestParseRecordWithoutStartTime(t *testing.T) {
	for _, data := range []string{
		`{"version":1,"name":"api","pid":10,"pgid":10,"cmdline":["a"]}`,
		`{"version":1,"name":"api","pid":10,"pgid":10,"startTime":null,"cmdline":["a"]}`,
		`{"name":"api","pid":10}`,
	} {
		r, err := ParseRecord("api", []byte(data))
		if err != nil {
			t.Errorf("ParseRecord(%s): %v", data, err)
			continue
		}
		if r.StartTime != 0 {
			t.Errorf("ParseRecord(%s).StartTime = %d, want 0", data, r.StartTime)
		}
	}
}

func TestReadRecordUntrusted(t *testing.T) {
	valid := `{"version":1,"name":"api","pid":10,"pgid":10,"startTime":5,"bootId":"b","cmdline":["a"]}`
	tests := []struct {
		name    string
		data    string
		prepare func(t *testing.T, path string)
		reason  string
	}{
		{name: "garbage", data: "not json {", reason: "parse"},
		{name: "truncated", data: valid[:30], reason: "parse"},
		{name: "trailing data", data: valid + "{}", reason: "trailing"},
		{name: "bare pid", data: "1234", reason: "parse"},
		{name: "other name", data: strings.Replace(valid, `"api"`, `"web"`, 1), reason: `names server "web"`},
		{name: "zero pid", data: strings.Replace(valid, `"pid":10`, `"pid":0`, 1), reason: "invalid pid"},
		{name: "mode 0666", data: valid, prepare: func(t *testing.T, p string) { chmod(t, p, 0o666) }, reason: "mode 0666"},
		{name: "mode 0646", data: valid, prepare: func(t *testing.T, p string) { chmod(t, p, 0o646) }, reason: "mode 0646"},
		{name: "group writable", data: valid, prepare: func(t *testing.T, p string) { chmod(t, p, 0o620) }, reason: "mode 0620"},
		{name: "other uid", data: valid, prepare: giveToNobody, reason: "owned by uid 65534"},
		{name: "symlink", data: "", prepare: symlinkTo(valid), reason: "symbolic link"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := newStateDir(t)
			path := d.RecordPath("api")
			if err := os.WriteFile(path, []byte(tt.data), 0o600); err != nil {
				t.Fatal(err)
			}
			if tt.prepare != nil {
				tt.prepare(t, path)
			}
			before := readLink(t, path)
			_, err := d.ReadRecord("api")
			var ue *UntrustedRecordError
			if !errors.As(err, &ue) {
				t.Fatalf("ReadRecord error = %v, want *UntrustedRecordError", err)
			}
			if !strings.Contains(ue.Reason, tt.reason) {
				t.Errorf("Reason %q does not mention %q", ue.Reason, tt.reason)
			}
			if _, err := os.Lstat(path); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("untrusted record still at %s", path)
			}
			if !strings.HasPrefix(ue.MovedTo, path+".corrupt-") {
				t.Fatalf("MovedTo = %q, want %s.corrupt-<time>", ue.MovedTo, path)
			}
			if after := readLink(t, ue.MovedTo); after != before {
				t.Errorf("moved-aside content %q, want the original %q", after, before)
			}
			// Not listed again.
			recs, errs := d.Records()
			if len(recs) != 0 || len(errs) != 0 {
				t.Errorf("Records() after moving aside = %v, %v; want nothing", recs, errs)
			}
		})
	}
}

// TestReadRecordReadableByOthersTrusted: read bits for group and others do not
// make a record untrusted (DESIGN.md rule 7 names other owners and write
// access), so a hand-written 0644 record reaches rule 5 instead of being
// moved aside.
func TestReadRecordReadableByOthersTrusted(t *testing.T) {
	for _, mode := range []os.FileMode{0o644, 0o640, 0o604} {
		d := newStateDir(t)
		path := d.RecordPath("api")
		data := `{"version":1,"name":"api","pid":10,"pgid":10,"cmdline":["a"]}`
		if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		chmod(t, path, mode)
		rec, err := d.ReadRecord("api")
		if err != nil {
			t.Fatalf("mode %04o: ReadRecord = %v, want the record", mode, err)
		}
		if rec.PID != 10 || rec.StartTime != 0 {
			t.Errorf("mode %04o: got %+v", mode, rec)
		}
		if _, err := os.Stat(path); err != nil {
			t.Errorf("mode %04o: record no longer in place: %v", mode, err)
		}
	}
}

// readLink returns a file's content, or the target of a symlink.
func readLink(t *testing.T, path string) string {
	t.Helper()
	if target, err := os.Readlink(path); err == nil {
		return "-> " + target
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestRecordsReportsUntrusted(t *testing.T) {
	d := newStateDir(t)
	if err := d.WriteRecord(Record{Name: "good", PID: 5, PGID: 5, StartTime: 1, BootID: "b"}); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(d.RecordPath("bad"), []byte("}{"), 0o600); err != nil {
		t.Fatal(err)
	}
	recs, errs := d.Records()
	if len(recs) != 1 || recs[0].Name != "good" {
		t.Errorf("Records() = %v, want [good]", recs)
	}
	var ue *UntrustedRecordError
	if len(errs) != 1 || !errors.As(errs[0], &ue) || ue.Name != "bad" {
		t.Errorf("Records() errors = %v, want one *UntrustedRecordError for bad", errs)
	}
}

func TestReadRecordNewerVersionLeftInPlace(t *testing.T) {
	d := newStateDir(t)
	data := `{"version":3,"name":"api","pid":10}`
	if err := os.WriteFile(d.RecordPath("api"), []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := d.ReadRecord("api")
	var ne *NewerRecordError
	if !errors.As(err, &ne) || ne.Name != "api" || ne.Version != 3 || !strings.Contains(err.Error(), "newer procfleet (record version 3; this one reads up to 2)") {
		t.Errorf("error = %v, want a *NewerRecordError naming api and version 3", err)
	}
	if b, _ := os.ReadFile(d.RecordPath("api")); string(b) != data {
		t.Errorf("record changed: %q", b)
	}
}

func FuzzParseRecord(f *testing.F) {
	f.Add([]byte(`{"version":1,"name":"api","pid":1234,"pgid":1234,"startTime":123456789,"bootId":"0f1e","uid":1000,"cmdline":["./bin/api","--port","8080"],"port":8080,"specHash":"sha256:ab","startedAt":"2026-11-30T10:00:00Z","pidfdInode":77}`))
	f.Add([]byte(`{"name":"api","pid":1,"startTime":null}`))
	f.Add([]byte(`1234`))
	f.Add([]byte(`{"name":"api","pid":-1,"startTime":-5}`))
	f.Add([]byte("{\"name\":\"api\",\"pid\":1}\x00"))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := ParseRecord("api", data)
		if err != nil {
			return
		}
		if r.Name != "api" || r.PID <= 0 || r.PGID < 0 || r.Version > RecordVersion {
			t.Errorf("ParseRecord accepted an invalid record: %+v", r)
		}
	})
}
