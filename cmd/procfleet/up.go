package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"

	"github.com/procfleet/procfleet/actuate"
	"github.com/procfleet/procfleet/internal/api"
	"github.com/procfleet/procfleet/internal/dashboard"
	"github.com/procfleet/procfleet/reconciler"
	"github.com/procfleet/procfleet/spec"
)

// downOnExitTimeout bounds `up --down-on-exit`'s final stop.
const downOnExitTimeout = 5 * time.Minute

func newUpCmd(opts *globalOptions) *cobra.Command {
	var downOnExit, attach bool
	var metricsAddr, uiAddr string
	cmd := &cobra.Command{
		Use:   "up [-f PATH]... [--attach] [--down-on-exit] [--metrics-addr ADDR] [--ui ADDR]",
		Short: "Run the reconciler in the foreground: converge, watch the files, restart what dies",
		Long: `Up keeps the servers of the fleet files in their declared state until it is
stopped: it adopts the servers its records prove it owns (never starting a
second copy), starts what is missing (dependencies first), restarts what
exits as restartPolicy says (at once; a crash loop, exits within 10 s of
Ready, backs off from 1 s doubling to 60 s), replaces a server whose command, args, env, workingDir or port
changed, stops a server removed from the files, and re-reads the files when
they are saved. A file that does not load keeps the last good fleet running
and shows its errors. It rotates the servers' logs at 10 MiB (keeping 3)
as it starts and at every resync (30 s); nothing rotates while no up runs.
While it runs, apply, down, status and describe go through its socket
(procfleet.sock in the state folder).

With --attach it also prints every server's output on stdout, as
'procfleet logs -f' does: "name | " before each line, a line at each start.

With --ui ADDR it also serves the live dashboard on that loopback address
and prints its URL, which holds a secret token, once; 'procfleet ui' prints
it again.

On SIGINT or SIGTERM up exits 0 and leaves the servers running; the next up
adopts them, and 'procfleet down' stops them. With --down-on-exit it stops
them first. A second signal ends it at once.

Only one up runs per state folder: a second one fails at once, naming the
pid of the first.`,
		Example: `  # Run the fleet of procfleet.yaml until Ctrl-C
  procfleet up

  # Also print the servers' output, prefixed by their names
  procfleet up --attach

  # A folder of fleet files; stop everything on exit
  procfleet up -f fleet.d --down-on-exit

  # Serve Prometheus metrics (loopback only) while it runs
  procfleet up --metrics-addr 127.0.0.1:9464

  # Serve the live dashboard (loopback only); it prints the URL to open
  procfleet up --ui 127.0.0.1:7070`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var stdout io.Writer
			if attach {
				stdout = cmd.OutOrStdout()
			}
			return runUp(cmd.Context(), opts, stdout, cmd.ErrOrStderr(), downOnExit, metricsAddr, uiAddr)
		},
	}
	opts.addFileFlags(cmd)
	cmd.Flags().BoolVar(&attach, "attach", false, `also print every server's output on stdout, each line after "name | "`)
	cmd.Flags().BoolVar(&downOnExit, "down-on-exit", false, "stop every server before exiting on SIGINT or SIGTERM")
	cmd.Flags().StringVar(&metricsAddr, "metrics-addr", "", metricsAddrFlag)
	cmd.Flags().StringVar(&uiAddr, "ui", "", uiAddrFlag)
	return cmd
}

// runUp runs up; with attach set (non-nil) the servers' output goes there.
func runUp(ctx context.Context, opts *globalOptions, attach, stderr io.Writer, downOnExit bool, metricsAddr, uiAddr string) error {
	defer upRuntime()()
	// The files first: up with no fleet file, or with files that do not
	// load, fails before it creates or locks anything. The reconciler's
	// watcher reads them on with the same loader, which decodes again only
	// what changed since.
	loader := new(spec.Loader)
	if _, err := loader.Load(opts.FleetPaths()...); err != nil {
		return fleetError("up", err)
	}
	if uiAddr != "" {
		if _, err := dashboard.CheckAddr(uiAddr); err != nil {
			return fmt.Errorf("up: --ui: %w", err)
		}
	}
	sd, release, err := openLocked(opts, "up")
	if err != nil {
		return err
	}
	defer func() { _ = release() }()
	metrics, stopMetrics, err := startMetrics(metricsAddr, stderr)
	if err != nil {
		return err
	}
	defer stopMetrics()
	log := opts.Logger()
	progress := newProgress(opts, stderr)
	files := strings.Join(opts.FleetPaths(), ", ")
	var ui *servedUI
	r, err := reconciler.New(reconciler.Config{
		Files: opts.FleetPaths(), Loader: loader, StateDir: sd, Log: log.WithName("reconciler"), OnEvent: progress.event,
		Metrics: metrics,
		OnRunning: func() {
			progress.say(fmt.Sprintf("procfleet up (pid %d): watching %s; state in %s; Ctrl-C leaves the servers running", os.Getpid(), files, sd.Path),
				"Watching", "pid", os.Getpid(), "files", opts.FleetPaths(), "stateDir", sd.Path)
			if ui != nil {
				progress.say("procfleet up: dashboard at "+ui.url+" (procfleet ui prints it again)", "Dashboard", "url", ui.url)
			}
		},
	})
	if err != nil {
		return err
	}
	if uiAddr != "" {
		if ui, err = listenUI(uiAddr, r, log); err != nil {
			return err
		}
	}
	if attach != nil {
		stopAttach, err := startAttach(r, sd, attach, colorsWanted(opts, attach), log.WithName("attach"))
		if err != nil {
			return err
		}
		defer stopAttach()
	}
	// The socket: apply, down, status and describe talk to this up through
	// it. Without it they say up holds the state folder.
	ctx, cancel := context.WithCancel(ctx)
	var served sync.WaitGroup
	defer served.Wait()
	defer cancel()
	if l, err := api.Listen(sd.SocketPath(), log.WithName("api")); err != nil {
		log.Error(err, "Cannot serve the API; apply, down and status will not reach this up")
	} else {
		srv := &api.Server{Backend: r.APIBackend(), Log: log.WithName("api")}
		if ui != nil {
			srv.DashboardURL = ui.url
		}
		served.Go(func() {
			if err := srv.Serve(ctx, l); err != nil {
				log.Error(err, "API stopped")
			}
		})
	}
	if ui != nil {
		served.Go(func() {
			if err := ui.serve(ctx); err != nil {
				log.Error(err, "Dashboard stopped")
			}
		})
	}
	if err := r.Run(ctx); err != nil {
		return fleetError("up", err)
	}
	cancel()
	served.Wait()
	if !downOnExit {
		running := 0
		for _, s := range r.Status().Servers {
			if s.PID != 0 && s.Phase != reconciler.PhaseQuarantined {
				running++
			}
		}
		if running == 0 {
			progress.say("procfleet up: exiting; no server is running", "Exiting", "running", 0)
			return nil
		}
		progress.say(fmt.Sprintf("procfleet up: exiting; %d server(s) left running (the next 'procfleet up' adopts them; 'procfleet down' stops them)", running),
			"Exiting; servers left running", "running", running)
		return nil
	}
	progress.say("procfleet up: stopping every server (--down-on-exit; signal again to exit at once and leave the rest running)", "Stopping every server", "reason", "--down-on-exit")
	dctx, cancel := context.WithTimeout(context.Background(), downOnExitTimeout)
	defer cancel()
	err = reconciler.Down(dctx, reconciler.DownConfig{
		Files: opts.FleetPaths(), StateDir: sd, Log: log.WithName("down"), OnEvent: progress.event,
	}, nil)
	if err != nil {
		return fmt.Errorf("up --down-on-exit: %w", err)
	}
	return nil
}

// openLocked opens the state folder and takes its lock for command. When
// another process holds it, the error names that pid.
func openLocked(opts *globalOptions, command string) (*actuate.StateDir, func() error, error) {
	path, err := opts.StateDirPath()
	if err != nil {
		return nil, nil, err
	}
	sd, err := actuate.OpenStateDir(path)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", command, err)
	}
	release, err := sd.Lock()
	if err != nil {
		var le *actuate.LockedError
		if errors.As(err, &le) {
			// sd is returned with the error: the caller may talk to the
			// holder through its socket.
			return sd, nil, lockedError(command, le, path)
		}
		return nil, nil, fmt.Errorf("%s: %w", command, err)
	}
	return sd, release, nil
}

// upClient dials the socket of the `up` that holds the state folder, after
// openLocked found it locked. It returns nil when nobody answers there.
func upClient(ctx context.Context, sd *actuate.StateDir) *api.Client {
	dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	c, err := api.Dial(dctx, sd.SocketPath())
	if err != nil {
		return nil
	}
	return c
}

// isLocked reports whether err is openLocked's "held by another process".
func isLocked(err error) bool {
	var le *actuate.LockedError
	return errors.As(err, &le)
}

func lockedError(command string, le *actuate.LockedError, path string) error {
	holder := "another procfleet process"
	if le.PID > 0 {
		holder = fmt.Sprintf("procfleet (pid %d)", le.PID)
	}
	switch command {
	case "up":
		return fmt.Errorf("up: %s already acts on the state folder %s (is 'procfleet up' running?): %w", holder, path, le)
	default:
		return fmt.Errorf("%s: %s holds the state folder %s and does not answer on its socket; try again once it has started, or stop it: %w", command, holder, path, le)
	}
}

// fleetError prints a fleet's load errors one a line, file and line first.
func fleetError(command string, err error) error {
	var list spec.ErrorList
	if errors.As(err, &list) {
		return fmt.Errorf("%s: the fleet files do not load:\n%w", command, list)
	}
	return fmt.Errorf("%s: %w", command, err)
}

// progress reports what happens on stderr: one line per server event
// ("api: starting", "api: ready in 0.41s (pid 123)") and the command's own
// notes. With JSON logs (--log-format json, or auto when stderr is not a
// terminal) each is a JSON log entry instead, so that stderr holds one JSON
// object a line and nothing else.
type progress struct {
	mu      sync.Mutex
	w       io.Writer
	verbose bool
	// log is set for JSON logs.
	log *logr.Logger
}

func newProgress(opts *globalOptions, w io.Writer) *progress {
	p := &progress{w: w, verbose: opts.Verbosity > 0}
	if opts.jsonLogs() {
		l := opts.Logger().WithName("progress")
		p.log = &l
	}
	return p
}

func (p *progress) event(e reconciler.Event) {
	if e.Detail && !p.verbose {
		return
	}
	if p.log != nil {
		p.log.Info("Event", "server", e.Server, "type", e.Type, "reason", e.Reason, "message", e.Message)
		return
	}
	msg := e.Message
	if e.Reason == reconciler.ReasonQuarantined && !strings.HasPrefix(msg, "quarantined") {
		msg = "quarantined: " + msg
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.w, "%s: %s\n", e.Server, msg)
}

// say writes a note: text as given, or with JSON logs msg with kv.
func (p *progress) say(text, msg string, kv ...any) {
	if p.log != nil {
		p.log.Info(msg, kv...)
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintln(p.w, text)
}
