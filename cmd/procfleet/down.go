package main

import (
	"context"
	"fmt"
	"os"
	"slices"

	"github.com/spf13/cobra"

	"github.com/procfleet/procfleet/internal/api"
	"github.com/procfleet/procfleet/reconciler"
	"github.com/procfleet/procfleet/spec"
)

func newDownCmd(opts *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "down [NAME]...",
		Short: "Stop the named servers, or every server procfleet owns",
		Long: `Down stops the named servers, or every server with an ownership record in
the state folder: dependents first (dependsOn, from the fleet files),
independent servers in parallel. Each stop sends SIGTERM to the server's
process group, waits terminationGracePeriodSeconds, then SIGKILL, and waits
until its port is free; it signals only processes it proves are procfleet's.
Records are removed.

Named servers stay stopped, as 'procfleet stop' keeps them: with or without
a running up, and across a restart of up, until 'procfleet start' or
'restart' names them, 'procfleet apply' runs, or their files change.

While 'procfleet up' runs on the state folder, down asks it, through its
socket, to stop the servers (in the same order); without names it keeps
them stopped until the fleet files change, 'procfleet apply', or up
restarts.

Exit status: 0 when every server was stopped; 1 naming each server that could
not be (a quarantined one included, with how to stop it by hand).`,
		Example: `  # Stop everything
  procfleet down

  # Stop two servers
  procfleet down api worker`,
		RunE: func(cmd *cobra.Command, names []string) error {
			path, err := opts.StateDirPath()
			if err != nil {
				return err
			}
			if _, err := os.Stat(path); os.IsNotExist(err) {
				if len(names) > 0 {
					// Nothing runs, but a name must still be one of the
					// fleet's: a typo is never silently nothing.
					f, err := spec.Load(opts.FleetPaths()...)
					if err != nil {
						f = nil
					}
					if _, err := expandNames(names, f, nil); err != nil {
						return fmt.Errorf("down: %w", err)
					}
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "no state folder at %s: nothing to stop\n", path)
				return nil
			}
			sd, release, err := openLocked(opts, "down")
			progress := newProgress(opts, cmd.ErrOrStderr())
			if isLocked(err) {
				if c := upClient(cmd.Context(), sd); c != nil {
					defer c.Close()
					return downThroughUp(cmd.Context(), c, progress, names)
				}
			}
			if err != nil {
				return err
			}
			defer func() { _ = release() }()
			defer downRuntime()()
			err = reconciler.Down(cmd.Context(), reconciler.DownConfig{
				Files: opts.FleetPaths(), StateDir: sd, Log: opts.Logger().WithName("down"), OnEvent: progress.event,
			}, names)
			if err != nil {
				return fmt.Errorf("down: %w", err)
			}
			return nil
		},
	}
	cmd.ValidArgsFunction = completeServerNames(opts, 0)
	opts.addFileFlags(cmd)
	return cmd
}

// downThroughUp asks the running up to stop the servers and keep them
// stopped (until the fleet files change, an apply, or up restarts).
func downThroughUp(ctx context.Context, c *api.Client, progress *progress, names []string) error {
	var st reconciler.Status
	err := c.Down(ctx, names, &st)
	if err != nil {
		return fmt.Errorf("down (through procfleet up): %w", err)
	}
	for _, s := range st.Servers {
		if len(names) == 0 || slices.Contains(names, s.Name) || (s.ReplicaOf != "" && slices.Contains(names, s.ReplicaOf)) {
			progress.say(s.Name+": "+reconciler.PhaseSummary(s), "Server", "server", s.Name, "phase", s.Phase.String(), "reason", s.Reason, "message", s.Message)
		}
	}
	if len(names) > 0 {
		progress.say("kept stopped until 'procfleet start', restart, apply, or a change to their files", "Kept stopped")
		return nil
	}
	progress.say("procfleet up keeps them stopped until the fleet files change, 'procfleet apply', or up restarts", "Kept stopped by up")
	return nil
}
