package actuate

import (
	"net"
	"strconv"
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
// port check (docker-proxy for a `docker run -p`): the port accepts TCP,
// DESIGN.md's default readiness, in both membership modes, as a connect
// would have said.
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
		if err := a.WaitReady(ctx, req, r); err != nil {
			t.Fatalf("%s mode: WaitReady = %v, want ready (the port accepts TCP)", mode, err)
		}
		_ = r.Handle.Close()
	})
}
