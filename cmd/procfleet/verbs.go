package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/procfleet/procfleet/internal/api"
	"github.com/procfleet/procfleet/reconciler"
	"github.com/procfleet/procfleet/spec"
)

// verbOptions are the flags of stop, start and restart.
type verbOptions struct {
	noWait  bool
	timeout time.Duration
}

func newStopCmd(opts *globalOptions) *cobra.Command {
	var vo verbOptions
	cmd := &cobra.Command{
		Use:   "stop NAME... [-f PATH]...",
		Short: "Stop servers and keep them stopped until start, restart or apply",
		Long: `Stop stops the named servers, dependents first (when several are named),
independent ones in parallel, each with the full stop sequence: SIGTERM to
its process group, terminationGracePeriodSeconds, SIGKILL, and a wait until
its port is free. It signals only processes it proves are procfleet's.

The servers stay stopped, with or without a running up, until 'procfleet
start' or 'restart' names them, 'procfleet apply' runs, or a change to their
fleet file or env files: status shows them Stopped / StoppedByUser. The stop
is kept in the state folder (held.json), so an up started later, or
restarted, keeps them stopped too. 'procfleet down NAME' does the same.
Servers that depend on a stopped one are not stopped.

While 'procfleet up' runs on the state folder, stop asks it through its
socket; otherwise it acts by itself.

Exit status: 0 when every named server is stopped; 1 naming each one that
could not be (a quarantined one included, with how to stop it by hand).`,
		Example: `  # Stop the api; it stays stopped under a running up
  procfleet stop api

  # Later: start it again (and what it depends on)
  procfleet start api`,
		Args:              verbArgs("stop"),
		ValidArgsFunction: completeServerNames(opts, 0),
		RunE: func(cmd *cobra.Command, names []string) error {
			return runVerb(cmd.Context(), opts, reconciler.VerbStop, names, vo, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	opts.addFileFlags(cmd)
	return cmd
}

func newStartCmd(opts *globalOptions) *cobra.Command {
	var vo verbOptions
	cmd := &cobra.Command{
		Use:   "start NAME... [-f PATH]... [--no-wait] [--timeout D]",
		Short: "Lift a stop and start servers, dependencies first, and wait until Ready",
		Long: `Start lifts the stop of the named servers (procfleet stop, down NAME) and of
the servers they depend on (dependsOn, transitively), and starts each of
them that is not running, dependencies first, at once: a server that
exited under restartPolicy Never or OnFailure, that apply gave up on, or
that waits in CrashLoopBackOff is started afresh. A server that runs is
left as it is (restart replaces it). Other servers are not touched.

It waits as 'procfleet apply --wait' does: until every one of them is
Ready, giving up on one at once when it is Failed or Quarantined or has
exited twice before it was Ready (naming the exit and its log tail). With
--no-wait it returns once the start is taken (without up: once the
processes are spawned).

While 'procfleet up' runs on the state folder, start asks it through its
socket; otherwise it acts by itself (and its servers keep running when it
exits, as with apply).

Exit status: 0 when every server is Ready (with --no-wait: started); 1
naming each one that is not, and why.`,
		Example: `  # Start the api and what it depends on, wait until Ready
  procfleet start api

  # Start two servers, do not wait
  procfleet start api worker --no-wait`,
		Args:              verbArgs("start"),
		ValidArgsFunction: completeServerNames(opts, 0),
		RunE: func(cmd *cobra.Command, names []string) error {
			return runVerb(cmd.Context(), opts, reconciler.VerbStart, names, vo, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	opts.addFileFlags(cmd)
	cmd.Flags().BoolVar(&vo.noWait, "no-wait", false, "return once the start is taken, without waiting for Ready")
	cmd.Flags().DurationVar(&vo.timeout, "timeout", defaultApplyTimeout, "give up waiting after `D` (like 90s or 2m)")
	return cmd
}

func newRestartCmd(opts *globalOptions) *cobra.Command {
	var vo verbOptions
	cmd := &cobra.Command{
		Use:   "restart NAME... [-f PATH]... [--timeout D]",
		Short: "Replace servers now (graceful stop, port released, start, Ready), spec unchanged",
		Long: `Restart replaces each named server now, with its spec unchanged: it stops
the running process with the full stop sequence (SIGTERM to its process
group, terminationGracePeriodSeconds, SIGKILL, its port released), starts
it again and waits until it is Ready. The restart count resets and a crash
backoff is skipped. A server that is not running is started; a stop (procfleet
stop) is lifted, of it and of what it depends on, as start does. Servers
that depend on it are not restarted.

A quarantined server refuses restart and says why: procfleet never signals
a process it cannot prove it owns ('procfleet describe NAME' says how to
stop it by hand).

While 'procfleet up' runs on the state folder, restart asks it through its
socket; otherwise it acts by itself.

Exit status: 0 when every server is back and Ready; 1 naming each one that
is not (a refusal, a start that failed, with its exit and log tail).`,
		Example: `  # Pick up a rebuilt binary
  go build -o bin/api ./cmd/api && procfleet restart api`,
		Args:              verbArgs("restart"),
		ValidArgsFunction: completeServerNames(opts, 0),
		RunE: func(cmd *cobra.Command, names []string) error {
			return runVerb(cmd.Context(), opts, reconciler.VerbRestart, names, vo, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	opts.addFileFlags(cmd)
	cmd.Flags().DurationVar(&vo.timeout, "timeout", defaultApplyTimeout, "give up waiting after `D` (like 90s or 2m)")
	return cmd
}

// verbArgs wants at least one server name, each a DNS label.
func verbArgs(verb string) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		if len(args) == 0 {
			hint := ""
			if verb == "stop" {
				hint = " (to stop every server: procfleet down)"
			}
			return &exitError{code: exitFailure, err: fmt.Errorf("%s: name at least one server%s", verb, hint)}
		}
		for _, n := range args {
			if err := api.CheckName(n); err != nil {
				return &exitError{code: exitFailure, err: fmt.Errorf("%s: %w", verb, err)}
			}
		}
		return nil
	}
}

// runVerb carries out stop, start or restart: through a running up's
// socket when one holds the state folder, else by itself under the lock.
func runVerb(ctx context.Context, opts *globalOptions, verb reconciler.Verb, names []string, vo verbOptions, stdout, stderr io.Writer) error {
	if vo.timeout < 0 {
		return fmt.Errorf("%s: --timeout must be positive, got %s", verb, vo.timeout)
	}
	fleet, _ := spec.Load(opts.FleetPaths()...) // without files: names as typed, checked by the reconciler
	sd, release, err := openLocked(opts, verb.String())
	if isLocked(err) {
		if c := upClient(ctx, sd); c != nil {
			defer c.Close()
			names, err := expandNames(names, fleet, upNames(ctx, c))
			if err != nil {
				return fmt.Errorf("%s: %w", verb, err)
			}
			return verbThroughUp(ctx, c, verb, names, vo, stdout)
		}
	}
	if err != nil {
		return err
	}
	defer func() { _ = release() }()
	names, err = expandNames(names, fleet, recordNames(sd.Path))
	if err != nil {
		return fmt.Errorf("%s: %w", verb, err)
	}
	if len(names) == 0 {
		fmt.Fprintf(stdout, "%s: nothing to do (no instance: replicas is 0)\n", verb)
		return nil
	}
	progress := newProgress(opts, stderr)
	r, err := reconciler.New(reconciler.Config{
		Files: opts.FleetPaths(), StateDir: sd, Log: opts.Logger().WithName("reconciler"),
		OnEvent: progress.event, OneShot: true, ResyncPeriod: -1,
	})
	if err != nil {
		return err
	}
	if verb != reconciler.VerbStop {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, vo.timeout)
		defer cancel()
	}
	st, err := r.Act(ctx, verb, names, !vo.noWait)
	if err != nil {
		return verbError(verb, err, vo.timeout, "")
	}
	writeVerbResult(stdout, verb, names, st, vo.noWait)
	return nil
}

// verbThroughUp asks the running up for the verb and waits for its answer.
func verbThroughUp(ctx context.Context, c *api.Client, verb reconciler.Verb, names []string, vo verbOptions, stdout io.Writer) error {
	var st reconciler.Status
	wait := verb == reconciler.VerbStop || !vo.noWait
	timeout := vo.timeout
	if verb == reconciler.VerbStop {
		timeout = 0
	}
	if err := c.Verb(ctx, verb.String(), names, wait, timeout, &st); err != nil {
		return verbError(verb, err, vo.timeout, " (through procfleet up)")
	}
	writeVerbResult(stdout, verb, names, st, vo.noWait)
	return nil
}

// verbError says what went wrong, each server on a line, with where to
// look.
func verbError(verb reconciler.Verb, err error, timeout time.Duration, via string) error {
	var nc *reconciler.NotConvergedError
	var de *reconciler.DownError
	switch {
	case errors.As(err, &nc):
		what := "not Ready"
		if errors.Is(nc.Cause, context.DeadlineExceeded) {
			what = fmt.Sprintf("not Ready after %s", timeout)
		}
		return fmt.Errorf("%s%s: %s:%s%s", verb, via, what, serverLines(nc.Servers), notConvergedHint(nc))
	case errors.As(err, &de):
		return fmt.Errorf("%s%s: %w", verb, via, de)
	}
	var list spec.ErrorList
	if errors.As(err, &list) {
		return fleetError(verb.String(), err)
	}
	return fmt.Errorf("%s%s: %w", verb, via, err)
}

func serverLines(m map[string]string) string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, n := range names {
		fmt.Fprintf(&b, "\n  %s: %s", n, m[n])
	}
	return b.String()
}

// writeVerbResult prints one line per server the verb acted on.
func writeVerbResult(w io.Writer, verb reconciler.Verb, names []string, st reconciler.Status, noWait bool) {
	for _, s := range st.Servers {
		line := fmt.Sprintf("%s: %s", s.Name, reconciler.PhaseSummary(s))
		switch {
		case s.Ready && s.PID != 0:
			line = fmt.Sprintf("%s: Ready (pid %d)", s.Name, s.PID)
		case verb != reconciler.VerbStop && noWait && s.PID != 0:
			line = fmt.Sprintf("%s: %s (pid %d)", s.Name, s.Phase, s.PID)
		}
		fmt.Fprintln(w, line)
	}
	if verb == reconciler.VerbStop {
		fmt.Fprintf(w, "kept stopped until 'procfleet start %s', restart, apply, or a change to their files\n", strings.Join(names, " "))
	}
}

// upNames are the servers a running up knows (its status: the instances,
// and the name of each server with replicas); nil when it does not answer.
func upNames(ctx context.Context, c *api.Client) []string {
	sctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	var st reconciler.Status
	if err := c.Status(sctx, nil, &st); err != nil {
		return nil
	}
	out := make([]string, 0, len(st.Servers))
	for _, s := range st.Servers {
		out = append(out, s.Name)
		if s.ReplicaOf != "" && !slices.Contains(out, s.ReplicaOf) {
			out = append(out, s.ReplicaOf) // up expands it to its instances
		}
	}
	return out
}
