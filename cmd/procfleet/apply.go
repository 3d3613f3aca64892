package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/procfleet/procfleet/internal/api"
	"github.com/procfleet/procfleet/reconciler"
)

// defaultApplyTimeout bounds apply when --timeout is not given.
const defaultApplyTimeout = 5 * time.Minute

// applyText is apply's default output: a line of progress per event on
// stderr and one summary line on stdout.
const applyText = "text"

func newApplyCmd(opts *globalOptions) *cobra.Command {
	var wait bool
	var timeout time.Duration
	var output string
	cmd := &cobra.Command{
		Use:   "apply [-f PATH]... [--wait] [--timeout D] [-o text|json|github]",
		Short: "Converge once and exit; the servers stay running",
		Long: `Apply reads the fleet files once and acts until every server is in its
declared state: it adopts what its records prove it owns, starts what is
missing (dependencies first, after they are Ready), replaces what changed and
stops what was removed. A server that exits before it is Ready gets one
immediate restart; a second exit before Ready, or an exit after it was Ready,
makes it Failed, reported with its exit and log tail; a program that cannot
be executed (not found, not executable) is Failed at its first try. The
servers stay running when it exits.

While 'procfleet up' runs on the state folder, apply asks it, through its
socket, to re-read the files and converge (which also lifts a 'down' that
keeps servers stopped), and with --wait waits until every server is Ready.

Exit status: 0 when every server is Running (with --wait, Ready); 1 when any
is Failed or Quarantined, is not Ready with --wait, or --timeout passed,
with each such server's reason. With --wait it gives up on a failed server
at once and exits as soon as the others have settled.

-o json prints the final status document on stdout (status -o json's, with
notConverged: each server not as declared, and why), whatever the exit.
-o github is text plus, on stdout, a GitHub Actions ::error annotation for
each server not as declared (at its document's file and line, with the
reason) and, when $GITHUB_STEP_SUMMARY is set, a Markdown summary appended
to that file: a table of the servers and each failed one's log tail.`,
		Example: `  # CI: start the fleet and wait until every server is Ready
  procfleet apply --wait --timeout 2m

  # GitHub Actions: annotations and a job summary
  procfleet apply --wait --timeout 2m -o github`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output != applyText && output != outputJSON && output != applyGitHub {
				return &exitError{code: exitFailure, err: fmt.Errorf("invalid -o %q: want text, json or github", output)}
			}
			return runApply(cmd.Context(), opts, cmd.OutOrStdout(), cmd.ErrOrStderr(), wait, timeout, output)
		},
	}
	opts.addFileFlags(cmd)
	cmd.Flags().BoolVar(&wait, "wait", false, "exit 0 only when every server is Ready")
	cmd.Flags().DurationVar(&timeout, "timeout", defaultApplyTimeout, "give up after `D` (like 90s or 2m)")
	cmd.Flags().StringVarP(&output, "output", "o", applyText, "output `FORMAT`: text, json (the final status document) or github (annotations, step summary)")
	return cmd
}

func runApply(ctx context.Context, opts *globalOptions, stdout, stderr io.Writer, wait bool, timeout time.Duration, output string) error {
	if timeout <= 0 {
		return fmt.Errorf("apply: --timeout must be positive, got %s", timeout)
	}
	sd, release, err := openLocked(opts, "apply")
	if isLocked(err) {
		if c := upClient(ctx, sd); c != nil {
			defer c.Close()
			return applyThroughUp(ctx, c, stdout, stderr, wait, timeout, output, opts.FleetPaths())
		}
	}
	if err != nil {
		return err
	}
	defer func() { _ = release() }()
	progress := newProgress(opts, stderr)
	r, err := reconciler.New(reconciler.Config{
		Files: opts.FleetPaths(), StateDir: sd, Log: opts.Logger().WithName("reconciler"),
		OnEvent: progress.event, OneShot: true,
	})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	st, err := r.Converge(ctx, reconciler.ConvergeOptions{Wait: wait})
	switch output {
	case outputJSON:
		if jerr := writeApplyJSON(stdout, reconciler.NewApplyResult(st, err)); jerr != nil {
			return jerr
		}
	case applyGitHub:
		if gerr := writeApplyGitHub(stdout, stderr, reconciler.NewApplyResult(st, err), opts.FleetPaths()); gerr != nil {
			return gerr
		}
	}
	var nc *reconciler.NotConvergedError
	switch {
	case errors.As(err, &nc):
		if errors.Is(nc.Cause, context.DeadlineExceeded) {
			return fmt.Errorf("apply: timed out after %s: %w%s", timeout, nc, notConvergedHint(nc))
		}
		return fmt.Errorf("apply: %w%s", nc, notConvergedHint(nc))
	case err != nil:
		return fleetError("apply", err)
	}
	if output != outputJSON {
		fmt.Fprintf(stdout, "applied: %d server(s), %d ready\n", len(st.Servers), countReady(st))
	}
	return nil
}

// writeApplyJSON prints the final status document of an apply.
func writeApplyJSON(w io.Writer, res reconciler.ApplyResult) error {
	b, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return fmt.Errorf("apply: write the status document: %w", err)
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

// applyThroughUp asks the running up to re-read its files and converge.
func applyThroughUp(ctx context.Context, c *api.Client, stdout, stderr io.Writer, wait bool, timeout time.Duration, output string, paths []string) error {
	var res reconciler.ApplyResult
	err := c.Reload(ctx, wait, timeout, &res)
	st := res.Status
	if output == outputJSON && len(st.Servers) > 0 {
		if jerr := writeApplyJSON(stdout, res); jerr != nil {
			return jerr
		}
	}
	if output == applyGitHub && len(st.Servers) > 0 {
		if gerr := writeApplyGitHub(stdout, stderr, res, paths); gerr != nil {
			return gerr
		}
	}
	if err != nil {
		var ae *api.Error
		if errors.As(err, &ae) && len(res.NotConverged) > 0 {
			return &upNotConvergedError{res: res, timeout: timeout, err: err}
		}
		if errors.As(err, &ae) && len(st.Servers) > 0 {
			var b strings.Builder
			for _, s := range st.Servers {
				if !s.Ready {
					fmt.Fprintf(&b, "\n  %s: %s", s.Name, reconciler.PhaseSummary(s))
				}
			}
			return fmt.Errorf("apply (through procfleet up): %w%s", err, b.String())
		}
		return fmt.Errorf("apply (through procfleet up): %w", err)
	}
	if output != outputJSON {
		fmt.Fprintf(stdout, "applied through procfleet up: %d server(s), %d ready\n", len(st.Servers), countReady(st))
	}
	return nil
}

// upNotConvergedError is an apply through up that ended with servers not
// as declared, said as apply says it by itself: each server with what the
// wait found and its phase, then where to look. It unwraps to up's answer.
type upNotConvergedError struct {
	res     reconciler.ApplyResult
	timeout time.Duration
	err     error
}

func (e *upNotConvergedError) Error() string {
	var b strings.Builder
	b.WriteString("apply (through procfleet up): ")
	// up answers a wait that ran out with ctx's error (reconciler's
	// apiError), the only place that says so.
	if strings.HasPrefix(e.err.Error(), context.DeadlineExceeded.Error()) {
		fmt.Fprintf(&b, "timed out after %s: ", e.timeout)
	}
	names := notConvergedNames(e.res)
	fmt.Fprintf(&b, "%d server(s) not converged", len(names))
	for _, n := range names {
		s, _ := e.res.Get(n)
		b.WriteString("\n  " + n + ": ")
		if why := e.res.NotConverged[n]; why != "" {
			b.WriteString(why + ": ")
		}
		b.WriteString(reconciler.PhaseSummary(s))
	}
	b.WriteString(notConvergedHint(&reconciler.NotConvergedError{Servers: e.res.NotConverged}))
	return b.String()
}

func (e *upNotConvergedError) Unwrap() error { return e.err }

// countReady is how many of st's servers are ready.
func countReady(st reconciler.Status) int {
	n := 0
	for _, s := range st.Servers {
		if s.Ready {
			n++
		}
	}
	return n
}
