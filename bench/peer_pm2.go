package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// pm2Peer drives PM2 with a private PM2_HOME in the run's folder and an
// ecosystem file written by the bench. PM2 daemonizes (its "God daemon"),
// so the daemon's pid comes from PM2_HOME/pm2.pid.
type pm2Peer struct {
	bin  string // node_modules/.bin/pm2
	dir  string
	home string
	eco  string
	pid  int // daemon pid once started
}

func newPM2Peer(bin, dir string) *pm2Peer {
	return &pm2Peer{
		bin:  bin,
		dir:  dir,
		home: filepath.Join(dir, "pm2home"),
		eco:  filepath.Join(dir, "ecosystem.config.js"),
	}
}

func (p *pm2Peer) Name() string { return peerPM2 }

// pm2App is one entry of the ecosystem file. Fastest documented settings:
// fork mode running the binary directly (interpreter none), restart_delay 0,
// no exponential backoff, and min_uptime/max_restarts such that a series of
// kills never marks the app errored.
type pm2App struct {
	Name         string   `json:"name"`
	Script       string   `json:"script"`
	Args         []string `json:"args"`
	Interpreter  string   `json:"interpreter"`
	ExecMode     string   `json:"exec_mode"`
	Autorestart  bool     `json:"autorestart"`
	RestartDelay int      `json:"restart_delay"`
	MinUptime    int      `json:"min_uptime"`
	MaxRestarts  int      `json:"max_restarts"`
	Watch        bool     `json:"watch"`
	KillTimeout  int      `json:"kill_timeout"`
	OutFile      string   `json:"out_file"`
	ErrorFile    string   `json:"error_file"`
	PidFile      string   `json:"pid_file"`
	MergeLogs    bool     `json:"merge_logs"`
	// The scale scenario's app: instances, each with PORT one more than
	// the last (increment_var, which `pm2 scale` applies too).
	Instances    int               `json:"instances,omitempty"`
	IncrementVar string            `json:"increment_var,omitempty"`
	Env          map[string]string `json:"env,omitempty"`
}

func pm2Ecosystem(dir string, f Fleet) ([]byte, error) {
	apps := make([]pm2App, 0, len(f.Servers))
	for _, s := range f.Servers {
		apps = append(apps, newPM2App(dir, s.Name, f.Workload, s.Args()))
	}
	return renderEcosystem(apps)
}

// pm2ScaledEcosystem renders s as one app of s.Replicas instances in fork
// mode, PORT counted up from s.Base.
func pm2ScaledEcosystem(dir string, s ScaledServer) ([]byte, error) {
	app := newPM2App(dir, s.Name, s.Workload, []string{"-port-env", "PORT", "-stamp-dir", s.StampDir})
	app.Instances = s.Replicas
	app.IncrementVar = "PORT"
	app.Env = map[string]string{"PORT": strconv.Itoa(s.Base)}
	return renderEcosystem([]pm2App{app})
}

func newPM2App(dir, name, script string, args []string) pm2App {
	return pm2App{
		Name: name, Script: script, Args: args,
		Interpreter: "none", ExecMode: "fork",
		Autorestart: true, RestartDelay: 0, MinUptime: 100, MaxRestarts: 1000000,
		Watch: false, KillTimeout: 10000,
		OutFile:   filepath.Join(dir, "logs", name+".log"),
		ErrorFile: filepath.Join(dir, "logs", name+".log"),
		PidFile:   filepath.Join(dir, "logs", name+".pid"),
		MergeLogs: true,
	}
}

func renderEcosystem(apps []pm2App) ([]byte, error) {
	js, err := json.MarshalIndent(map[string]any{"apps": apps}, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("pm2: render ecosystem: %w", err)
	}
	return append(append([]byte("module.exports = "), js...), ";\n"...), nil
}

func (p *pm2Peer) env() []string {
	return []string{"PM2_HOME=" + p.home, "FORCE_COLOR=0", "NO_COLOR=1"}
}

func (p *pm2Peer) run(ctx context.Context, args ...string) error {
	_, err := runCmd(ctx, cmdBound, p.env(), append([]string{p.bin}, args...)...)
	if err != nil {
		return fmt.Errorf("pm2: %w", err)
	}
	return nil
}

func (p *pm2Peer) writeEco(f Fleet) error {
	eco, err := pm2Ecosystem(p.dir, f)
	if err != nil {
		return err
	}
	if err := writeFileAtomic(p.eco, eco); err != nil {
		return fmt.Errorf("pm2: %w", err)
	}
	return nil
}

// Start runs `pm2 start ecosystem.config.js`, which also starts the daemon.
func (p *pm2Peer) Start(ctx context.Context, f Fleet) error {
	eco, err := pm2Ecosystem(p.dir, f)
	if err != nil {
		return err
	}
	return p.start(ctx, eco)
}

// StartScaled starts s as one app of s.Replicas instances.
func (p *pm2Peer) StartScaled(ctx context.Context, s ScaledServer) error {
	eco, err := pm2ScaledEcosystem(p.dir, s)
	if err != nil {
		return err
	}
	return p.start(ctx, eco)
}

// Scale runs `pm2 scale NAME N`.
func (p *pm2Peer) Scale(ctx context.Context, s ScaledServer) error {
	return p.run(ctx, "scale", s.Name, strconv.Itoa(s.Replicas))
}

func (p *pm2Peer) start(ctx context.Context, eco []byte) error {
	if err := os.MkdirAll(filepath.Join(p.dir, "logs"), 0o755); err != nil {
		return fmt.Errorf("pm2: %w", err)
	}
	if err := writeFileAtomic(p.eco, eco); err != nil {
		return fmt.Errorf("pm2: %w", err)
	}
	err := p.run(ctx, "start", p.eco)
	if pid, perr := p.daemonPID(); perr == nil {
		p.pid = pid
	} else if err == nil {
		err = perr
	}
	return err
}

func (p *pm2Peer) daemonPID() (int, error) {
	data, err := os.ReadFile(filepath.Join(p.home, "pm2.pid"))
	if err != nil {
		return 0, fmt.Errorf("pm2: daemon pid: %w", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		return 0, fmt.Errorf("pm2: daemon pid: %w", err)
	}
	return pid, nil
}

// Apply saves the ecosystem file and runs `pm2 startOrRestart` on it, the
// documented way to apply a changed ecosystem file; PM2 does not watch it.
func (p *pm2Peer) Apply(ctx context.Context, f Fleet) error {
	if err := p.writeEco(f); err != nil {
		return err
	}
	return p.run(ctx, "startOrRestart", p.eco)
}

func (p *pm2Peer) PrepareStop(context.Context) error { return nil }

func (p *pm2Peer) StopAll(ctx context.Context) error { return p.run(ctx, "stop", "all") }

func (p *pm2Peer) SupervisorPID() (int, error) {
	if p.pid == 0 {
		return 0, errors.New("pm2 daemon is not running")
	}
	return p.pid, nil
}

func (p *pm2Peer) Err() error {
	if p.pid != 0 && processGone(p.pid) {
		return fmt.Errorf("pm2 daemon (pid %d) exited (log %s)", p.pid, filepath.Join(p.home, "pm2.log"))
	}
	return nil
}

// isPM2Daemon reports whether pid is this run's PM2 daemon (its command
// line names PM2 and this run's PM2_HOME).
func (p *pm2Peer) isPM2Daemon(pid int) bool {
	argv, err := readCmdline(pid)
	if err != nil {
		return false
	}
	cl := strings.Join(argv, " ")
	return strings.Contains(cl, "PM2") && strings.Contains(cl, p.home)
}

// Close runs `pm2 kill`, then makes sure the daemon is gone (SIGKILL by pid
// after checking its command line).
func (p *pm2Peer) Close(ctx context.Context) error {
	var errs []error
	if _, err := os.Stat(filepath.Join(p.home, "pm2.pid")); err == nil {
		if err := p.run(ctx, "kill"); err != nil {
			errs = append(errs, err)
		}
	}
	if p.pid != 0 {
		// pm2 kill returns before the daemon has exited: give it a bound.
		gctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := waitStopped(gctx, []int{p.pid}, nil)
		cancel()
		if err != nil && p.isPM2Daemon(p.pid) {
			_ = syscall.Kill(p.pid, syscall.SIGKILL)
			errs = append(errs, fmt.Errorf("pm2: daemon pid %d still running 5 s after pm2 kill; sent SIGKILL", p.pid))
			kctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			if _, err := waitStopped(kctx, []int{p.pid}, nil); err != nil {
				errs = append(errs, fmt.Errorf("pm2: %w", err))
			}
			cancel()
		}
		p.pid = 0
	}
	return errors.Join(errs...)
}
