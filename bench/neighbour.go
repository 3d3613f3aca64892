package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The busy neighbour of issue 20: a file beside the fleet file written at
// 3 MB/s in lines of 1,500 bytes (2,000 writes a second, as the log that
// cost `up` a third of a core did).
const (
	neighbourRate = 3_000_000 // bytes a second
	neighbourLine = 1500
	// neighbourServers is the fleet `up` runs meanwhile.
	neighbourServers = 10
)

// neighbour: `up` with a small fleet; its CPU over r.window with the folder
// quiet, then over r.window while the workload writes a file beside the
// fleet file at neighbourRate. No server may restart for it.
func (r *runner) neighbour(ctx context.Context, pm peerMaker) error {
	dir, err := r.peerDir(pm.name, "neighbour")
	if err != nil {
		return err
	}
	p, ok := pm.make(dir).(*procfleetPeer)
	if !ok {
		return fmt.Errorf("the neighbour scenario drives procfleet, not %s", pm.name)
	}
	f := newFleet(r.workload, filepath.Join(dir, "stamps"), r.ports[:neighbourServers])
	if err := r.portsFree(ctx, f.Ports()); err != nil {
		return err
	}
	defer r.closePeer(p, f)
	if err := r.startFleet(ctx, p, f, "the neighbour fleet's start"); err != nil {
		return err
	}
	upPID, err := p.SupervisorPID()
	if err != nil {
		return err
	}

	busy := filepath.Join(filepath.Dir(p.fleet), "neighbour.log")
	out, err := os.OpenFile(busy, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("neighbour file: %w", err)
	}
	lines := neighbourRate / neighbourLine
	cmd := exec.Command(r.workload, "-port", "0", "-spew", strconv.Itoa(lines), "-line", strconv.Itoa(neighbourLine))
	cmd.Stdout = out
	err = cmd.Start()
	out.Close() // the writer has its own copy
	if err != nil {
		return fmt.Errorf("start the neighbour writer: %w", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	defer func() { _ = cmd.Process.Kill(); <-exited }() // os.Process: never a reused pid
	if err := waitFileHas(ctx, busy, "ready\n", exited); err != nil {
		return err
	}

	before, err := f.stampCounts()
	if err != nil {
		return err
	}
	quiet, err := r.cpuOver(ctx, upPID, p.Err)
	if err != nil {
		return err
	}
	st0, err := os.Stat(busy)
	if err != nil {
		return fmt.Errorf("neighbour file: %w", err)
	}
	if err := cmd.Process.Signal(syscall.SIGUSR1); err != nil {
		return fmt.Errorf("start the neighbour writer: %w", err)
	}
	loud, err := r.cpuOver(ctx, upPID, p.Err)
	if err != nil {
		return err
	}
	st1, err := os.Stat(busy)
	if err != nil {
		return fmt.Errorf("neighbour file: %w", err)
	}
	after, err := f.stampCounts()
	if err != nil {
		return err
	}
	pct := func(d time.Duration) float64 { return float64(d) / float64(r.window) * 100 }
	r.res.Set(r.rows.neighbourBase, p.Name(), pct(quiet))
	r.res.Set(r.rows.neighbour, p.Name(), pct(loud))
	r.res.Set(r.rows.neighbourRe, p.Name(), float64(restartedExcept(before, after, "")))
	rate := float64(st1.Size()-st0.Size()) / r.window.Seconds() / 1e6
	r.res.Note("10. neighbour: the file beside the fleet file grew at %.2f MB/s during the window", rate)
	r.log.Printf("%s: up CPU %.2f%% of a core quiet, %.2f%% beside a file written at %.2f MB/s", p.Name(), pct(quiet), pct(loud), rate)
	return nil
}

// cpuOver returns the CPU pid uses over r.window (a measurement interval,
// not a wait for an event), failing if check does.
func (r *runner) cpuOver(ctx context.Context, pid int, check errCheck) (time.Duration, error) {
	c0, err := cpuTime(pid)
	if err != nil {
		return 0, err
	}
	if err := sleepUntil(ctx, time.Now().Add(r.window)); err != nil {
		return 0, err
	}
	if err := check(); err != nil {
		return 0, err
	}
	c1, err := cpuTime(pid)
	if err != nil {
		return 0, err
	}
	return c1 - c0, nil
}

// waitFileHas polls path until it starts with want, for at most followBound; a
// close of exited (the writer died) ends it at once.
func waitFileHas(ctx context.Context, path, want string, exited <-chan struct{}) error {
	ctx, cancel := context.WithTimeout(ctx, followBound)
	defer cancel()
	t := time.NewTicker(onePoll)
	defer t.Stop()
	for {
		data, err := os.ReadFile(path)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("wait for %q in %s: %w", want, path, err)
		}
		if strings.HasPrefix(string(data), want) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for %q in %s: %w", want, path, context.Cause(ctx))
		case <-exited:
			return fmt.Errorf("wait for %q in %s: the writer exited", want, path)
		case <-t.C:
		}
	}
}
