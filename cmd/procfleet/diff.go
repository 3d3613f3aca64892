package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/procfleet/procfleet/actuate"
	"github.com/procfleet/procfleet/reconciler"
	"github.com/procfleet/procfleet/spec"
)

// Output formats of diff.
const (
	diffText = "text"
	diffJSON = "json"
)

func newDiffCmd(opts *globalOptions) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "diff [-f PATH]... [-o text|json]",
		Short: "Show what apply would do, server by server, and why",
		Long: `Diff compares the fleet files with what runs and prints what 'procfleet apply'
would do to each server that is not as declared, with the reason:

  + NAME: start: missing: never started, or stopped (or: crashed, its record stale)
  + NAME: start after its dependencies: ...
  ~ NAME: replace: spec changed: the fields that differ (pid N is stopped, ...)
  ~ NAME: update, no restart: the fields that change without a restart
  - NAME: stop: removed from the fleet files (pid N is stopped, ...)
  ! NAME: quarantined: REASON: apply will not touch it and will fail until
          it is resolved
      followed by a hint line where there is one: who holds a port, how to
      stop a process by hand, or what to do with an untrusted record

A changed server is followed by one line per field: command, args,
workingDir and port as old -> new; each environment variable that envFile
or env set whose value changed, by name only ("LOG_LEVEL changed"; values
are never printed); and probes, timeouts, restartPolicy, dependsOn,
minReadySeconds and labels marked "no restart" (they apply without one).
They are computed from what the process runs with, which procfleet keeps
beside its record (started/<name>.json in the state folder, variables as
salted hashes); for a process started by an older procfleet only the
command line and port recorded are compared.

It plans with the same function apply and up use (reconciler.Plan), from the
same observation a fresh apply starts with: the records in the state folder,
each checked against the process at its pid. It changes nothing.

-o json prints {"inSync": N, "changes": [{"name", "action", "reason",
"hint", "pid", "fields": [{"field", "var", "how", "old", "new",
"restart"}]}]}, the same exit status.

Exit status: 0 when the fleet is in sync, 2 when changes are pending, 1 on
an error (the fleet files do not load, the state folder is unreadable).`,
		Example: `  # What would apply do?
  procfleet diff

  # In CI: fail the job when the running fleet drifted from the files
  procfleet diff -f fleet.d || echo "drift (exit $?)"

  # The changed variables of each server, by name
  procfleet diff -o json | jq '.changes[] | {name, vars: [.fields[] | select(.var) | .var]}'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output != diffText && output != diffJSON {
				return &exitError{code: exitFailure, err: fmt.Errorf("invalid --output %q: want text or json", output)}
			}
			return runDiff(cmd.Context(), opts, cmd.OutOrStdout(), output)
		},
	}
	opts.addFileFlags(cmd)
	cmd.Flags().StringVarP(&output, "output", "o", diffText, "output `FORMAT`: text or json")
	return cmd
}

// diffLine is one server that apply would change.
type diffLine struct {
	Name string `json:"name"`
	// Mark is +, ~, - or !.
	Mark string `json:"-"`
	// What apply would do ("start", "replace", "update, no restart",
	// "stop", "quarantined"), and why.
	What string `json:"action"`
	Why  string `json:"reason"`
	// Hint says what a person can do (quarantine, port conflict).
	Hint string `json:"hint,omitempty"`
	// PID is the running process apply would stop or replace.
	PID int `json:"pid,omitempty"`
	// Fields are the changes of a replace or update, field by field.
	Fields []diffField `json:"fields,omitempty"`
}

// diffField is one changed field: spec.Change as diff prints it. A
// variable's values are never in it.
type diffField struct {
	Field   string `json:"field"`
	Var     string `json:"var,omitempty"`
	How     string `json:"how,omitempty"`
	Old     string `json:"old,omitempty"`
	New     string `json:"new,omitempty"`
	Restart bool   `json:"restart"`
}

// diffReport is diff -o json.
type diffReport struct {
	InSync  int        `json:"inSync"`
	Changes []diffLine `json:"changes"`
}

func runDiff(ctx context.Context, opts *globalOptions, w io.Writer, output string) error {
	v, err := viewFleet(ctx, opts, look{})
	if err != nil {
		return fmt.Errorf("diff: %w", err)
	}
	if v.Snap.LoadErr != nil {
		return fleetError("diff", v.Snap.LoadErr)
	}
	lines, inSync := planDiff(v.Snap, reconciler.PortHolder)
	if output == diffJSON {
		if lines == nil {
			lines = []diffLine{}
		}
		b, err := json.MarshalIndent(diffReport{InSync: inSync, Changes: lines}, "", "  ")
		if err != nil {
			return fmt.Errorf("diff: %w", err)
		}
		fmt.Fprintf(w, "%s\n", b)
	} else {
		writeDiff(w, lines, inSync, v.Snap.Files)
	}
	if len(lines) == 0 {
		return nil
	}
	return silentExit(exitPending)
}

// writeDiff prints the lines as text.
func writeDiff(w io.Writer, lines []diffLine, inSync int, files []string) {
	if len(lines) == 0 {
		fmt.Fprintf(w, "in sync: %d server(s) as declared in %s\n", inSync, strings.Join(files, ", "))
		return
	}
	for _, l := range lines {
		fmt.Fprintf(w, "%s %s: %s: %s\n", l.Mark, l.Name, l.What, l.Why)
		for _, f := range l.Fields {
			fmt.Fprintf(w, "    %s\n", fieldText(f))
		}
		if l.Hint != "" {
			fmt.Fprintf(w, "    %s\n", l.Hint)
		}
	}
	fmt.Fprintf(w, "%d change(s) pending, %d server(s) in sync; 'procfleet apply' (or a running up) carries them out\n", len(lines), inSync)
}

// fieldText is one changed field on a line: "spec.args: [...] -> [...]",
// "env LOG_LEVEL: changed", with "(no restart)" for the fields that apply
// without one.
func fieldText(f diffField) string {
	var out string
	if f.Var != "" {
		out = fmt.Sprintf("env %s: %s (value not shown)", f.Var, f.How)
	} else {
		out = fmt.Sprintf("%s: %s -> %s", f.Field, orNone(f.Old), orNone(f.New))
	}
	if !f.Restart {
		out += " (no restart)"
	}
	return out
}

func orNone(s string) string {
	if s == "" || s == "null" {
		return "none"
	}
	return s
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
			if d.Server == nil {
				continue
			}
			fields := changesOf(snap, d, rv)
			if len(fields) == 0 {
				inSync++
				continue
			}
			l.Mark, l.What, l.PID, l.Fields = "~", "update, no restart", rv.Record.PID, fields
			l.Why = "changed without a restart: " + strings.Join(fieldNames(fields), ", ")
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
			l.Mark, l.What, l.PID = "~", "replace", rv.Record.PID
			names := changedFields(rv.Record, d.Instance)
			if l.Fields = changesOf(snap, d, rv); len(l.Fields) > 0 {
				names = restartFieldNames(l.Fields)
			}
			l.Why = "spec changed: " + strings.Join(names, ", ")
			l.Why += fmt.Sprintf(" (pid %d is stopped, then the new spec started)", rv.Record.PID)
			if d.Instance.Replicated() {
				l.Why += "; rolling: one instance of " + d.Instance.ReplicaOf + " at a time, each Ready before the next"
			}
		case reconciler.ActionStop:
			l.Mark, l.What, l.PID = "-", "stop", rv.Record.PID
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

// changesOf is what differs between what the process of rv runs with and
// d, field by field; nil when that is not known (no started/<name>.json
// for the process) or nothing differs.
func changesOf(snap *reconciler.Snapshot, d reconciler.Desired, rv *reconciler.RecordView) []diffField {
	if rv == nil || rv.Started == nil || d.Server == nil {
		return nil
	}
	in := d.Instance
	if in == nil && snap.Fleet != nil {
		in, _ = snap.Fleet.Instance(rv.Record.Name)
	}
	if in == nil {
		return nil
	}
	var out []diffField
	for _, c := range rv.Started.Changes(in) {
		f := diffField{Field: c.Field, Var: c.Var, How: c.How, Restart: c.Restart}
		if c.Var == "" {
			f.Old, f.New = c.Old, c.New
		}
		out = append(out, f)
	}
	return out
}

// fieldNames names the changed fields once each, short: "args", "env
// LOG_LEVEL", "readinessProbe".
func fieldNames(fields []diffField) []string {
	var out []string
	for _, f := range fields {
		n := strings.TrimPrefix(strings.TrimPrefix(f.Field, "spec."), "metadata.")
		if f.Var != "" {
			n = "env " + f.Var
		}
		if len(out) == 0 || out[len(out)-1] != n {
			out = append(out, n)
		}
	}
	return out
}

// restartFieldNames is fieldNames of the fields that replace the server.
func restartFieldNames(fields []diffField) []string {
	var r []diffField
	for _, f := range fields {
		if f.Restart {
			r = append(r, f)
		}
	}
	return fieldNames(r)
}
