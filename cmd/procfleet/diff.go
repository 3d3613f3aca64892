package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/procfleet/procfleet/actuate"
	"github.com/procfleet/procfleet/reconciler"
	"github.com/procfleet/procfleet/spec"
)

func newDiffCmd(opts *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "diff [-f PATH]...",
		Short: "Show what apply would do, server by server, and why",
		Long: `Diff compares the fleet files with what runs and prints what 'procfleet apply'
would do to each server that is not as declared, with the reason:

  + NAME: start: missing: never started, or stopped (or: crashed, its record stale)
  + NAME: start after its dependencies: ...
  ~ NAME: replace: spec changed: the fields that differ (pid N is stopped, ...)
  - NAME: stop: removed from the fleet files (pid N is stopped, ...)
  ! NAME: quarantined: REASON: apply will not touch it and will fail until
          it is resolved
      followed by a hint line where there is one: who holds a port, how to
      stop a process by hand, or what to do with an untrusted record

It plans with the same function apply and up use (reconciler.Plan), from the
same observation a fresh apply starts with: the records in the state folder,
each checked against the process at its pid. It changes nothing.

Exit status: 0 when the fleet is in sync, 2 when changes are pending, 1 on
an error (the fleet files do not load, the state folder is unreadable).`,
		Example: `  # What would apply do?
  procfleet diff

  # In CI: fail the job when the running fleet drifted from the files
  procfleet diff -f fleet.d || echo "drift (exit $?)"`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runDiff(cmd.Context(), opts, cmd.OutOrStdout())
		},
	}
	opts.addFileFlags(cmd)
	return cmd
}

// diffLine is one server that apply would change.
type diffLine struct {
	Name string
	// Mark is +, ~, - or !.
	Mark string
	// What apply would do, and why.
	What, Why string
	// Hint says what a person can do (quarantine, port conflict).
	Hint string
}

func runDiff(ctx context.Context, opts *globalOptions, w io.Writer) error {
	v, err := viewFleet(ctx, opts, look{})
	if err != nil {
		return fmt.Errorf("diff: %w", err)
	}
	if v.Snap.LoadErr != nil {
		return fleetError("diff", v.Snap.LoadErr)
	}
	lines, inSync := planDiff(v.Snap, reconciler.PortHolder)
	if len(lines) == 0 {
		fmt.Fprintf(w, "in sync: %d server(s) as declared in %s\n", inSync, strings.Join(v.Snap.Files, ", "))
		return nil
	}
	for _, l := range lines {
		fmt.Fprintf(w, "%s %s: %s: %s\n", l.Mark, l.Name, l.What, l.Why)
		if l.Hint != "" {
			fmt.Fprintf(w, "    %s\n", l.Hint)
		}
	}
	fmt.Fprintf(w, "%d change(s) pending, %d server(s) in sync; 'procfleet apply' (or a running up) carries them out\n", len(lines), inSync)
	return silentExit(exitPending)
}

// planDiff turns each action of the snapshot's plan (reconciler.Plan, as a
// fresh apply sees the world) that changes something into a line. It
// returns the lines, sorted by name, and how many servers are in sync.
// portHolder names who holds a port ("" when free).
func planDiff(snap *reconciler.Snapshot, portHolder func(port int) string) ([]diffLine, int) {
	desired := snap.Desired()
	var lines []diffLine
	inSync := 0
	scales := map[string]*scaleChange{}
	for _, a := range snap.Plan() {
		d := desired[a.Server]
		rv := snap.Records[a.Server]
		if a.Kind == reconciler.ActionWait && a.Rolling {
			a.Kind = reconciler.ActionReplace // its rolling turn, in a running apply
		}
		if scaleOf(snap, scales, a, d, rv) {
			continue
		}
		l := diffLine{Name: a.Server}
		switch a.Kind {
		case reconciler.ActionNothing, reconciler.ActionAdopt:
			if d.Server != nil {
				inSync++
			}
			continue
		case reconciler.ActionStart, reconciler.ActionWait:
			if d.Server == nil { // a pruned server waiting for its dependents
				l.Mark, l.What, l.Why = "-", "stop", "removed from the fleet files ("+a.Reason+")"
				break
			}
			l.Mark, l.What, l.Why = "+", "start", missingWhy(a, rv, snap)
			if a.Kind == reconciler.ActionWait {
				l.What = "start after its dependencies"
			}
			if h := portHolder(d.Instance.Port); h != "" {
				l.Hint = fmt.Sprintf("port %d is held by %s: apply will quarantine this server (PortConflict) until that process is stopped", d.Instance.Port, h)
			}
		case reconciler.ActionReplace:
			l.Mark, l.What = "~", "replace"
			l.Why = "spec changed: " + strings.Join(changedFields(rv.Record, d.Instance), ", ")
			l.Why += fmt.Sprintf(" (pid %d is stopped, then the new spec started)", rv.Record.PID)
			if d.Instance.Replicated() {
				l.Why += "; rolling: one instance of " + d.Instance.ReplicaOf + " at a time, each Ready before the next"
			}
		case reconciler.ActionStop:
			l.Mark, l.What = "-", "stop"
			l.Why = fmt.Sprintf("removed from the fleet files (pid %d is stopped, its record removed)", rv.Record.PID)
		case reconciler.ActionQuarantine:
			l.Mark, l.What = "!", "quarantined"
			l.Why = a.QuarantineReason + ": apply will not touch it and will fail until it is resolved"
			l.Hint = a.Message
		default:
			l.Mark, l.What, l.Why = "?", a.Kind.String(), a.Reason
		}
		lines = append(lines, l)
	}
	for server, sc := range scales {
		lines = append(lines, sc.line(server))
	}
	sort.SliceStable(lines, func(i, j int) bool { return lines[i].Name < lines[j].Name })
	return lines, inSync
}

// scaleChange is a change of a server's spec.replicas: the instances apply
// starts (scale up) or stops (scale down, the highest indices).
type scaleChange struct {
	from, to    int
	start, stop []string
}

// line is the change as diff shows it: one line for the server, "scale 2
// -> 3", never a start or stop per instance.
func (sc *scaleChange) line(server string) diffLine {
	l := diffLine{Name: server, Mark: "~", What: fmt.Sprintf("scale %d -> %d", sc.from, sc.to)}
	switch {
	case len(sc.start) > 0 && len(sc.stop) > 0:
		l.Why = "starts " + strings.Join(sc.start, ", ") + ", stops " + strings.Join(sc.stop, ", ")
	case len(sc.start) > 0:
		l.Why = "starts " + strings.Join(sc.start, ", ") + " (the others are left as they are)"
	default:
		l.Why = "stops " + strings.Join(sc.stop, ", ") + " (the highest indices, in parallel; the others are left as they are)"
	}
	return l
}

// scaleOf records a's change in scales and reports true when it is one of
// a scale: the start of a replica never started while others of its server
// run, or the stop of one beyond the declared count. from counts the
// instances procfleet has a record of (runs, or ran and did not stop).
func scaleOf(snap *reconciler.Snapshot, scales map[string]*scaleChange, a reconciler.Action, d reconciler.Desired, rv *reconciler.RecordView) bool {
	if snap.Fleet == nil {
		return false
	}
	var server string
	var starts bool
	switch {
	case d.Instance != nil && d.Instance.Replicated() && rv == nil && (a.Kind == reconciler.ActionStart || a.Kind == reconciler.ActionWait):
		server, starts = d.Instance.ReplicaOf, true
	case d.Server == nil && rv != nil && (a.Kind == reconciler.ActionStop || a.Kind == reconciler.ActionWait):
		name, i, ok := reconciler.SplitInstance(a.Server)
		s, declared := snap.Fleet.Get(name)
		if !ok || !declared || s.Spec.Replicas == nil || i < *s.Spec.Replicas {
			return false
		}
		server = name
	default:
		return false
	}
	sc := scales[server]
	if sc == nil {
		sc = &scaleChange{}
		for n := range snap.Records {
			if s, _, ok := reconciler.SplitInstance(n); ok && s == server {
				sc.from++
			}
		}
		if sc.from == 0 {
			return false // none runs yet: its instances start as any server does
		}
		s, _ := snap.Fleet.Get(server)
		sc.to = *s.Spec.Replicas
		scales[server] = sc
	}
	if starts {
		sc.start = append(sc.start, a.Server)
	} else {
		sc.stop = append(sc.stop, a.Server)
	}
	return true
}

// missingWhy says why a declared server is not running.
func missingWhy(a reconciler.Action, rv *reconciler.RecordView, snap *reconciler.Snapshot) string {
	why := "missing: never started, or stopped"
	if saved, ok := snap.Saved.Get(a.Server); ok && saved.LastExit != nil {
		why = "missing: last exit " + saved.LastExit.Reason
	}
	if rv != nil && (rv.Verdict == actuate.VerdictStale || rv.Verdict == actuate.VerdictReused) && rv.Untrusted == nil && rv.Newer == nil {
		why = fmt.Sprintf("crashed: %s (its record is stale)", rv.Message)
	}
	if a.Kind == reconciler.ActionWait {
		why += "; " + a.Reason
	}
	return why
}

// changedFields names the spec fields that differ between the running
// process and the declared instance (its command and args after $(NAME),
// its port spec.port + index). The record holds the command line and the
// port; env and workingDir are known only through the spec hash.
func changedFields(rec actuate.Record, in *spec.Instance) []string {
	old := spec.ServerSpec{Port: rec.Port}
	n := len(in.Command)
	if len(rec.Cmdline) >= n {
		old.Command, old.Args = rec.Cmdline[:n], rec.Cmdline[n:]
	} else {
		old.Command = rec.Cmdline
	}
	cur := spec.ServerSpec{Command: in.Command, Args: in.Args, Port: in.Port}
	fields := spec.FieldDiff(old, cur)
	if len(fields) == 0 {
		return []string{"env or workingDir (the record keeps only their hash)"}
	}
	return fields
}
