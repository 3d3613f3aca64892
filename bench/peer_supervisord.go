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
	supervisordHeader(&b, dir, len(f.Servers))
	for _, s := range f.Servers {
		fmt.Fprintf(&b, "[program:%s]\ncommand=%s %s\n", s.Name, f.Workload, strings.Join(s.Args(), " "))
		supervisordProgram(&b, dir, s.Name)
	}
	return b.Bytes()
}

// supervisordScaledConf renders s as one program of s.Replicas processes
// (numprocs): numprocs_start is the first port, so each process's number
// is its port.
func supervisordScaledConf(dir string, s ScaledServer) []byte {
	var b bytes.Buffer
	supervisordHeader(&b, dir, s.Replicas)
	fmt.Fprintf(&b, "[program:%s]\ncommand=%s -port %%(process_num)d -stamp-dir %s\n", s.Name, s.Workload, s.StampDir)
	fmt.Fprintf(&b, "process_name=%%(program_name)s_%%(process_num)d\nnumprocs=%d\nnumprocs_start=%d\n", s.Replicas, s.Base)
	supervisordProgram(&b, dir, "%(program_name)s_%(process_num)d")
	return b.Bytes()
}

// supervisordHeader writes the sections every config has. supervisord
// keeps three descriptors per process and refuses to start below minfds.
func supervisordHeader(b *bytes.Buffer, dir string, n int) {
	sock := filepath.Join(dir, "supervisor.sock")
	fmt.Fprintf(b, "[unix_http_server]\nfile=%s\nchmod=0700\n\n", sock)
	fmt.Fprintf(b, "[supervisord]\nnodaemon=true\nlogfile=%s\npidfile=%s\nchilddir=%s\nchildlogdir=%s\nminfds=%d\nminprocs=%d\n\n",
		filepath.Join(dir, "supervisord.log"), filepath.Join(dir, "supervisord.pid"), dir, filepath.Join(dir, "logs"),
		max(1024, 4*n+64), max(200, n+200))
	b.WriteString("[rpcinterface:supervisor]\nsupervisor.rpcinterface_factory = supervisor.rpcinterface:make_main_rpcinterface\n\n")
	fmt.Fprintf(b, "[supervisorctl]\nserverurl=unix://%s\n\n", sock)
}

// supervisordProgram writes a program section's settings after its
// command; logName names its log file.
func supervisordProgram(b *bytes.Buffer, dir, logName string) {
	b.WriteString("autostart=true\nautorestart=true\nstartsecs=0\nstartretries=3\n")
	b.WriteString("stopsignal=TERM\nstopwaitsecs=10\nstopasgroup=true\nkillasgroup=true\n")
	fmt.Fprintf(b, "redirect_stderr=true\nstdout_logfile=%s\n\n", filepath.Join(dir, "logs", logName+".log"))
}

func (p *supervisordPeer) ctl(ctx context.Context, args ...string) error {
	_, err := runCmd(ctx, cmdBound, nil, append([]string{"supervisorctl", "-c", p.conf}, args...)...)
	if err != nil {
		return fmt.Errorf("supervisord: %w", err)
	}
	return nil
}

func (p *supervisordPeer) Start(_ context.Context, f Fleet) error {
	return p.start(supervisordConf(p.dir, f))
}

func (p *supervisordPeer) start(conf []byte) error {
	if err := os.MkdirAll(filepath.Join(p.dir, "logs"), 0o755); err != nil {
		return fmt.Errorf("supervisord: %w", err)
	}
	if err := writeFileAtomic(p.conf, conf); err != nil {
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

// StartScaled starts supervisord with s as one program of numprocs
// processes.
func (p *supervisordPeer) StartScaled(_ context.Context, s ScaledServer) error {
	return p.start(supervisordScaledConf(p.dir, s))
}

// Scale saves the config with the new numprocs and runs `supervisorctl
// update`, the documented way to apply it.
func (p *supervisordPeer) Scale(ctx context.Context, s ScaledServer) error {
	if err := writeFileAtomic(p.conf, supervisordScaledConf(p.dir, s)); err != nil {
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
