package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// supervisordPeer runs supervisord in the foreground (-n) as a child of the
// bench, with its own config, unix socket, pidfile and logs in the run's
// folder, and controls it with supervisorctl -c.
type supervisordPeer struct {
	dir  string
	conf string
	d    *daemon
}

func newSupervisordPeer(dir string) *supervisordPeer {
	return &supervisordPeer{dir: dir, conf: filepath.Join(dir, "supervisord.conf")}
}

func (p *supervisordPeer) Name() string { return peerSupervisord }

// supervisordConf renders the config with the fastest documented settings:
// startsecs=0 (RUNNING at once, no start backoff), autorestart=true, and the
// whole process group stopped and killed.
func supervisordConf(dir string, f Fleet) []byte {
	var b bytes.Buffer
	sock := filepath.Join(dir, "supervisor.sock")
	fmt.Fprintf(&b, "[unix_http_server]\nfile=%s\nchmod=0700\n\n", sock)
	fmt.Fprintf(&b, "[supervisord]\nnodaemon=true\nlogfile=%s\npidfile=%s\nchilddir=%s\nchildlogdir=%s\n\n",
		filepath.Join(dir, "supervisord.log"), filepath.Join(dir, "supervisord.pid"), dir, filepath.Join(dir, "logs"))
	b.WriteString("[rpcinterface:supervisor]\nsupervisor.rpcinterface_factory = supervisor.rpcinterface:make_main_rpcinterface\n\n")
	fmt.Fprintf(&b, "[supervisorctl]\nserverurl=unix://%s\n\n", sock)
	for _, s := range f.Servers {
		fmt.Fprintf(&b, "[program:%s]\ncommand=%s %s\n", s.Name, f.Workload, strings.Join(s.Args(), " "))
		b.WriteString("autostart=true\nautorestart=true\nstartsecs=0\nstartretries=3\n")
		b.WriteString("stopsignal=TERM\nstopwaitsecs=10\nstopasgroup=true\nkillasgroup=true\n")
		fmt.Fprintf(&b, "redirect_stderr=true\nstdout_logfile=%s\n\n", filepath.Join(dir, "logs", s.Name+".log"))
	}
	return b.Bytes()
}

func (p *supervisordPeer) ctl(ctx context.Context, args ...string) error {
	_, err := runCmd(ctx, 120*time.Second, nil, append([]string{"supervisorctl", "-c", p.conf}, args...)...)
	if err != nil {
		return fmt.Errorf("supervisord: %w", err)
	}
	return nil
}

func (p *supervisordPeer) Start(_ context.Context, f Fleet) error {
	if err := os.MkdirAll(filepath.Join(p.dir, "logs"), 0o755); err != nil {
		return fmt.Errorf("supervisord: %w", err)
	}
	if err := writeFileAtomic(p.conf, supervisordConf(p.dir, f)); err != nil {
		return fmt.Errorf("supervisord: %w", err)
	}
	d, err := startDaemon("supervisord", []string{"supervisord", "-n", "-c", p.conf}, nil, filepath.Join(p.dir, "supervisord.out"))
	if err != nil {
		return err
	}
	p.d = d
	return nil
}

// Apply saves the config, then `supervisorctl update`: supervisord does not
// read a saved file by itself; update restarts only the changed programs.
func (p *supervisordPeer) Apply(ctx context.Context, f Fleet) error {
	if err := writeFileAtomic(p.conf, supervisordConf(p.dir, f)); err != nil {
		return fmt.Errorf("supervisord: %w", err)
	}
	return p.ctl(ctx, "update")
}

func (p *supervisordPeer) PrepareStop(context.Context) error { return nil }

func (p *supervisordPeer) StopAll(ctx context.Context) error { return p.ctl(ctx, "stop", "all") }

func (p *supervisordPeer) SupervisorPID() (int, error) {
	if p.d == nil {
		return 0, errors.New("supervisord is not running")
	}
	return p.d.PID(), nil
}

func (p *supervisordPeer) Err() error {
	if p.d == nil {
		return nil
	}
	return p.d.Err()
}

// Close sends SIGTERM: supervisord stops its programs, then exits.
func (p *supervisordPeer) Close(context.Context) error {
	if p.d == nil {
		return nil
	}
	err := p.d.Stop(syscall.SIGTERM, 30*time.Second)
	p.d = nil
	return err
}
