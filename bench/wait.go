package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"
)

// Poll intervals. Each poll loop also has a deadline (its context).
const (
	// onePoll is used when watching a single server: a refused connect costs
	// a few microseconds, so 1 ms keeps the resolution fine.
	onePoll = time.Millisecond
	// fleetPoll is used for many servers at once: one listener query per
	// sweep (listeningOf), then GET /health only on ports that listen.
	// Slower, so the bench does not steal the CPU the supervisor under test
	// needs; and slower still for large fleets (sweepEvery), whose waits
	// last seconds.
	fleetPoll = 5 * time.Millisecond
	// fleetPollMax is the sweep interval from 1,000 servers on.
	fleetPollMax = 25 * time.Millisecond
	// stampSafetyPoll re-reads a watched stamp file in case an fsnotify
	// event is lost (queue overflow); events normally come first.
	stampSafetyPoll = 50 * time.Millisecond
)

// errCheck is called in every poll iteration; a non-nil error (the
// supervisor under test died) ends the wait at once.
type errCheck func() error

func noCheck() error { return nil }

func newHealthClient() *http.Client {
	return &http.Client{
		Timeout: 2 * time.Second,
		Transport: &http.Transport{
			Proxy:             nil,
			DisableKeepAlives: true,
		},
	}
}

// getHealth returns the body of a 200 answer to GET /health on port.
func getHealth(ctx context.Context, c *http.Client, port int) (string, bool) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://127.0.0.1:"+strconv.Itoa(port)+"/health", nil)
	if err != nil {
		return "", false
	}
	resp, err := c.Do(req)
	if err != nil {
		return "", false
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if err != nil || resp.StatusCode != http.StatusOK {
		return "", false
	}
	return string(body), true
}

// healthFrom returns a matcher for a /health body from a given pid ("pid N")
// or generation ("gen G"); zero values match anything.
func healthFrom(pid int, gen string) func(string) bool {
	return func(body string) bool {
		f := strings.Fields(body)
		if len(f) < 4 {
			return false
		}
		if pid != 0 && f[1] != strconv.Itoa(pid) {
			return false
		}
		if gen != "" && f[3] != gen {
			return false
		}
		return true
	}
}

// waitHealth polls one port until /health answers 200 with a body that
// want accepts, and returns when it first did.
func waitHealth(ctx context.Context, c *http.Client, port int, want func(string) bool, check errCheck) (time.Time, error) {
	t := time.NewTicker(onePoll)
	defer t.Stop()
	for {
		if body, ok := getHealth(ctx, c, port); ok && want(body) {
			return time.Now(), nil
		}
		if err := check(); err != nil {
			return time.Time{}, err
		}
		select {
		case <-ctx.Done():
			return time.Time{}, fmt.Errorf("wait for /health on port %d: %w", port, context.Cause(ctx))
		case <-t.C:
		}
	}
}

// sweepEvery is the poll interval of a wait over n servers: fleetPoll up
// to 200, growing linearly to fleetPollMax at 1,000.
func sweepEvery(n int) time.Duration {
	d := fleetPoll * time.Duration(max(1, n/200))
	return min(d, fleetPollMax)
}

// waitAllHealth waits until every port answers /health 200 and returns when
// the last one first did.
func waitAllHealth(ctx context.Context, c *http.Client, ports []int, check errCheck) (time.Time, error) {
	pending := slices.Clone(ports)
	var last time.Time
	t := time.NewTicker(sweepEvery(len(ports)))
	defer t.Stop()
	for {
		listening, err := listeningOf(pending)
		if err != nil {
			return time.Time{}, err
		}
		kept := pending[:0]
		for _, p := range pending {
			if listening[p] {
				if _, ok := getHealth(ctx, c, p); ok {
					last = time.Now()
					continue
				}
			}
			kept = append(kept, p)
		}
		pending = kept
		if len(pending) == 0 {
			return last, nil
		}
		if err := check(); err != nil {
			return time.Time{}, err
		}
		select {
		case <-ctx.Done():
			return time.Time{}, fmt.Errorf("wait for /health on %d ports (%d still down, first %d): %w",
				len(ports), len(pending), pending[0], context.Cause(ctx))
		case <-t.C:
		}
	}
}

// waitStopped waits until no pid runs (zombies count as gone) and no port
// listens, and returns when that was first seen. The pids are pinned on
// entry (pinAll), so one whose number is reused is not waited for; the
// ports are asked once every process is gone, and their last answer
// (free) is confirmed by the bench's own procfs reading before it counts.
func waitStopped(ctx context.Context, pids, ports []int) (time.Time, error) {
	t := time.NewTicker(sweepEvery(max(len(pids), len(ports))))
	defer t.Stop()
	set := pinAll(pids)
	defer set.close()
	for {
		alive, err := set.alive()
		if err != nil {
			return time.Time{}, err
		}
		if alive == 0 {
			busy, err := countListening(ports, listeningOf)
			if err != nil {
				return time.Time{}, err
			}
			seen := time.Now()
			if busy == 0 {
				busy, err = countListening(ports, func([]int) (map[int]bool, error) { return listeningPorts() })
				if err != nil {
					return time.Time{}, err
				}
			}
			if busy == 0 {
				return seen, nil
			}
		}
		select {
		case <-ctx.Done():
			busy, _ := countListening(ports, listeningOf)
			return time.Time{}, fmt.Errorf("wait for %d processes to exit and %d ports to close (%d alive; %d listening): %w",
				len(pids), len(ports), alive, busy, context.Cause(ctx))
		case <-t.C:
		}
	}
}

// countListening returns how many of ports are in LISTEN state, by list.
func countListening(ports []int, list func([]int) (map[int]bool, error)) (int, error) {
	if len(ports) == 0 {
		return 0, nil
	}
	listening, err := list(ports)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, p := range ports {
		if listening[p] {
			n++
		}
	}
	return n, nil
}

// waitLeft waits until exactly k of f's ports listen and exactly k of the
// instances its stamp files record still run the workload (stamps are read anew each
// sweep: a peer may replace the instances it keeps), and returns when that
// was first seen.
func waitLeft(ctx context.Context, f Fleet, k int) (time.Time, error) {
	t := time.NewTicker(sweepEvery(len(f.Servers)))
	defer t.Stop()
	for {
		alive := 0
		for _, s := range f.Servers {
			st, err := readStamps(s.Stamp)
			if err != nil {
				return time.Time{}, err
			}
			for _, x := range st {
				if runsProgram(x.PID, f.Workload) {
					alive++
				}
			}
		}
		busy, err := countListening(f.Ports(), listeningOf)
		if err != nil {
			return time.Time{}, err
		}
		if alive == k && busy == k {
			return time.Now(), nil
		}
		select {
		case <-ctx.Done():
			return time.Time{}, fmt.Errorf("wait for %d of %d instances to be left (%d running, %d listening): %w",
				k, len(f.Servers), alive, busy, context.Cause(ctx))
		case <-t.C:
		}
	}
}

// waitPortsFree waits until none of ports is in LISTEN state.
func waitPortsFree(ctx context.Context, ports []int) error {
	_, err := waitStopped(ctx, nil, ports)
	return err
}

// StampWatcher watches a folder of stamp files.
type StampWatcher struct {
	w       *fsnotify.Watcher
	changed chan struct{}
	done    chan struct{}
}

// NewStampWatcher watches dir (which must exist).
func NewStampWatcher(dir string) (*StampWatcher, error) {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, fmt.Errorf("watch stamps: %w", err)
	}
	if err := w.Add(dir); err != nil {
		_ = w.Close()
		return nil, fmt.Errorf("watch stamps in %s: %w", dir, err)
	}
	s := &StampWatcher{w: w, changed: make(chan struct{}, 1), done: make(chan struct{})}
	go s.loop()
	return s, nil
}

func (s *StampWatcher) loop() {
	defer close(s.done)
	for {
		select {
		case _, ok := <-s.w.Events:
			if !ok {
				return
			}
			select {
			case s.changed <- struct{}{}:
			default:
			}
		case _, ok := <-s.w.Errors:
			if !ok {
				return
			}
			// A lost event is covered by the safety re-read.
		}
	}
}

// Close stops watching and waits for the watcher goroutine to end.
func (s *StampWatcher) Close() error {
	err := s.w.Close()
	<-s.done
	if err != nil {
		return fmt.Errorf("close stamp watcher: %w", err)
	}
	return nil
}

// WaitNew waits until path holds more than `after` stamps and one of the new
// ones satisfies want; it returns that stamp and the number of stamps read.
func (s *StampWatcher) WaitNew(ctx context.Context, path string, after int, want func(Stamp) bool, check errCheck) (Stamp, int, error) {
	t := time.NewTicker(stampSafetyPoll)
	defer t.Stop()
	for {
		stamps, err := readStamps(path)
		if err != nil {
			return Stamp{}, 0, err
		}
		for _, st := range stamps[min(after, len(stamps)):] {
			if want(st) {
				return st, len(stamps), nil
			}
		}
		if err := check(); err != nil {
			return Stamp{}, 0, err
		}
		select {
		case <-ctx.Done():
			return Stamp{}, 0, fmt.Errorf("wait for a new stamp in %s: %w", filepath.Base(path), context.Cause(ctx))
		case <-s.changed:
		case <-t.C:
		}
	}
}

// readStamps reads a stamp file; a missing file has no stamps.
func readStamps(path string) ([]Stamp, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read stamps: %w", err)
	}
	st, err := ParseStamps(data)
	if err != nil {
		return nil, fmt.Errorf("read stamps %s: %w", path, err)
	}
	return st, nil
}
