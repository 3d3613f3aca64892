package reconciler

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"

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

// TestPreparedOnlyAfterARestart: a server Ready after its first start gets
// no prepared record (a cold start of a large fleet would pay one fsync per
// server); once it has been restarted, its next spawn is prepared. The
// preparer writes in the order it was asked, so when web's record (asked
// at its restart) is there, calm's would be too had its first Ready asked.
func TestPreparedOnlyAfterARestart(t *testing.T) {
	f := newTestFleet(t)
	ports := testserver.FreePorts(t, 2)
	f.add(&testSpec{name: "calm", port: ports[0]})
	f.add(&testSpec{name: "web", port: ports[1]})
	f.write()
	rr := f.run(t, nil)
	st := waitStatus(t, rr.r, "cold start", allReady("calm", "web"))
	first := pidOf(st, "web")
	if err := syscall.Kill(first, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, rr.r, "web restarted", func(st Status) bool {
		s, _ := st.Get("web")
		return s.Ready && s.PID != first && s.PID != 0
	})
	deadline := time.Now().Add(30 * time.Second)
	for len(preparedFiles(t, f, "web")) != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("no prepared record for web after its restart: %v", preparedFiles(t, f, "web"))
		}
		time.Sleep(5 * time.Millisecond)
	}
	if got := preparedFiles(t, f, "calm"); len(got) != 0 {
		t.Errorf("calm, never restarted, has prepared records %v; want none", got)
	}
}

// restartSpy is the real Actuator, counting PrepareRestart by server.
type restartSpy struct {
	*actuate.Actuator
	mu    sync.Mutex
	asked map[string]int
}

func (s *restartSpy) PrepareRestart(req actuate.StartRequest) {
	s.mu.Lock()
	s.asked[req.Name]++
	s.mu.Unlock()
	s.Actuator.PrepareRestart(req)
}

func (s *restartSpy) count(name string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.asked[name]
}

// TestFirstCrashPreparedAtExit: the exit of a server that may restart has
// its next intent prepared as the exit is seen, its first crash too; a
// server that is never restarted gets none.
func TestFirstCrashPreparedAtExit(t *testing.T) {
	f := newTestFleet(t)
	ports := testserver.FreePorts(t, 2)
	f.add(&testSpec{name: "web", port: ports[0]})
	f.add(&testSpec{name: "once", port: ports[1], policy: "Never"})
	f.write()
	spy := &restartSpy{Actuator: &actuate.Actuator{Dir: f.state, Log: testr.New(t)}, asked: map[string]int{}}
	rr := f.run(t, func(c *Config) { c.Actuator = spy })
	st := waitStatus(t, rr.r, "cold start", allReady("web", "once"))
	web, once := pidOf(st, "web"), pidOf(st, "once")
	for _, pid := range []int{web, once} {
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
	}
	waitStatus(t, rr.r, "web restarted, once stopped", func(st Status) bool {
		w, _ := st.Get("web")
		o, _ := st.Get("once")
		return w.Ready && w.PID != web && w.PID != 0 && o.PID == 0 && o.Phase != PhaseRunning
	})
	if got := spy.count("web"); got != 1 {
		t.Errorf("web's first crash: PrepareRestart asked %d times, want 1", got)
	}
	if got := spy.count("once"); got != 0 {
		t.Errorf("once (restartPolicy Never): PrepareRestart asked %d times, want 0", got)
	}
}
