package actuate

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// dirNames lists dir, sorted.
func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

// inodeOf is the inode number of path.
func inodeOf(t *testing.T, path string) uint64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	id, ok := fileID(fi)
	if !ok {
		t.Skip("no inode numbers on this system")
	}
	return id.Ino
}

// TestRecordWritesReuseInodes: once a folder has spares, writing,
// replacing and removing records allocates no inode and frees none, and a
// record written into a larger spare holds exactly its own bytes.
func TestRecordWritesReuseInodes(t *testing.T) {
	d := newStateDir(t)
	long := Record{Version: 2, Name: "api", Instance: strings.Repeat("ab", 16), Port: 8080,
		SpecHash: "sha256:" + strings.Repeat("0", 64), Cgroup: d.serverCgroupPath("api")}
	if err := d.WriteRecord(long); err != nil {
		t.Fatal(err)
	}
	first := inodeOf(t, d.RecordPath("api"))
	// The second write has no spare yet; the first file becomes one.
	full := Record{Version: 2, Name: "api", PID: 4321, PGID: 4321, StartTime: 77, Port: 8080}
	if err := d.WriteRecord(full); err != nil {
		t.Fatal(err)
	}
	second := inodeOf(t, d.RecordPath("api"))
	if second == first {
		t.Fatalf("the second write reused inode %d while it was the record", first)
	}
	// From now on the two files take turns: the shorter record is written
	// into the longer one's file.
	short := Record{Version: 2, Name: "api", PID: 5, PGID: 5, StartTime: 1}
	if err := d.WriteRecord(short); err != nil {
		t.Fatal(err)
	}
	if got := inodeOf(t, d.RecordPath("api")); got != first {
		t.Errorf("record inode %d after the third write, want the spare %d", got, first)
	}
	got, err := d.ReadRecord("api")
	if err != nil {
		t.Fatalf("record written into a longer spare: %v", err)
	}
	short.StateDir = got.StateDir // written by WriteRecord
	if got.StateDir == nil {
		t.Error("record written into a spare has no stateDir")
	}
	if diff := cmp.Diff(short, got); diff != "" {
		t.Errorf("record written into a spare (-want +got):\n%s", diff)
	}
	// RemoveRecord keeps the inode as a spare; the next record uses it.
	if err := d.RemoveRecord("api"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(d.RecordPath("api")); !os.IsNotExist(err) {
		t.Fatalf("record still there after RemoveRecord: %v", err)
	}
	if n := len(dirNames(t, d.spareDirPath())); n != 2 {
		t.Errorf("%d spares after RemoveRecord, want 2", n)
	}
	if err := d.WriteRecord(full); err != nil {
		t.Fatal(err)
	}
	if got := inodeOf(t, d.RecordPath("api")); got != first && got != second {
		t.Errorf("record inode %d, want one of the spares %d, %d", got, first, second)
	}
	if got := dirNames(t, filepath.Join(d.Path, serversDir)); !slices.Equal(got, []string{".spare", "api.json"}) {
		t.Errorf("servers/ holds %v, want [.spare api.json] (no temp file left)", got)
	}
}

// TestSparesOfEarlierProcess: a new StateDir over the folder (a later up)
// uses the spares an earlier one left.
func TestSparesOfEarlierProcess(t *testing.T) {
	d := newStateDir(t)
	r := Record{Version: 2, Name: "web", PID: 10, PGID: 10, StartTime: 3}
	if err := d.WriteRecord(r); err != nil {
		t.Fatal(err)
	}
	ino := inodeOf(t, d.RecordPath("web"))
	if err := d.RemoveRecord("web"); err != nil {
		t.Fatal(err)
	}
	d2, err := OpenStateDir(d.Path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d2.Close() })
	if err := d2.WriteRecord(r); err != nil {
		t.Fatal(err)
	}
	if got := inodeOf(t, d2.RecordPath("web")); got != ino {
		t.Errorf("record inode %d, want the earlier process's spare %d", got, ino)
	}
	if n := len(dirNames(t, d.spareDirPath())); n != 0 {
		t.Errorf("%d spares left, want 0", n)
	}
}

// TestSpareThatIsARecordIsNotWritten: a spare that is also a live record
// (a hard link a machine crash left behind between keepReplaced's link and
// its rename; made by hand here) is dropped from the spares, never
// written: the record keeps its bytes.
func TestSpareThatIsARecordIsNotWritten(t *testing.T) {
	d := newStateDir(t)
	api := Record{Version: 2, Name: "api", PID: 10, PGID: 10, StartTime: 3, Port: 8080}
	if err := d.WriteRecord(api); err != nil {
		t.Fatal(err)
	}
	before, err := os.ReadFile(d.RecordPath("api"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Link(d.RecordPath("api"), filepath.Join(d.spareDirPath(), "ilinked")); err != nil {
		t.Fatal(err)
	}
	d2, err := OpenStateDir(d.Path) // lists the spares afresh
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d2.Close() })
	if err := d2.WriteRecord(Record{Version: 2, Name: "web", PID: 11, PGID: 11, StartTime: 4}); err != nil {
		t.Fatal(err)
	}
	after, err := os.ReadFile(d.RecordPath("api"))
	if err != nil {
		t.Fatal(err)
	}
	if string(after) != string(before) {
		t.Errorf("record api changed through a spare linked to it:\n%s\nwas:\n%s", after, before)
	}
	if got := inodeOf(t, d.RecordPath("web")); got == inodeOf(t, d.RecordPath("api")) {
		t.Error("record web was written into record api's inode")
	}
	fi, err := os.Stat(d.RecordPath("api"))
	if err != nil {
		t.Fatal(err)
	}
	if n := linkCount(fi); n != 1 {
		t.Errorf("record api has %d links, want 1 (the spare name dropped)", n)
	}
}

// TestWriteFileUsesSpares: WriteFile and RemoveFile, for files of other
// folders of the state folder (started/), take and give spares as record
// writes do.
func TestWriteFileUsesSpares(t *testing.T) {
	d := newStateDir(t)
	dir := filepath.Join(d.Path, "started")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "api.json")
	for i, durable := range []bool{false, true} {
		data := []byte(strings.Repeat("x", 100-i*50) + "\n")
		if err := d.WriteFile(path, data, durable); err != nil {
			t.Fatal(err)
		}
		if got, err := os.ReadFile(path); err != nil || string(got) != string(data) {
			t.Fatalf("WriteFile #%d: read %q, %v; want %q", i, got, err, data)
		}
	}
	ino := inodeOf(t, path)
	if err := d.RemoveFile(path); err != nil {
		t.Fatal(err)
	}
	if err := d.RemoveFile(path); err != nil {
		t.Errorf("RemoveFile of a missing file: %v", err)
	}
	if n := len(dirNames(t, d.spareDirPath())); n != 2 {
		t.Errorf("%d spares after a replace and a remove, want 2", n)
	}
	if err := d.WriteRecord(Record{Version: 2, Name: "api", PID: 3, PGID: 3, StartTime: 9}); err != nil {
		t.Fatal(err)
	}
	if got := inodeOf(t, d.RecordPath("api")); got != ino {
		t.Errorf("record inode %d, want the removed file's %d", got, ino)
	}
	if got := dirNames(t, dir); len(got) != 0 {
		t.Errorf("started/ holds %v after RemoveFile, want nothing", got)
	}
}

// TestSpareOfAnotherUserIsNotWritten: a spare owned by another user (a
// record that was not trusted, replaced) is dropped, never written.
func TestSpareOfAnotherUserIsNotWritten(t *testing.T) {
	d := newStateDir(t)
	spare := filepath.Join(d.spareDirPath(), "iforeign")
	if err := os.WriteFile(spare, []byte("{}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(spare, 65534, 65534); err != nil {
		t.Skipf("cannot give a file to another user here: %v", err)
	}
	if err := d.WriteRecord(Record{Version: 2, Name: "api", PID: 3, PGID: 3, StartTime: 9}); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(d.RecordPath("api"))
	if err != nil {
		t.Fatal(err)
	}
	if !ownFile(fi) {
		uid, _ := fileOwner(fi)
		t.Errorf("record written into another user's file (uid %d)", uid)
	}
	if got := dirNames(t, d.spareDirPath()); len(got) != 0 {
		t.Errorf("servers/.spare holds %v, want the foreign spare dropped", got)
	}
}

// TestSparesBounded: with maxSpares spares on disk, a removed record is
// unlinked, not kept, even by a process that has taken no spare yet.
func TestSparesBounded(t *testing.T) {
	d := newStateDir(t)
	if err := d.WriteRecord(Record{Version: 2, Name: "api", PID: 3, PGID: 3, StartTime: 9}); err != nil {
		t.Fatal(err)
	}
	for i := range maxSpares {
		if err := os.WriteFile(filepath.Join(d.spareDirPath(), fmt.Sprintf("i%d", i)), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	d2, err := OpenStateDir(d.Path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d2.Close() })
	if err := d2.RemoveRecord("api"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(d.RecordPath("api")); !os.IsNotExist(err) {
		t.Fatalf("record still there after RemoveRecord: %v", err)
	}
	if n := len(dirNames(t, d.spareDirPath())); n != maxSpares {
		t.Errorf("%d spares after removing a record with the pool full, want %d", n, maxSpares)
	}
}
