package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/procfleet/procfleet/actuate"
	"github.com/procfleet/procfleet/internal/api"
	"github.com/procfleet/procfleet/internal/logfile"
)

// logsOptions are the flags of `procfleet logs`.
type logsOptions struct {
	follow bool
	tail   int
}

func newLogsCmd(opts *globalOptions) *cobra.Command {
	lo := &logsOptions{}
	cmd := &cobra.Command{
		Use:   "logs NAME",
		Short: "Print a server's output",
		Long: `Logs prints what a server wrote to its stdout and stderr, kept in
logs/NAME.log in the state folder together with its rotated copies
(NAME.log.1 is the newest; a running up rotates past 10 MiB, at its start
and every 30 s, and keeps 3; nothing rotates while no up runs).

Without --tail it prints all of it, oldest first. With -f it keeps printing
what the server writes, across rotations, until interrupted.

The log is the server's raw output: procfleet adds no timestamps, so there is
no --since.`,
		Example: `  # Everything the server api wrote, oldest first
  procfleet logs api

  # The last 50 lines, then follow new output (Ctrl-C stops)
  procfleet logs api --tail 50 -f

  # The log of a fleet whose state lives elsewhere
  procfleet logs api --state-dir /srv/app/.procfleet`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeLogNames(opts),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runLogs(cmd, opts, lo, args[0])
		},
	}
	cmd.Flags().BoolVarP(&lo.follow, "follow", "f", false, "keep printing new output, across rotations, until interrupted")
	cmd.Flags().IntVar(&lo.tail, "tail", -1, "print only the last `N` lines (-1: all)")
	return cmd
}

func runLogs(cmd *cobra.Command, opts *globalOptions, lo *logsOptions, name string) error {
	// The name becomes a file name: a DNS label cannot leave logs/.
	if err := api.CheckName(name); err != nil {
		return fmt.Errorf("logs: %w", err)
	}
	dir, err := opts.StateDirPath()
	if err != nil {
		return fmt.Errorf("logs %s: %w", name, err)
	}
	live := (&actuate.StateDir{Path: dir}).LogPath(name)
	files := logfile.Files(live, logfile.Options{})
	liveExists := len(files) > 0 && files[len(files)-1] == live
	if len(files) == 0 || (lo.follow && !liveExists) {
		return fmt.Errorf("logs %s: server %q has no log at %s: it has not run with this state folder (--state-dir or $%s choose another)",
			name, name, live, stateDirEnv)
	}
	out := cmd.OutOrStdout()

	if !lo.follow {
		if lo.tail >= 0 {
			lines, err := logfile.TailFiles(files, lo.tail)
			if err != nil {
				return fmt.Errorf("logs %s: %w", name, err)
			}
			return printLines(out, lines)
		}
		return logfile.Cat(out, files)
	}

	err = logfile.Follow(cmd.Context(), live, out, logfile.FollowOptions{Lines: lo.tail, Log: opts.Logger()})
	if err != nil {
		return fmt.Errorf("logs %s: %w", name, err)
	}
	return nil
}

func printLines(out io.Writer, lines []string) error {
	for _, l := range lines {
		if _, err := fmt.Fprintln(out, l); err != nil {
			return err
		}
	}
	return nil
}

// completeLogNames completes NAME with the servers that have a log in the
// state folder.
func completeLogNames(opts *globalOptions) func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	return func(_ *cobra.Command, args []string, prefix string) ([]string, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		dir, err := opts.StateDirPath()
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		logs := filepath.Dir((&actuate.StateDir{Path: dir}).LogPath("x"))
		entries, _ := os.ReadDir(logs)
		var names []string
		for _, e := range entries {
			name, ok := strings.CutSuffix(e.Name(), ".log")
			if ok && strings.HasPrefix(name, prefix) && api.CheckName(name) == nil {
				names = append(names, name)
			}
		}
		return names, cobra.ShellCompDirectiveNoFileComp
	}
}
