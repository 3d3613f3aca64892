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
	sd, err := actuate.OpenStateDir(filepath.Join(t.TempDir(), ".procfleet"))
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"api", "web", "worker"} {
		if err := sd.WriteRecord(ownRecord(t, n, os.Getpid(), 8080, "sha256:x")); err != nil {
			t.Fatal(err)
		}
	}
	var rs recordScan
	scan := func(wantNames []string, wantUntrusted ...string) {
		t.Helper()
		names, errs := rs.names(sd)
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
	names, errs := rs.names(sd)
	if !slices.Equal(names, []string{"cache"}) || len(errs) != 1 {
		t.Errorf("with a misnamed file: names %v, errors %v; want [cache] and one error", names, errs)
	}
	if _, err := os.Stat(bad); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("misnamed record left in place: %v", err)
	}
	scan([]string{"cache"})
}
