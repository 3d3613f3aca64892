package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/procfleet/procfleet/actuate"
	"github.com/procfleet/procfleet/internal/api"
	"github.com/procfleet/procfleet/internal/logfile"
	"github.com/procfleet/procfleet/spec"
)

// logsOptions are the flags of `procfleet logs`.
type logsOptions struct {
	follow   bool
	tail     int
	noPrefix bool
	noColor  bool
}

func newLogsCmd(opts *globalOptions) *cobra.Command {
	lo := &logsOptions{}
	cmd := &cobra.Command{
		Use:   "logs [NAME]... [-f] [--tail N] [--file PATH]...",
		Short: "Print the servers' output",
		Long: `Logs prints what servers wrote to their stdout and stderr, kept in
logs/NAME.log in the state folder together with its rotated copies
(NAME.log.1 is the newest; a running up rotates past 10 MiB, at its start
and every 30 s, and keeps 3; nothing rotates while no up runs).

Without NAME it prints every server of the fleet: those of the fleet files
(--file PATH, repeatable, default procfleet.yaml, found in the current
folder or the nearest folder above it that has one) and those with a record
in the state folder. A NAME is a server (all its replicas) or one instance
(api-1); a server that has left the fleet but whose log is still kept
(7 days) can be named too.

Each server's output is printed whole, oldest first, one server after the
other; with --tail N, its last N lines. With more than one server each line
starts with "name | " (colored on a terminal; --no-prefix and --no-color,
or NO_COLOR, turn that off).

With -f it then keeps printing what the servers write, interleaved as it
arrives, across rotations and restarts, until interrupted. Each start of a
server shows as a line "--- procfleet: started pid N at TIME ---" (from its
events); a line the new process prints in the first milliseconds, before
its start is recorded, can come just before it. Every line is printed
whole and once, however slowly the output is read; if more than 3
rotations pass while it is not read, the output rotated away is skipped and
a line says how many bytes. -f means follow here, so fleet files are given
with --file.

The log is the server's raw output: procfleet adds no timestamps, so there is
no --since, and without -f the servers' outputs are not interleaved.`,
		Example: `  # Everything the server api wrote, oldest first
  procfleet logs api

  # The whole fleet's last 20 lines each, then follow (Ctrl-C stops)
  procfleet logs --tail 20 -f

  # Two servers, without the name prefix
  procfleet logs api web --no-prefix

  # A fleet described elsewhere, its state elsewhere
  procfleet logs --file deploy/procfleet.yaml --state-dir /srv/app/.procfleet`,
		ValidArgsFunction: completeLogNames(opts),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runLogs(cmd, opts, lo, args)
		},
	}
	cmd.Flags().BoolVarP(&lo.follow, "follow", "f", false, "keep printing new output, across rotations and restarts, until interrupted")
	cmd.Flags().IntVar(&lo.tail, "tail", -1, "print only the last `N` lines of each server first (-1: all)")
	cmd.Flags().StringArrayVar(&opts.Files, "file", nil,
		"fleet file, or folder of *.yaml/*.yml files, at `PATH` (repeatable; default "+defaultFleetFile+")")
	cmd.Flags().BoolVar(&lo.noPrefix, "no-prefix", false, `do not start each line with "name | "`)
	cmd.Flags().BoolVar(&lo.noColor, "no-color", false, "no colors (also when NO_COLOR is set, and when the output is not a terminal)")
	return cmd
}

func runLogs(cmd *cobra.Command, opts *globalOptions, lo *logsOptions, args []string) error {
	for _, n := range args {
		// A name becomes a file name: a DNS label cannot leave logs/.
		if err := api.CheckName(n); err != nil {
			return fmt.Errorf("logs: %w", err)
		}
	}
	findProject(opts)
	src, err := logSources(opts)
	if err != nil {
		return fmt.Errorf("logs: %w", err)
	}
	if src.loadErr != nil {
		fmt.Fprintf(cmd.ErrOrStderr(), "procfleet: the fleet files do not load; showing the servers the state folder knows: %v\n", src.loadErr)
	}
	names, err := src.resolve(args)
	if err != nil {
		return fmt.Errorf("logs: %w", err)
	}
	if len(names) == 0 {
		return fmt.Errorf("logs: no server in the fleet files (%s) or the state folder %s", strings.Join(opts.FleetPaths(), ", "), filepath.Dir(src.dir))
	}
	for _, n := range names {
		switch {
		case src.logs[n] || !slices.Contains(args, n):
		case lo.follow:
			fmt.Fprintf(cmd.ErrOrStderr(), "procfleet: %s has no log yet; waiting for it\n", n)
		default:
			return fmt.Errorf("logs %s: server %q has no log at %s: it has not run with this state folder (--state-dir or $%s choose another)",
				n, n, filepath.Join(src.dir, n+".log"), stateDirEnv)
		}
	}

	out := cmd.OutOrStdout()
	fl, err := logfile.NewFleet(logfile.FleetConfig{
		Dir:     src.dir,
		Out:     out,
		Lines:   lo.tail,
		Follow:  lo.follow,
		Prefix:  len(names) > 1 && !lo.noPrefix,
		Color:   !lo.noColor && colorsWanted(opts, out),
		Markers: lo.follow,
		Log:     opts.Logger(),
	})
	if err != nil {
		return err
	}
	if err := fl.Add(names...); err != nil {
		return fmt.Errorf("logs: %w", err)
	}
	if err := fl.Run(cmd.Context()); err != nil {
		return fmt.Errorf("logs: %w", err)
	}
	return nil
}

// colorsWanted: colors on a terminal, unless NO_COLOR is set to anything
// (https://no-color.org).
func colorsWanted(opts *globalOptions, out io.Writer) bool {
	getenv := opts.getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	return isTerminal(out) && getenv("NO_COLOR") == ""
}

// logSource is what logs knows of the fleet: the servers the fleet files
// declare, those recorded in the state folder, and those with a log there.
type logSource struct {
	dir      string              // the logs folder
	declared map[string][]string // a declared server's name -> its instances
	order    []string            // the declared instances, in the fleet's order
	recorded map[string]bool
	logs     map[string]bool
	loadErr  error // the fleet files' error, when they do not load
}

// logSources reads the fleet files and lists the state folder's records
// and logs. A state folder owned by another user, or open to others, is
// refused (as status refuses it).
func logSources(opts *globalOptions) (*logSource, error) {
	src := &logSource{declared: map[string][]string{}, recorded: map[string]bool{}, logs: map[string]bool{}}
	files := opts.FleetPaths()
	fleet, loadErr := spec.Load(files...)
	path, err := opts.StateDirPath()
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		if fleet == nil && noFleetFile(loadErr) {
			return nil, fmt.Errorf("no fleet file at %s and no state folder at %s: nothing to show (pass the fleet files with --file, or the state folder with --state-dir)",
				strings.Join(files, ", "), path)
		}
		return nil, fmt.Errorf("no state folder at %s: no server has run with it yet (start them with procfleet up or apply)", path)
	}
	sd, err := actuate.InspectStateDir(path)
	if err != nil {
		return nil, err
	}
	src.dir = filepath.Dir(sd.LogPath("x"))
	if fleet != nil {
		for _, s := range fleet.Servers {
			src.declared[s.Metadata.Name] = s.InstanceNames()
		}
		for _, in := range fleet.Instances() {
			src.order = append(src.order, in.Name)
		}
	} else if !noFleetFile(loadErr) {
		src.loadErr = loadErr
	}
	recs, _ := os.ReadDir(filepath.Dir(sd.RecordPath("x")))
	for _, e := range recs {
		if n, ok := strings.CutSuffix(e.Name(), ".json"); ok && api.CheckName(n) == nil {
			src.recorded[n] = true
		}
	}
	logs, _ := os.ReadDir(src.dir)
	for _, e := range logs {
		if n, ok := strings.CutSuffix(e.Name(), ".log"); ok && api.CheckName(n) == nil {
			src.logs[n] = true
		}
	}
	return src, nil
}

// resolve turns the names given into the instances to print: none given is
// every declared instance and every recorded server, sorted; a server's
// name stands for all its instances; an instance, a recorded server or one
// with a log is itself. An unknown name is an error that names the nearest
// known one.
func (src *logSource) resolve(args []string) ([]string, error) {
	var out []string
	add := func(n string) {
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	if len(args) == 0 {
		all := append([]string(nil), src.order...)
		for n := range src.recorded {
			all = append(all, n)
		}
		sort.Strings(all)
		for _, n := range all {
			add(n)
		}
		return out, nil
	}
	known := append([]string(nil), src.order...)
	for n := range src.declared {
		known = append(known, n)
	}
	for n := range src.recorded {
		known = append(known, n)
	}
	for n := range src.logs {
		known = append(known, n)
	}
	sort.Strings(known)
	if err := unknownNames(args, known); err != nil {
		return nil, err
	}
	for _, a := range args {
		if inst, ok := src.declared[a]; ok {
			for _, n := range inst {
				add(n)
			}
			continue
		}
		add(a)
	}
	return out, nil
}

// findProject lets logs work from any folder of a project: when no fleet
// file, state folder or $PROCFLEET_STATE_DIR is given and the current
// folder has no procfleet.yaml, the nearest folder above it that has one is
// used, as compose finds its file.
func findProject(opts *globalOptions) {
	getenv := opts.getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	if len(opts.Files) > 0 || opts.StateDir != "" || getenv(stateDirEnv) != "" {
		return
	}
	if _, err := os.Stat(defaultFleetFile); err == nil {
		return
	}
	wd, err := os.Getwd()
	if err != nil {
		return
	}
	for dir := wd; ; {
		parent := filepath.Dir(dir)
		if parent == dir {
			return
		}
		dir = parent
		if fi, err := os.Stat(filepath.Join(dir, defaultFleetFile)); err == nil && fi.Mode().IsRegular() {
			opts.Files = []string{filepath.Join(dir, defaultFleetFile)}
			return
		}
	}
}

// completeLogNames completes NAME with the servers of the fleet, those
// recorded, and those with a log in the state folder.
func completeLogNames(opts *globalOptions) cobra.CompletionFunc {
	fleetNames := completeServerNames(opts, 0)
	return func(cmd *cobra.Command, args []string, prefix string) ([]cobra.Completion, cobra.ShellCompDirective) {
		names, _ := fleetNames(cmd, args, prefix)
		if dir, err := opts.StateDirPath(); err == nil {
			entries, _ := os.ReadDir(filepath.Dir((&actuate.StateDir{Path: dir}).LogPath("x")))
			for _, e := range entries {
				n, ok := strings.CutSuffix(e.Name(), ".log")
				if ok && strings.HasPrefix(n, prefix) && api.CheckName(n) == nil && !slices.Contains(names, n) && !slices.Contains(args, n) {
					names = append(names, n)
				}
			}
		}
		sort.Strings(names)
		return names, cobra.ShellCompDirectiveNoFileComp
	}
}

// noFleetFile reports a load error that is only "the file does not exist".
// (reconciler keeps its own, unexported, for Inspect; logs does not take a
// Snapshot because it needs no verification of the records.)
func noFleetFile(err error) bool {
	var list spec.ErrorList
	if !errors.As(err, &list) {
		return errors.Is(err, fs.ErrNotExist)
	}
	for _, fe := range list {
		if !strings.Contains(fe.Message, "no such file") && !strings.Contains(fe.Message, "does not exist") {
			return false
		}
	}
	return len(list) > 0
}
