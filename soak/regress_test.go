//go:build soak && linux

package soak

import (
	"context"
	"encoding/json"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Targeted reproductions of what the chaos soak found, small and bounded, so
// that a fix can be checked in seconds: go test -tags soak -run Regress ./soak

// smallFleet declares n servers, starts up, and waits until they are Ready.
func smallFleet(t *testing.T, n int) (*harness, context.Context) {
	t.Helper()
	h := newHarness(t, time.Now().UnixNano())
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	h.build()
	saved := *flagServers
	*flagServers = n
	h.writeFleet()
	*flagServers = saved
	h.startUp()
	if !h.waitConverged(ctx, 60*time.Second, nil, time.Now()) {
		h.fatalf("the fleet did not converge within 60 s")
	}
	return h, ctx
}

// runningRecord returns a server of h, the pid it runs as, and the path of
// its record.
func runningRecord(t *testing.T, h *harness, name string) (*server, int, string) {
	t.Helper()
	s := h.servers[name]
	pid, ok := h.lastStart(s)
	if !ok {
		t.Fatalf("%s not running", name)
	}
	return s, pid, h.recordPath(name)
}

func (h *harness) starts(name string) int {
	b, _ := os.ReadFile(filepath.Join(h.run, name+".stamp"))
	return strings.Count(string(b), "\n")
}

// An in-place save (open with O_TRUNC, then write: what `cat > file`, many
// editors and an interrupted copy do) of unchanged content must change
// nothing running. Found by the soak (seed 101): the watcher can read the
// file in the instant it is empty, and up stops its servers as "removed from
// the fleet files", then starts them again.
func TestRegressInPlaceSaveChangesNothing(t *testing.T) {
	h, _ := smallFleet(t, 3)
	rng := rand.New(rand.NewSource(h.seed))
	deadline := time.Now().Add(15 * time.Second)
	saves := 0
	for time.Now().Before(deadline) {
		s := h.servers[h.names[rng.Intn(3)]]
		if err := os.WriteFile(s.file, s.content, 0o600); err != nil {
			t.Fatal(err)
		}
		saves++
		time.Sleep(time.Duration(rng.Intn(40)) * time.Millisecond) // pacing of the saves, not a wait
	}
	for _, n := range h.names[:3] {
		if got := h.starts(n); got != 1 {
			t.Errorf("server %s started %d times during %d in-place saves of unchanged files; want once", n, got, saves)
		}
	}
	if b, _ := os.ReadFile(h.up.log); strings.Contains(string(b), "removed from the fleet files") {
		t.Errorf("up stopped a server as removed while its file was only saved in place (log %s)", h.up.log)
	}
}

// A record that becomes untrusted while up tracks its server must not leave
// the server Running without a record: up either writes a good record again
// (it still holds the proof, a pidfd) or reports the server Quarantined.
// Found by the soak (seed 201): up moved the record aside and kept reporting
// Running; after the next restart of up the process could not be proven
// procfleet's any more.
func TestRegressCorruptRecordWhileTracked(t *testing.T) {
	h, ctx := smallFleet(t, 2)
	_, pid, path := runningRecord(t, h, "s00")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b[:len(b)/2], 0o600); err != nil {
		t.Fatal(err)
	}
	// Make up look at every record: declare a new server.
	h.declare(h.servers["s02"])
	var last string
	_, settled := waitFor(ctx, 40*time.Second, func() bool {
		st, err := h.status(ctx)
		if err != nil {
			return false
		}
		e, ok := st.get("s00")
		if !ok {
			return false
		}
		moved, _ := filepath.Glob(path + ".corrupt-*")
		rb, rerr := os.ReadFile(path)
		var rec struct {
			PID int `json:"pid"`
		}
		good := rerr == nil && json.Unmarshal(rb, &rec) == nil && rec.PID == pid
		last = e.Phase + " " + e.Reason + " moved aside " + strings.Join(moved, ",") + " record good " + map[bool]string{true: "yes", false: "no"}[good]
		switch {
		case e.Phase == "Quarantined":
			return true
		case e.Phase == "Running" && good && len(moved) > 0:
			return true // healed: moved aside and written again
		}
		return false
	})
	if !settled {
		t.Errorf("s00 (pid %d) after its record was corrupted: %s; want Quarantined, or Running with the bad record moved aside and a good one written", pid, last)
	}
}

// Once the process that an untrusted record named has exited and nothing
// holds the port, the UntrustedRecord quarantine has nothing left to protect:
// the server must be started again (its policy is Always). Found by the soak
// (seed 301): up kept s15 Quarantined / UntrustedRecord ("nothing
// signalled") after its process died, until up itself was restarted.
func TestRegressUntrustedQuarantineLiftedWhenProcessGone(t *testing.T) {
	h, ctx := smallFleet(t, 2)
	s, pid, path := runningRecord(t, h, "s00")
	if err := os.WriteFile(path, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	h.declare(h.servers["s02"]) // makes up read every record
	if _, ok := waitFor(ctx, 40*time.Second, func() bool {
		moved, _ := filepath.Glob(path + ".corrupt-*")
		return len(moved) > 0
	}); !ok {
		t.Fatalf("the corrupt record of s00 was not moved aside within 40 s")
	}
	if err := syscallKill(pid); err != nil {
		t.Fatal(err)
	}
	if _, ok := waitFor(ctx, 45*time.Second, func() bool { return h.runningAgain(s, pid) }); !ok {
		st, _ := h.status(ctx)
		e, _ := st.get("s00")
		t.Errorf("s00 not started again within 45 s after its unprovable process (pid %d) exited and freed the port: %s %q %q", pid, e.Phase, e.Reason, e.Message)
	}
}
