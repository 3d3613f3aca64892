package actuate

import (
	"errors"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/procfleet/procfleet/internal/testserver"
)

// Servers started at once are each seen Ready through the one listener
// watch, and the watch ends once nobody waits.
func TestStartManyOneListenWatch(t *testing.T) {
	a, _ := newActuator(t)
	ctx := testCtx(t)
	const n = 12
	var wg sync.WaitGroup
	errs := make([]error, n)
	ports := testserver.FreePorts(t, n)
	for i, port := range ports {
		wg.Go(func() {
			r, err := a.Start(ctx, serverReq("s"+strconv.Itoa(i), port, "-port", itoa(port)))
			if err != nil {
				errs[i] = err
				return
			}
			killPinned(t, r.Record.PID)
			_ = r.Handle.Close()
			// Ready means a loopback connect is accepted.
			c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", itoa(port)), 5*time.Second)
			if err != nil {
				errs[i] = err
				return
			}
			c.Close()
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("server %d: %v", i, err)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		listenWatch.mu.Lock()
		running, waits := listenWatch.running, len(listenWatch.waits)
		listenWatch.mu.Unlock()
		if !running && waits == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("listener watch still running with %d waiters", waits)
		}
		time.Sleep(time.Millisecond) // polls the loop's end, bounded above
	}
}

// A listener made by another process on the server's port after the
// port check: in cgroup mode it was not made in the server's cgroup and
// the server is not Ready; in session mode nothing tells it from the
// server's (as a connect would not), and it counts.
func TestWaitReadyForeignListener(t *testing.T) {
	forModes(t, func(t *testing.T, mode MembershipMode) {
		a, _ := newActuator(t)
		ctx := testCtx(t)
		port := testserver.FreePort(t)
		req := serverReq("api", port, "-port", itoa(port), "-listen-delay", "1h")
		req.StartupTimeout = 500 * time.Millisecond
		r, err := a.Spawn(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		killPinned(t, r.Record.PID)
		l, err := net.Listen("tcp4", net.JoinHostPort("127.0.0.1", itoa(port)))
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		err = a.WaitReady(ctx, req, r)
		if mode == MembershipSession {
			if err != nil {
				t.Fatalf("session mode: WaitReady = %v, want ready (any listener counts)", err)
			}
			_ = r.Handle.Close()
			return
		}
		var se *StartError
		if !errors.As(err, &se) || !strings.Contains(se.Message, "nothing listens on port "+itoa(port)) {
			t.Fatalf("WaitReady = %v, want not ready, nothing listens on port %d", err, port)
		}
	})
}
