package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/procfleet/procfleet/actuate"
	"github.com/procfleet/procfleet/internal/api"
	"github.com/procfleet/procfleet/internal/logfile"
	"github.com/procfleet/procfleet/observe"
	"github.com/procfleet/procfleet/reconciler"
	"github.com/procfleet/procfleet/spec"
)

// How much describe shows.
const (
	describeLogLines   = 20
	describeEventLines = 25
)

func newDescribeCmd(opts *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "describe NAME",
		Short: "Show one server in detail, with its recent events",
		Long: `Describe shows one server in detail:

  - its status (phase, readiness, reason, restarts) and conditions;
  - its spec as the fleet files declare it;
  - its environment: each variable's name and where it is set (env file
    and line, env entry, or procfleet itself), never a value;
  - its ownership record, and the process at the record's pid as observed
    now, with the verdict of the ownership check (and its evidence);
  - its probes, run once now;
  - its last exit and the last lines of its log;
  - its recent events (kept by up and apply in the state folder, so they
    survive a restart): starts, readiness, exits, every signal sent with the
    evidence that allowed it, quarantines;
  - for a quarantined server, the command to stop it by hand, with its pid
    and process group.

It works with or without a running up, and changes nothing.`,
		Example: `  # Why is api not Ready?
  procfleet describe api

  # A server of a fleet in a folder
  procfleet describe web -f fleet.d`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return &exitError{code: exitFailure, err: fmt.Errorf("describe: want exactly one server NAME, got %d (see 'procfleet status' for the names)", len(args))}
			}
			if err := api.CheckName(args[0]); err != nil {
				return &exitError{code: exitFailure, err: fmt.Errorf("describe: %w", err)}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return runDescribe(cmd.Context(), opts, args[0], cmd.OutOrStdout())
		},
	}
	cmd.ValidArgsFunction = completeServerNames(opts, 1)
	opts.addFileFlags(cmd)
	return cmd
}

// runDescribe describes the server called name; a server with replicas is
// described instance by instance.
func runDescribe(ctx context.Context, opts *globalOptions, name string, w io.Writer) error {
	v, err := viewFleet(ctx, opts, lookDetail)
	if err != nil {
		return fmt.Errorf("describe: %w", err)
	}
	st, err := v.only([]string{name})
	if err != nil {
		return fmt.Errorf("describe: %w", err)
	}
	if len(st.Servers) == 0 {
		_, err := fmt.Fprintf(w, "%s: no instances (spec.replicas is 0)\n", name)
		return err
	}
	for i, ss := range st.Servers {
		if i > 0 {
			if _, err := fmt.Fprintf(w, "\n---\n\n"); err != nil {
				return err
			}
		}
		if err := describeOne(ctx, v, ss, w); err != nil {
			return err
		}
	}
	return nil
}

// describeOne describes one instance (a server, or a replica).
func describeOne(ctx context.Context, v *fleetView, st reconciler.ServerStatus, w io.Writer) error {
	name := st.Name
	var decl *spec.Instance
	snap := v.Snap
	if snap.Fleet != nil {
		decl, _ = snap.Fleet.Instance(name)
	}
	d := describer{w: w, now: time.Now()}
	d.status(st, v.Live)
	d.spec(decl, snap.Fleet != nil)
	d.env(decl)
	ob := snap.Records[name]
	d.record(ob, decl)
	d.probes(ctx, decl, ob)
	d.conditions(st.Conditions)
	d.lastExit(st, ob)
	if snap.StateDir != nil {
		d.logTail(snap.StateDir.LogPath(name), st)
		d.events(snap.StateDir.EventsPath(name))
	}
	d.quarantine(st, ob)
	return d.err
}

// describer writes describe's sections; the first write error sticks.
type describer struct {
	w   io.Writer
	now time.Time
	err error
}

func (d *describer) printf(format string, args ...any) {
	if d.err != nil {
		return
	}
	_, d.err = fmt.Fprintf(d.w, format, args...)
}

// field prints "  Key:  value" with keys aligned at indent.
func (d *describer) field(indent int, key, value string) {
	d.printf("%s%-*s %s\n", strings.Repeat(" ", indent), 15-indent, key+":", value)
}

func (d *describer) status(st reconciler.ServerStatus, live bool) {
	d.field(0, "Name", st.Name)
	if st.ReplicaOf != "" && st.Index != nil {
		d.field(0, "Replica", fmt.Sprintf("%d of %s", *st.Index, st.ReplicaOf))
	}
	phase := st.Phase.String()
	if st.Ready {
		phase += " (Ready)"
	} else {
		phase += " (not Ready)"
	}
	d.field(0, "Phase", phase)
	if st.Reason != "" {
		d.field(0, "Reason", st.Reason)
	}
	if st.Message != "" {
		d.field(0, "Message", indentLines(st.Message, 16))
	}
	d.field(0, "PID", dash(st.PID))
	d.field(0, "Port", dash(st.Port))
	d.field(0, "Restarts", strconv.Itoa(st.Restarts))
	if st.StartedAt != nil {
		d.field(0, "Started", fmt.Sprintf("%s (%s ago)", st.StartedAt.Format(time.RFC3339), shortAge(d.now.Sub(*st.StartedAt))))
	}
	src := "observed now (no procfleet up answered on its socket) and status.json"
	if live {
		src = "the running procfleet up"
	}
	d.field(0, "Source", src)
}

func (d *describer) spec(in *spec.Instance, loaded bool) {
	d.printf("\nSpec:\n")
	if in == nil {
		if loaded {
			d.printf("  (not in the fleet files: 'procfleet apply' or a running up stops it)\n")
		} else {
			d.printf("  (the fleet files do not load: see 'procfleet validate')\n")
		}
		return
	}
	s, sp := in.Server, in.Server.Spec
	if s.Source.File != "" {
		d.field(2, "File", fmt.Sprintf("%s:%d", s.Source.File, s.Source.Line))
	}
	d.field(2, "Command", spec.ShellText(in.Argv()))
	d.field(2, "Working dir", in.WorkingDir)
	port := dash(in.Port)
	if in.Replicated() && in.Port > 0 {
		port = fmt.Sprintf("%d (spec.port %d + index %d)", in.Port, sp.Port, in.Index)
	}
	d.field(2, "Port", port)
	if sp.Replicas != nil {
		d.field(2, "Replicas", strconv.Itoa(*sp.Replicas))
	}
	d.field(2, "Restart", string(sp.RestartPolicy))
	if len(sp.DependsOn) > 0 {
		d.field(2, "Depends on", strings.Join(sp.DependsOn, ", "))
	}
	ready := spec.ProbeText(reconciler.ReadinessProbe(in), in.Port)
	if sp.ReadinessProbe == nil && in.Port > 0 {
		ready += " (the default)"
	}
	d.field(2, "Readiness", ready)
	d.field(2, "Liveness", spec.ProbeText(in.Liveness, in.Port))
	d.field(2, "Timeouts", fmt.Sprintf("startup %s, grace %s, kill %s", sp.StartupTimeout(), sp.TerminationGracePeriod(), sp.KillTimeout()))
	d.field(2, "Spec hash", in.Hash)
}

// env lists the instance's environment: each variable set on top of
// procfleet's own, with where it is set, never its value.
func (d *describer) env(in *spec.Instance) {
	d.printf("\nEnvironment (names and where each is set; values are never shown):\n")
	if in == nil {
		d.printf("  (not in the fleet files)\n")
		return
	}
	if d.err != nil {
		return
	}
	tw := tabwriter.NewWriter(d.w, 0, 8, 2, ' ', 0)
	for _, v := range in.Env {
		fmt.Fprintf(tw, "  %s\t%s\n", v.Name, v.From)
	}
	if d.err = tw.Flush(); d.err != nil {
		return
	}
	d.printf("  and procfleet's own environment, inherited (a variable above wins over it)\n")
}

func (d *describer) record(ob *reconciler.RecordView, decl *spec.Instance) {
	d.printf("\nRecord:\n")
	if ob == nil {
		d.printf("  (none: procfleet runs no process for this server)\n")
		return
	}
	if ob.Untrusted != nil {
		d.printf("  untrusted: %s\n", ob.Untrusted.Error())
		return
	}
	if ob.Newer != nil {
		d.printf("  unreadable: %s\n", ob.Newer.Error())
		return
	}
	r := ob.Record
	d.field(2, "PID", fmt.Sprintf("%d (process group %d)", r.PID, r.PGID))
	d.field(2, "Start time", fmt.Sprintf("%d, boot id %s", r.StartTime, r.BootID))
	if r.PidfdInode != 0 {
		d.field(2, "Pidfd inode", strconv.FormatUint(r.PidfdInode, 10))
	}
	d.field(2, "Cmdline", spec.ShellText(untitled(r.Cmdline)))
	if len(r.SpawnCmdline) > 0 && !slices.Equal(r.SpawnCmdline, r.Cmdline) {
		d.field(2, "Spawned as", spec.ShellText(untitled(r.SpawnCmdline)))
	}
	d.field(2, "UID", strconv.Itoa(r.UID))
	d.field(2, "Membership", membershipText(r))
	d.field(2, "Started at", r.StartedAt.Format(time.RFC3339))
	hash := r.SpecHash
	if decl != nil {
		if decl.Hash == r.SpecHash {
			hash += " (matches the fleet files)"
		} else {
			hash += " (differs from the fleet files: 'procfleet apply' replaces it; 'procfleet diff' says which fields)"
		}
	}
	d.field(2, "Spec hash", hash)

	d.printf("\nProcess (observed now):\n")
	d.field(2, "Verdict", verdictText(ob))
	if ob.Message != "" {
		d.field(2, "Why", ob.Message)
	}
	if ob.Evidence != "" {
		d.field(2, "Evidence", ob.Evidence)
	}
	if id := ob.Identity; id.PID > 0 {
		d.field(2, "State", processText(id))
		d.field(2, "Start time", strconv.FormatUint(id.StartTime, 10))
		d.field(2, "Cmdline", spec.ShellText(untitled(id.Cmdline)))
	}
}

// verdictText says what the ownership check concluded of a record, and
// what procfleet does about it (describe and the dashboard).
func verdictText(ob *reconciler.RecordView) string {
	verdict := ob.Verdict.String()
	switch ob.Verdict {
	case actuate.VerdictOwned:
		verdict += ": the record proves procfleet started it"
	case actuate.VerdictStale:
		verdict += ": the process is gone"
	case actuate.VerdictReused:
		verdict += ": the pid belongs to another process now (nothing will be signalled)"
	case actuate.VerdictQuarantine:
		verdict += " (" + string(ob.Reason) + "): procfleet will not signal it"
	}
	return verdict
}

// processText is a process's state as observed now.
func processText(id observe.Identity) string {
	return fmt.Sprintf("%s, ppid %d, pgid %d, sid %d, uid %d", id.State, id.PPID, id.PGID, id.SID, id.UID)
}

func (d *describer) probes(ctx context.Context, decl *spec.Instance, ob *reconciler.RecordView) {
	d.printf("\nProbes (run now):\n")
	if ob == nil || ob.Verdict != actuate.VerdictOwned || ob.Untrusted != nil || ob.Newer != nil {
		d.printf("  (not run: no process of this server is running)\n")
		return
	}
	show := func(kind string, r *observe.ProbeResult) {
		if r == nil {
			d.field(2, kind, "none")
			return
		}
		res := "passed"
		if !r.OK {
			res = "failed"
		}
		msg := ""
		if r.Message != "" {
			msg = ": " + r.Message
		}
		d.field(2, kind, fmt.Sprintf("%s in %s%s", res, r.Duration.Round(time.Microsecond*100), msg))
	}
	show("Readiness", ob.Ready)
	if decl != nil && decl.Liveness != nil {
		if r, ok := reconciler.ProbeOnce(ctx, decl, decl.Liveness); ok {
			show("Liveness", &r)
		}
	}
}

func (d *describer) conditions(cs []reconciler.Condition) {
	d.printf("\nConditions:\n")
	if d.err != nil {
		return
	}
	tw := tabwriter.NewWriter(d.w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "  TYPE\tSTATUS\tREASON\tLAST TRANSITION\tMESSAGE")
	for _, c := range cs {
		when := "-"
		if !c.LastTransitionTime.IsZero() {
			when = c.LastTransitionTime.Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", c.Type, c.Status, orDash(c.Reason), when, orDash(firstLine(c.Message)))
	}
	d.err = tw.Flush()
}

func (d *describer) lastExit(st reconciler.ServerStatus, ob *reconciler.RecordView) {
	d.printf("\nLast exit:\n")
	switch {
	case st.LastExit != nil:
		e := st.LastExit
		d.field(2, "Reason", e.Reason)
		code := strconv.Itoa(e.Code)
		if e.Signal != "" {
			code += ", signal " + e.Signal
		}
		d.field(2, "Code", code)
		if !e.At.IsZero() {
			d.field(2, "At", fmt.Sprintf("%s (%s ago)", e.At.Format(time.RFC3339), shortAge(d.now.Sub(e.At))))
		}
	case ob != nil && (ob.Verdict == actuate.VerdictStale || ob.Verdict == actuate.VerdictReused):
		d.printf("  %s; how it ended is unknown: no procfleet up or apply was watching it (see the log below)\n", ob.Message)
	default:
		d.printf("  (none recorded)\n")
	}
}

func (d *describer) logTail(path string, st reconciler.ServerStatus) {
	lines, err := logfile.TailFiles([]string{logfile.RotatedPath(path, 1), path}, describeLogLines)
	d.printf("\nLog (last %d lines of %s):\n", describeLogLines, path)
	switch {
	case err != nil:
		d.printf("  (cannot read it: %v)\n", err)
	case len(lines) == 0:
		d.printf("  (empty)\n")
	}
	for _, l := range lines {
		d.printf("  %s\n", l)
	}
	if st.Name != "" && len(lines) > 0 {
		d.printf("  (more: procfleet logs %s --tail 200)\n", st.Name)
	}
}

func (d *describer) events(path string) {
	evs, bad, err := reconciler.ReadEvents(path, describeEventLines)
	d.printf("\nEvents (last %d, oldest first):\n", describeEventLines)
	switch {
	case err != nil:
		d.printf("  (cannot read them: %v)\n", err)
		return
	case len(evs) == 0:
		d.printf("  (none)\n")
		return
	}
	if d.err != nil {
		return
	}
	tw := tabwriter.NewWriter(d.w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "  TIME\tTYPE\tREASON\tMESSAGE")
	for _, e := range evs {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", e.Time.Local().Format("2006-01-02 15:04:05.000"), e.Type, e.Reason, firstLine(e.Message))
	}
	d.err = tw.Flush()
	if bad > 0 {
		d.printf("  (%d line(s) of %s were not events and were skipped)\n", bad, path)
	}
}

func (d *describer) quarantine(st reconciler.ServerStatus, ob *reconciler.RecordView) {
	if st.Phase != reconciler.PhaseQuarantined {
		return
	}
	d.printf("\nQuarantined (%s): procfleet signals nothing and keeps the record.\n", st.Reason)
	if advice, byHand := quarantineAdvice(ob, "see Message above"); byHand {
		d.printf("  To stop it by hand: %s\n", advice)
	} else {
		d.printf("  %s\n", advice)
	}
}

// quarantineAdvice says what to do about a quarantined server whose record
// is ob (nil: none): byHand when it is how to stop its process by hand,
// else what its record says or what to free. where points at the
// quarantine's message.
func quarantineAdvice(ob *reconciler.RecordView, where string) (advice string, byHand bool) {
	switch {
	case ob != nil && ob.Untrusted != nil:
		return sentence(reconciler.UntrustedAdvice(ob.Untrusted)), false
	case ob != nil && ob.Newer != nil:
		return sentence(ob.Newer.Error()), false
	case ob != nil && ob.Record.PID > 0:
		return actuate.ManualStopHint(ob.Record), true
	}
	return "Free what blocks it (" + where + "), then run 'procfleet apply' or wait for the running up.", false
}

// untitled drops the trailing empty arguments of a command line read from
// the kernel: a program that retitles itself (nginx, redis, postgres's
// children) pads its title with dozens of them.
func untitled(argv []string) []string {
	for len(argv) > 0 && argv[len(argv)-1] == "" {
		argv = argv[:len(argv)-1]
	}
	return argv
}

func indentLines(s string, n int) string {
	return strings.ReplaceAll(s, "\n", "\n"+strings.Repeat(" ", n))
}

// sentence starts s with a capital letter (s begins with ASCII).
func sentence(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i] + " ..."
	}
	return s
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// notConvergedHint tells what to do about the servers apply could not bring
// to their declared state: describe shows why.
func notConvergedHint(nc *reconciler.NotConvergedError) string {
	names := make([]string, 0, len(nc.Servers))
	for n := range nc.Servers {
		names = append(names, n)
	}
	if len(names) == 0 {
		return ""
	}
	sort.Strings(names)
	return fmt.Sprintf("\nTo see why: procfleet describe %s (last exit, log tail, events; for a quarantined server, how to stop it by hand). Fix it, then run apply again.", names[0])
}

// completeServerNames completes server names for the verbs that take them
// (status, describe, stop, start, restart, down): the servers of the fleet
// files and their instances, and those with a record in the state folder.
// It starts and signals nothing.
func completeServerNames(opts *globalOptions, max int) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if max > 0 && len(args) >= max {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		set := map[string]bool{}
		if f, err := spec.Load(opts.FleetPaths()...); err == nil {
			for _, s := range f.Servers {
				set[s.Metadata.Name] = true
				for _, n := range s.InstanceNames() {
					set[n] = true
				}
			}
		}
		if path, err := opts.StateDirPath(); err == nil {
			for _, n := range recordNames(path) {
				set[n] = true
			}
		}
		for _, a := range args {
			delete(set, a)
		}
		var out []cobra.Completion
		for n := range set {
			if strings.HasPrefix(n, toComplete) {
				out = append(out, n)
			}
		}
		sort.Strings(out)
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}
