package reconciler

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/procfleet/procfleet/actuate"
	"github.com/procfleet/procfleet/internal/testserver"
)

// preparedFiles lists the prepared intent records of server name
// (".<name>.json.tmp-next-*" in the records folder).
func preparedFiles(t *testing.T, f *testFleet, name string) []string {
	t.Helper()
	rec := f.state.RecordPath(name)
	entries, err := os.ReadDir(filepath.Dir(rec))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "."+filepath.Base(rec)+".tmp-next-") {
			out = append(out, e.Name())
		}
	}
	return out
}

// preparedToken waits until the next spawn of server name is prepared and
// written, with one prepared record on disk, and returns its token.
func preparedToken(t *testing.T, f *testFleet, rr *running, name string) string {
	t.Helper()
	act, ok := rr.r.act.(*actuate.Actuator)
	if !ok {
		t.Fatalf("the reconciler's actuator is a %T", rr.r.act)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if token, written := act.Prepared(name); written && len(preparedFiles(t, f, name)) == 1 {
			return token
		}
		if time.Now().After(deadline) {
			t.Fatalf("no prepared record for %s: %v", name, preparedFiles(t, f, name))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestPreparedBeforeAFirstCrash: once the fleet's starts are over, every
// server has its next spawn prepared, the first crash's restart runs with
// the prepared token, and the restarted server is prepared again.
func TestPreparedBeforeAFirstCrash(t *testing.T) {
	f := newTestFleet(t)
	ports := testserver.FreePorts(t, 2)
	f.add(&testSpec{name: "calm", port: ports[0]})
	f.add(&testSpec{name: "web", port: ports[1]})
	f.write()
	rr := f.run(t, nil)
	st := waitStatus(t, rr.r, "cold start", allReady("calm", "web"))
	first := pidOf(st, "web")
	token := preparedToken(t, f, rr, "web")
	_ = preparedToken(t, f, rr, "calm")
	if err := syscall.Kill(first, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, rr.r, "web restarted", func(st Status) bool {
		s, _ := st.Get("web")
		return s.Ready && s.PID != first && s.PID != 0
	})
	rec, err := f.state.ReadRecord("web")
	if err != nil || rec.Instance != token {
		t.Errorf("web's record after its first crash: instance %q, %v; want the prepared %q", rec.Instance, err, token)
	}
	if next := preparedToken(t, f, rr, "web"); next == token {
		t.Errorf("web's next spawn prepared with the token in use %q", next)
	}
}
