package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// ServerDef is one workload server of a fleet.
type ServerDef struct {
	Name  string
	Port  int
	Stamp string // stamp file
	Gen   int    // generation; the edit scenario bumps it
	Extra []string
}

// Args returns the workload's flags for s.
func (s ServerDef) Args() []string {
	return append([]string{"-port", strconv.Itoa(s.Port), "-stamp", s.Stamp, "-gen", strconv.Itoa(s.Gen)}, s.Extra...)
}

// Fleet is what every peer is told to run.
type Fleet struct {
	Workload string // absolute path of the workload binary
	Servers  []ServerDef
}

// newFleet declares n servers on ports, with stamp files in stampDir.
func newFleet(workload, stampDir string, ports []int) Fleet {
	f := Fleet{Workload: workload}
	for i, p := range ports {
		name := fmt.Sprintf("s%03d", i)
		f.Servers = append(f.Servers, ServerDef{
			Name: name, Port: p, Gen: 1,
			Stamp: filepath.Join(stampDir, name+".stamp"),
		})
	}
	return f
}

// Ports returns the servers' ports.
func (f Fleet) Ports() []int {
	out := make([]int, len(f.Servers))
	for i, s := range f.Servers {
		out[i] = s.Port
	}
	return out
}

// stampCounts returns how many instances each server has started so far.
func (f Fleet) stampCounts() (map[string]int, error) {
	out := map[string]int{}
	for _, s := range f.Servers {
		st, err := readStamps(s.Stamp)
		if err != nil {
			return nil, err
		}
		out[s.Name] = len(st)
	}
	return out, nil
}

// currentPIDs returns each server's latest instance pid (from its stamp).
func (f Fleet) currentPIDs() ([]int, error) {
	var out []int
	for _, s := range f.Servers {
		st, err := readStamps(s.Stamp)
		if err != nil {
			return nil, err
		}
		if len(st) == 0 {
			return nil, fmt.Errorf("server %s has no stamp", s.Name)
		}
		out = append(out, st[len(st)-1].PID)
	}
	return out, nil
}

// killWorkloads SIGKILLs every instance recorded in the fleet's stamp files
// that still runs the workload binary (checked by command line, so a reused
// pid is never signalled), then waits until they are gone and the ports
// free. It is the safety net after a peer's own shutdown.
func (f Fleet) killWorkloads(ctx context.Context) (int, error) {
	var pids []int
	killed := 0
	for _, s := range f.Servers {
		st, err := readStamps(s.Stamp)
		if err != nil {
			return killed, err
		}
		for _, x := range st {
			pids = append(pids, x.PID)
			if killIfRunning(x.PID, f.Workload) {
				killed++
			}
		}
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := waitStopped(ctx, pids, f.Ports()); err != nil {
		return killed, fmt.Errorf("clean up workload processes: %w", err)
	}
	return killed, nil
}

// killIfRunning sends SIGKILL to pid when it is alive and its argv[0] is
// program; it reports whether it signalled.
func killIfRunning(pid int, program string) bool {
	if !runsProgram(pid, program) {
		return false
	}
	return syscall.Kill(pid, syscall.SIGKILL) == nil
}

// runsProgram reports whether pid is alive and its argv[0] is program: a
// pid from a stamp file is never taken for the workload on its number
// alone, since the number may have been reused.
func runsProgram(pid int, program string) bool {
	if processGone(pid) {
		return false
	}
	argv, err := readCmdline(pid)
	return err == nil && len(argv) > 0 && argv[0] == program
}

// daemon is a long-running child of the bench (procfleet up, supervisord),
// in its own process group so the terminal's Ctrl-C reaches only the bench.
type daemon struct {
	name string
	cmd  *exec.Cmd
	log  *os.File
	done chan struct{}
	mu   sync.Mutex
	err  error // set when it exited
}

func startDaemon(name string, argv, env []string, logPath string) (*daemon, error) {
	lf, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = lf, lf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		lf.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	d := &daemon{name: name, cmd: cmd, log: lf, done: make(chan struct{})}
	go func() {
		err := cmd.Wait()
		d.mu.Lock()
		if err == nil {
			err = errors.New("exited with code 0")
		}
		d.err = fmt.Errorf("%s (pid %d) exited: %w (log %s)", name, cmd.Process.Pid, err, logPath)
		d.mu.Unlock()
		lf.Close()
		close(d.done)
	}()
	return d, nil
}

func (d *daemon) PID() int { return d.cmd.Process.Pid }

// ExitCode is the exit code once the daemon has exited (-1 when killed by
// a signal, or still running).
func (d *daemon) ExitCode() int {
	select {
	case <-d.done:
		return d.cmd.ProcessState.ExitCode()
	default:
		return -1
	}
}

// Err is non-nil once the daemon has exited.
func (d *daemon) Err() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.err
}

// Stop sends sig and waits up to grace for the exit, then SIGKILLs and
// waits again. Signals go through os.Process, which cannot reach a reused
// pid while the child is unreaped.
func (d *daemon) Stop(sig syscall.Signal, grace time.Duration) error {
	select {
	case <-d.done:
		return nil
	default:
	}
	if err := d.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("stop %s: %w", d.name, err)
	}
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-d.done:
		return nil
	case <-t.C:
	}
	if err := d.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("kill %s: %w", d.name, err)
	}
	t2 := time.NewTimer(10 * time.Second)
	defer t2.Stop()
	select {
	case <-d.done:
		return fmt.Errorf("stop %s: did not exit within %s of %s; killed", d.name, grace, sig)
	case <-t2.C:
		return fmt.Errorf("stop %s: still running 10s after SIGKILL", d.name)
	}
}

// runCmd runs a short command with a deadline and returns its combined
// output, wrapping failures with the output's tail.
func runCmd(ctx context.Context, timeout time.Duration, env []string, argv ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), env...)
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("run %s: %w: %s", filepath.Base(argv[0])+" "+joinArgs(argv[1:]), err, tail(out, 600))
	}
	return out, nil
}

func joinArgs(a []string) string {
	s := ""
	for i, x := range a {
		if i > 0 {
			s += " "
		}
		s += x
	}
	return s
}

func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// writeFileAtomic writes data to path through a temp file and a rename, as
// editors do.
func writeFileAtomic(path string, data []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
