package reconciler

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/procfleet/procfleet/actuate"
)

// TestRecordScan: the resync's listing of records reads a record again
// exactly when its file changed (written, replaced, chmod-ed), so a record
// turned untrusted between two resyncs is still moved aside and reported at
// the next one, as a read of every record would.
func TestRecordScan(t *testing.T) {
	sd := stateWithRecords(t, "api", "web", "worker")
	var rs recordScan
	scan := func(wantNames []string, wantUntrusted ...string) {
		t.Helper()
		names, errs := rs.names(sd, nil)
		slices.Sort(names)
		if !slices.Equal(names, wantNames) {
			t.Errorf("names %v, want %v", names, wantNames)
		}
		var untrusted []string
		for _, err := range errs {
			var ue *actuate.UntrustedRecordError
			if !errors.As(err, &ue) {
				t.Errorf("error %v, want only *UntrustedRecordError", err)
				continue
			}
			if ue.MovedTo == "" {
				t.Errorf("%s: untrusted record not moved aside: %v", ue.Name, err)
			}
			untrusted = append(untrusted, ue.Name)
		}
		slices.Sort(untrusted)
		if !slices.Equal(untrusted, wantUntrusted) {
			t.Errorf("untrusted %v, want %v", untrusted, wantUntrusted)
		}
		// What is listed and trusted is what the next scan does not read.
		for _, n := range names {
			if _, ok := rs.trusted[n]; !ok {
				t.Errorf("%s listed but its verdict not kept", n)
			}
		}
		if len(rs.trusted) != len(names) {
			t.Errorf("verdicts kept for %d records, want %d (%v)", len(rs.trusted), len(names), rs.trusted)
		}
	}

	scan([]string{"api", "web", "worker"})
	scan([]string{"api", "web", "worker"})

	// chmod only: the content is the same, the change time is not.
	if err := os.Chmod(sd.RecordPath("api"), 0o666); err != nil {
		t.Fatal(err)
	}
	// Written in place, same size: a record that no longer parses.
	data, err := os.ReadFile(sd.RecordPath("web"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(sd.RecordPath("web"), []byte(strings.Repeat("x", len(data))), 0o600); err != nil {
		t.Fatal(err)
	}
	scan([]string{"worker"}, "api", "web")

	// A new record is read and listed; a removed one is forgotten.
	if err := sd.WriteRecord(ownRecord(t, "cache", os.Getpid(), 8081, "sha256:y")); err != nil {
		t.Fatal(err)
	}
	if err := sd.RemoveRecord("worker"); err != nil {
		t.Fatal(err)
	}
	scan([]string{"cache"})

	// Replaced by rename (a new inode), as WriteRecord does: read again.
	if err := sd.WriteRecord(ownRecord(t, "cache", os.Getpid(), 8082, "sha256:z")); err != nil {
		t.Fatal(err)
	}
	scan([]string{"cache"})

	// A file that is no server's name: the full read moves it aside.
	bad := filepath.Join(filepath.Dir(sd.RecordPath("cache")), "Not_A_Name.json")
	if err := os.WriteFile(bad, data, 0o600); err != nil {
		t.Fatal(err)
	}
	names, errs := rs.names(sd, nil)
	if !slices.Equal(names, []string{"cache"}) || len(errs) != 1 {
		t.Errorf("with a misnamed file: names %v, errors %v; want [cache] and one error", names, errs)
	}
	if _, err := os.Stat(bad); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("misnamed record left in place: %v", err)
	}
	scan([]string{"cache"})
}

// TestRecordScanLearnsOwnWrites: a record up has just written is keyed at
// once (learn), with the key a scan takes of it, so the next scan keeps
// its verdict without reading it; a change made after the write (here a
// record that no longer parses, written in place) is still read and moved
// aside at the next scan.
func TestRecordScanLearnsOwnWrites(t *testing.T) {
	sd, err := actuate.OpenStateDir(filepath.Join(t.TempDir(), ".procfleet"))
	if err != nil {
		t.Fatal(err)
	}
	var rs recordScan
	for _, n := range []string{"api", "web"} {
		if err := sd.WriteRecord(ownRecord(t, n, os.Getpid(), 8080, "sha256:x")); err != nil {
			t.Fatal(err)
		}
		rs.learn(sd, n)
	}
	learned := map[string]fileKey{}
	for n, k := range rs.trusted {
		learned[n] = k
	}
	if len(learned) != 2 {
		t.Fatalf("keys learned for %v, want api and web", learned)
	}
	names, errs := rs.names(sd, nil)
	slices.Sort(names)
	if !slices.Equal(names, []string{"api", "web"}) || len(errs) > 0 {
		t.Errorf("names %v, errors %v; want [api web], none", names, errs)
	}
	for n, k := range learned {
		if rs.trusted[n] != k {
			t.Errorf("%s: the scan's key %+v differs from the key learned at the write %+v", n, rs.trusted[n], k)
		}
	}

	// Changed after the write: read, moved aside, reported.
	data, err := os.ReadFile(sd.RecordPath("web"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(sd.RecordPath("web"), []byte(strings.Repeat("x", len(data))), 0o600); err != nil {
		t.Fatal(err)
	}
	names, errs = rs.names(sd, nil)
	var ue *actuate.UntrustedRecordError
	if !slices.Equal(names, []string{"api"}) || len(errs) != 1 || !errors.As(errs[0], &ue) || ue.Name != "web" || ue.MovedTo == "" {
		t.Errorf("after web was written over: names %v, errors %v; want [api] and web untrusted, moved aside", names, errs)
	}

	// A record that cannot be keyed (gone) is forgotten: read when back.
	if err := sd.RemoveRecord("api"); err != nil {
		t.Fatal(err)
	}
	rs.learn(sd, "api")
	if _, ok := rs.trusted["api"]; ok {
		t.Errorf("a key kept for a record that is gone")
	}
}

// TestRecordScanTake: a down's listing keeps the records it read, and a
// stop takes each once, only while its file is unchanged (a record written
// again, or chmod-ed, is read again by the stop, as before).
func TestRecordScanTake(t *testing.T) {
	sd := stateWithRecords(t, "api", "web", "worker")
	var plain recordScan
	plain.names(sd, nil)
	if _, ok := plain.take(sd, "api"); ok {
		t.Error("a scan without keep kept a record")
	}

	rs := recordScan{keep: true}
	if names, errs := rs.names(sd, nil); len(names) != 3 || len(errs) != 0 {
		t.Fatalf("names %v, errors %v", names, errs)
	}
	rec, ok := rs.take(sd, "api")
	if !ok || rec.Name != "api" || rec.PID != os.Getpid() || rec.Port != 8080 {
		t.Errorf("take(api) = %+v, %v; want the record written", rec, ok)
	}
	if _, ok := rs.take(sd, "api"); ok {
		t.Error("a record was taken twice")
	}
	// Written again (another size, change time and, today, inode), and
	// chmod-ed.
	if err := sd.WriteRecord(ownRecord(t, "web", os.Getpid(), 18081, "sha256:y")); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(sd.RecordPath("worker"), 0o640); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"web", "worker"} {
		if rec, ok := rs.take(sd, n); ok {
			t.Errorf("take(%s) = %+v after its file changed", n, rec)
		}
	}
}

// BenchmarkStopRecordRead compares what a down's stop pays for a record
// its listing read: a read (open, trust checks, parse) against a take
// (one lstat).
func BenchmarkStopRecordRead(b *testing.B) {
	sd, err := actuate.OpenStateDir(filepath.Join(b.TempDir(), ".procfleet"))
	if err != nil {
		b.Fatal(err)
	}
	if err := sd.WriteRecord(ownRecord(b, "api", os.Getpid(), 8080, "sha256:x")); err != nil {
		b.Fatal(err)
	}
	b.Run("read", func(b *testing.B) {
		for b.Loop() {
			if _, err := sd.ReadRecord("api"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("take", func(b *testing.B) {
		for b.Loop() {
			b.StopTimer()
			rs := recordScan{keep: true}
			rs.names(sd, nil)
			b.StartTimer()
			if _, ok := rs.take(sd, "api"); !ok {
				b.Fatal("not taken")
			}
		}
	})
}

// stateWithRecords is a fresh state folder holding a record of this
// process for each name.
func stateWithRecords(t *testing.T, names ...string) *actuate.StateDir {
	t.Helper()
	sd, err := actuate.OpenStateDir(filepath.Join(t.TempDir(), ".procfleet"))
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if err := sd.WriteRecord(ownRecord(t, n, os.Getpid(), 8080, "sha256:x")); err != nil {
			t.Fatal(err)
		}
	}
	return sd
}
