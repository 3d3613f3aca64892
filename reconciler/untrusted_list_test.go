package reconciler

import (
	"fmt"
	"os"
	"testing"

	"github.com/procfleet/procfleet/actuate"
)

// TestUntrustedListShared: the first passes of all servers share one list
// of the quarantines on disk, taken again once a record is moved aside
// (here by ReadRecord, as a pass does) or resolved.
func TestUntrustedListShared(t *testing.T) {
	sd, err := actuate.OpenStateDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	spoil := func(name string) {
		t.Helper()
		if err := os.WriteFile(sd.RecordPath(name), []byte("{not json"), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := sd.ReadRecord(name); err == nil {
			t.Fatalf("a record of %s that is not JSON was read", name)
		}
	}
	spoil("api")

	var l untrustedList
	first, err := l.list(sd)
	if err != nil {
		t.Fatal(err)
	}
	if len(first) != 1 || first[0].Name != "api" {
		t.Fatalf("listed %+v, want the quarantine of api", first)
	}
	again, err := l.list(sd)
	if err != nil {
		t.Fatal(err)
	}
	if &again[0] != &first[0] {
		t.Fatal("the folder was listed again though nothing was moved aside")
	}

	spoil("web")
	moved, err := l.list(sd)
	if err != nil {
		t.Fatal(err)
	}
	if len(moved) != 2 || moved[0].Name != "api" || moved[1].Name != "web" {
		t.Fatalf("after web's record was moved aside, listed %+v; want api and web", moved)
	}

	act := &actuate.Actuator{Dir: sd}
	if err := act.ResolveUntrusted(moved[0], "test"); err != nil {
		t.Fatal(err)
	}
	resolved, err := l.list(sd)
	if err != nil {
		t.Fatal(err)
	}
	if len(resolved) != 1 || resolved[0].Name != "web" {
		t.Fatalf("after api's quarantine was resolved, listed %+v; want web only", resolved)
	}
}

// BenchmarkFirstPassesUntrusted1000 is the look for a quarantine on disk
// by the first passes of 1,000 servers, each with a record in the folder.
func BenchmarkFirstPassesUntrusted1000(b *testing.B) {
	sd, err := actuate.OpenStateDir(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	servers := make([]*server, 1000)
	for i := range servers {
		servers[i] = &server{name: fmt.Sprintf("web-%04d", i)}
		if err := os.WriteFile(sd.RecordPath(servers[i].name), []byte("{}"), 0o600); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		r := &Reconciler{cfg: Config{StateDir: sd}}
		for _, s := range servers {
			s.untrustedListed = false
			if r.diskUntrusted(s) != nil {
				b.Fatal("a quarantine where there is none")
			}
		}
	}
}
