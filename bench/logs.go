package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// logsLineSize is the length of the spewing server's lines (newline
// included): a typical log line.
const logsLineSize = 64

// followBound bounds a follower's start: until it printed what it was
// started to print (its tail, or marker lines appended after).
const followBound = 60 * time.Second

// logsStream: one server under `procfleet up` prints r.logsRate lines a
// second, one write each, for r.window; `procfleet logs -f` and `tail -F`
// follow its log side by side. Each one's CPU from the first line to the
// moment it printed the last, and whether it printed every line once.
func (r *runner) logsStream(ctx context.Context, pm peerMaker) error {
	dir, err := r.peerDir(pm.name, "logs")
	if err != nil {
		return err
	}
	p, ok := pm.make(dir).(*procfleetPeer)
	if !ok {
		return fmt.Errorf("the logs scenario drives procfleet, not %s", pm.name)
	}
	f := newFleet(r.workload, filepath.Join(dir, "stamps"), r.ports[:1])
	f.Servers[0].Name = "spew"
	f.Servers[0].Stamp = filepath.Join(dir, "stamps", "spew.stamp")
	f.Servers[0].Extra = []string{"-spew", strconv.Itoa(r.logsRate), "-spew-for", r.window.String(), "-line", strconv.Itoa(logsLineSize)}
	if err := r.portsFree(ctx, f.Ports()); err != nil {
		return err
	}
	defer r.closePeer(p, f)
	if err := r.startFleet(ctx, p, f, "the start of the printing server"); err != nil {
		return err
	}
	logPath := filepath.Join(p.state, "logs", "spew.log")
	pfc, tc := newSeqCounter(), newSeqCounter()
	pfl, err := startFollower("procfleet logs -f", filepath.Dir(p.fleet), filepath.Join(dir, "logs-f.err"), pfc,
		append([]string{p.bin, "logs", "-f", "--tail", "1", "spew"}, p.logsFlags()...)...)
	if err != nil {
		return err
	}
	defer pfl.Stop()
	tfl, err := startFollower("tail -F", dir, filepath.Join(dir, "tail.err"), tc, "tail", "-n", "1", "-F", logPath)
	if err != nil {
		return err
	}
	defer tfl.Stop()
	if err := pfl.waitFor(ctx, pfc.changed, followBound, "procfleet logs -f to print the server's first line", pfc.isReady); err != nil {
		return err
	}
	if err := tfl.waitFor(ctx, tc.changed, followBound, "tail -F to print the server's first line", tc.isReady); err != nil {
		return fmt.Errorf("floor: %w", err)
	}

	pids, err := f.currentPIDs()
	if err != nil {
		return err
	}
	if !runsProgram(pids[0], r.workload) {
		return fmt.Errorf("spew server: pid %d does not run the workload", pids[0])
	}
	c0 := map[*follower]time.Duration{}
	for _, fl := range []*follower{pfl, tfl} {
		if c0[fl], err = cpuTime(fl.PID()); err != nil {
			return err
		}
	}
	if err := syscall.Kill(pids[0], syscall.SIGUSR1); err != nil {
		return fmt.Errorf("start the spew server (pid %d): %w", pids[0], err)
	}
	r.log.Printf("%s: logs: printing %d lines/s for %s", pm.name, r.logsRate, r.window)
	// Each follower is judged from the first line to the moment it printed
	// the last one, so a follower that falls behind pays for catching up.
	for _, x := range []struct {
		fl     *follower
		c      *seqCounter
		column string
	}{{pfl, pfc, pm.name}, {tfl, tc, peerFloor}} {
		err := x.fl.waitFor(ctx, x.c.changed, r.window+followBound, x.fl.name+" to print the last line", x.c.ended)
		if err != nil {
			r.record([]RowSpec{r.rows.logsCPU, r.rows.logsLost}, x.column, nil, err)
			continue
		}
		c1, err := cpuTime(x.fl.PID())
		if err != nil {
			r.record([]RowSpec{r.rows.logsCPU}, x.column, nil, err)
			continue
		}
		pct := float64(c1-c0[x.fl]) / float64(r.window) * 100
		r.res.Set(r.rows.logsCPU, x.column, pct)
		r.res.Set(r.rows.logsLost, x.column, float64(x.c.lost()))
		r.log.Printf("%s: %.2f%% of a core; %d of %d lines not printed exactly once", x.fl.name, pct, x.c.lost(), x.c.end)
	}
	r.res.Note("9. logs: the server printed %d lines in %s; `up` rotates the log past 10 MiB at its start and every 30 s, so only a window over 30 s is sure to cross a rotation", pfc.end, r.window)
	return nil
}

// followIdle: with the fleet idle, `procfleet logs -f` (no NAME: the whole
// fleet) and `tail -F` of every server's log run side by side; the CPU
// each uses over r.window, once both follow every file.
func (r *runner) followIdle(ctx context.Context, p *procfleetPeer, f Fleet, sr *sizeRows) error {
	fleetDir := filepath.Dir(p.fleet)
	out, err := runCmdIn(ctx, fleetDir, cmdBound, append([]string{p.bin, "logs", "--tail", "0"}, p.logsFlags()...)...)
	if err != nil {
		if strings.Contains(string(out), "arg(s)") {
			return &unsupportedError{what: "`logs` without a NAME (every server of the fleet)"}
		}
		return err
	}
	logs := make([]string, len(f.Servers))
	for i, s := range f.Servers {
		logs[i] = filepath.Join(p.state, "logs", s.Name+".log")
	}
	// Each log's last line is a marker, so that each follower's own tail
	// shows when it has read every file.
	if err := appendMarkers(f, logs, markerWords[0]); err != nil {
		return err
	}
	pfm, tm := newMarkerSet(), newMarkerSet()
	dir := filepath.Dir(fleetDir)
	pfl, err := startFollower("procfleet logs -f", fleetDir, filepath.Join(dir, "logs-f.err"), pfm,
		append([]string{p.bin, "logs", "-f", "--tail", "1"}, p.logsFlags()...)...)
	if err != nil {
		return err
	}
	defer pfl.Stop()
	tfl, err := startFollower("tail -F", dir, filepath.Join(dir, "tail.err"), tm, append([]string{"tail", "-n", "1", "-F"}, logs...)...)
	if err != nil {
		return err
	}
	defer tfl.Stop()
	n := len(f.Servers)
	for _, w := range markerWords {
		if w != markerWords[0] {
			// New lines, once both printed every tail: both follow every
			// file when they have printed these too.
			if err := appendMarkers(f, logs, w); err != nil {
				return err
			}
		}
		if err := pfl.waitFor(ctx, pfm.changed, followBound, fmt.Sprintf("procfleet logs -f to print %d %s lines", n, w), func() bool { return pfm.count(w) == n }); err != nil {
			return err
		}
		if err := tfl.waitFor(ctx, tm.changed, followBound, fmt.Sprintf("tail -F to print %d %s lines", n, w), func() bool { return tm.count(w) == n }); err != nil {
			return fmt.Errorf("floor: %w", err)
		}
	}
	a0, err := cpuTime(pfl.PID())
	if err != nil {
		return err
	}
	b0, err := cpuTime(tfl.PID())
	if err != nil {
		return err
	}
	// A measurement interval, not a wait for an event.
	if err := sleepUntil(ctx, time.Now().Add(r.window)); err != nil {
		return err
	}
	a1, err := cpuTime(pfl.PID())
	if err != nil {
		return err
	}
	b1, err := cpuTime(tfl.PID())
	if err != nil {
		return err
	}
	scale := float64(10*time.Second) / float64(r.window)
	r.res.Set(sr.follow, p.Name(), ms(a1-a0)*scale)
	r.res.Set(sr.follow, peerFloor, ms(b1-b0)*scale)
	r.log.Printf("%s: logs -f of %d idle servers: %.2f ms per 10 s; tail -F %.2f ms", p.Name(), n, ms(a1-a0)*scale, ms(b1-b0)*scale)
	return nil
}

// appendMarkers appends "<word> <server>" to each server's log. The
// workload itself prints nothing, so no line of it is interleaved.
func appendMarkers(f Fleet, logs []string, word string) error {
	for i, s := range f.Servers {
		lf, err := os.OpenFile(logs[i], os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			return fmt.Errorf("append a marker to %s's log: %w", s.Name, err)
		}
		_, werr := fmt.Fprintf(lf, "%s %s\n", word, s.Name)
		if err := errors.Join(werr, lf.Close()); err != nil {
			return fmt.Errorf("append a marker to %s's log: %w", s.Name, err)
		}
	}
	return nil
}
