package reconciler

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/procfleet/procfleet/actuate"
	"github.com/procfleet/procfleet/internal/testserver"
)

// TestNewerRecordQuarantines: a record written by a newer procfleet (a
// format this one cannot read) may prove that the server runs under that
// procfleet. Rule 6: its owner cannot be checked, so the server is
// Quarantined / UnverifiedOwner with what to do, the record is kept as it
// is, and no second instance is started beside it, pass after pass.
func TestNewerRecordQuarantines(t *testing.T) {
	f := newTestFleet(t)
	f.add(&testSpec{name: "api", port: testserver.FreePort(t)})
	f.write()
	newer := []byte(`{"version":9,"name":"api","pid":10,"somethingNew":true}`)
	if err := os.WriteFile(f.state.RecordPath("api"), newer, 0o600); err != nil {
		t.Fatal(err)
	}
	rr := f.run(t, nil)

	st := waitStatus(t, rr.r, "api quarantined", func(st Status) bool {
		s, _ := st.Get("api")
		return s.Phase == PhaseQuarantined
	})
	s, _ := st.Get("api")
	if s.Reason != string(actuate.UnverifiedOwner) || s.Ready || !strings.Contains(s.Message, "written by a newer procfleet (record version 9") {
		t.Errorf("api: %s / %s ready=%v message %q; want Quarantined / UnverifiedOwner naming the newer record", s.Phase, s.Reason, s.Ready, s.Message)
	}
	// Two more full passes (apply --wait while up runs): still nothing
	// started; each reports api at once, without spending its timeout on a
	// server that stays quarantined until someone acts (Cause nil: it did
	// not time out).
	for i := 0; i < 2; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		_, err := rr.r.Reload(ctx, true, 50*time.Second)
		cancel()
		var nc *NotConvergedError
		if !errors.As(err, &nc) || nc.Cause != nil || !strings.Contains(nc.Servers["api"], "UnverifiedOwner") {
			t.Errorf("Reload %d: %v; want a not-converged error naming api's quarantine, not a timeout", i, err)
		}
	}
	if n := len(f.starts("api")); n != 0 {
		t.Errorf("api started %d times beside a record this procfleet cannot read", n)
	}
	if b, err := os.ReadFile(f.state.RecordPath("api")); err != nil || string(b) != string(newer) {
		t.Errorf("record changed: %q, %v", b, err)
	}
}
