package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/procfleet/procfleet/actuate"
	"github.com/procfleet/procfleet/internal/api"
	"github.com/procfleet/procfleet/reconciler"
	"github.com/procfleet/procfleet/spec"
)

// Output formats of status.
const (
	outputTable = "table"
	outputJSON  = "json"
	outputYAML  = "yaml"
)

// Timing of status.
const (
	// dialTimeout bounds the attempt to reach a running up's socket.
	dialTimeout = 2 * time.Second
	// apiTimeout bounds one status request to a running up.
	apiTimeout = 10 * time.Second
	// watchInterval is how often status --watch looks again.
	watchInterval = time.Second
	// reasonWidth is the widest REASON shown in the table.
	reasonWidth = 60
)

func newStatusCmd(opts *globalOptions) *cobra.Command {
	var output string
	var watch bool
	cmd := &cobra.Command{
		Use:     "status [NAME]... [-o table|json|yaml] [--watch]",
		Aliases: []string{"ps"},
		Short:   "Show the fleet as observed now, with or without a running up",
		Long: `Status shows every server of the fleet files (default procfleet.yaml, or
-f) and every server with an ownership record in the state folder: its phase,
whether it is Ready, its pid and port, how often it was restarted, how long
it has run, and why it is in that phase.

When 'procfleet up' runs and answers on its socket, status asks it. Otherwise
status looks for itself: each record is checked against the process at its
pid (start time, boot id, command line, pidfd inode: the same proof up uses
before a signal), each running server's readiness probe is run once, and what only the
reconciler can know (restarts, the last exit, a crash loop) comes from the
status.json that up or apply last wrote. Status never starts, stops or
signals anything, and changes nothing in the state folder: an untrusted
record is shown as Quarantined / UntrustedRecord and left where it is.

Phases: Pending, Starting, Running, Stopping, Stopped, Failed,
CrashLoopBackOff, Quarantined.

Under the table, on standard error, a line names how the running servers'
processes are found: Membership: cgroup (each server in a cgroup of its
own) or session (its session and process group, and the processes carrying
its instance token).

-o json and -o yaml print {"servers": [...], "errors": [...]}, where errors
are the fleet files' load errors. --watch redraws the table in place on a
terminal; when the output is not a terminal it prints the table once, then
only the rows that change (with -o json, one JSON document a line per change).`,
		Example: `  # The whole fleet
  procfleet status

  # Two servers, as JSON (for jq)
  procfleet status api web -o json | jq '.servers[] | {name, phase, ready}'

  # Follow the fleet while it starts
  procfleet status --watch

  # A fleet in a folder, its state elsewhere
  procfleet status -f fleet.d --state-dir /tmp/pf-state -o yaml`,
		RunE: func(cmd *cobra.Command, names []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			for _, n := range names {
				if err := api.CheckName(n); err != nil {
					return &exitError{code: exitFailure, err: fmt.Errorf("status: %w", err)}
				}
			}
			out := cmd.OutOrStdout()
			if watch {
				return watchStatus(cmd.Context(), opts, names, output, out, isTerminal(out))
			}
			st, err := fleetStatus(cmd.Context(), opts, names)
			if err != nil {
				return err
			}
			if err := writeStatus(out, output, st, time.Now()); err != nil {
				return err
			}
			if line := membershipLine(st.Servers); line != "" && output == outputTable {
				fmt.Fprintln(cmd.ErrOrStderr(), line)
			}
			return nil
		},
	}
	cmd.ValidArgsFunction = completeServerNames(opts, 0)
	opts.addFileFlags(cmd)
	cmd.Flags().StringVarP(&output, "output", "o", outputTable, "output `FORMAT`: table, json or yaml")
	cmd.Flags().BoolVarP(&watch, "watch", "w", false, "keep watching: redraw on a terminal, print changes otherwise (Ctrl-C ends)")
	return cmd
}

func checkOutput(o string) error {
	switch o {
	case outputTable, outputJSON, outputYAML:
		return nil
	}
	return &exitError{code: exitFailure, err: fmt.Errorf("invalid --output %q: want table, json or yaml", o)}
}

// fleetStatus returns the status of the named servers (all when names is
// empty): from a running up when one answers, else observed here.
func fleetStatus(ctx context.Context, opts *globalOptions, names []string) (reconciler.Status, error) {
	v, err := viewFleet(ctx, opts, lookStatus)
	if err != nil {
		return reconciler.Status{}, fmt.Errorf("status: %w", err)
	}
	return v.only(names)
}

// fleetView is the fleet as status, describe or diff sees it: a running
// up's word when one answers, and (without up, or for describe's detail)
// the snapshot the reconciler takes of files, records and status.json.
type fleetView struct {
	// Status is what status prints (all servers).
	Status reconciler.Status
	// Snap is the read-only observation; nil when up answered and no
	// detail was asked for.
	Snap *reconciler.Snapshot
	// Live: Status came from a running up's API.
	Live bool
}

// only keeps the named servers, in the order given; the name of a server
// with replicas stands for its instances, in index order (those status
// shows, a scaled-away one still stopping included). An unknown name is an
// error with the nearest known name (expandNames).
func (v *fleetView) only(names []string) (reconciler.Status, error) {
	if len(names) == 0 {
		return v.Status, nil
	}
	known := make([]string, 0, len(v.Status.Servers))
	groups := map[string][]reconciler.ServerStatus{}
	for _, s := range v.Status.Servers {
		known = append(known, s.Name)
		if s.ReplicaOf != "" {
			groups[s.ReplicaOf] = append(groups[s.ReplicaOf], s)
		}
	}
	for g := range groups {
		known = append(known, g)
	}
	var fleet *spec.Fleet
	if v.Snap != nil {
		fleet = v.Snap.Fleet
	}
	if _, err := expandNames(names, fleet, known); err != nil {
		return reconciler.Status{}, fmt.Errorf("status: %w (check the name, or pass the fleet files with -f)", err)
	}
	out := reconciler.Status{Servers: make([]reconciler.ServerStatus, 0, len(names)), Errors: v.Status.Errors}
	seen := map[string]bool{}
	add := func(ss reconciler.ServerStatus) {
		if !seen[ss.Name] {
			seen[ss.Name] = true
			out.Servers = append(out.Servers, ss)
		}
	}
	for _, n := range names {
		if g, ok := groups[n]; ok {
			g = slices.Clone(g)
			sortGrouped(g)
			for _, ss := range g {
				add(ss)
			}
			continue
		}
		if ss, ok := v.Status.Get(n); ok {
			add(ss) // else a server with replicas: 0: nothing of it runs
		}
	}
	return out, nil
}

// sortGrouped orders status entries as the table shows them: by server,
// the replicas of one together in index order (api-2 before api-10).
func sortGrouped(servers []reconciler.ServerStatus) {
	key := func(s reconciler.ServerStatus) (string, int) {
		if s.ReplicaOf != "" && s.Index != nil {
			return s.ReplicaOf, *s.Index
		}
		return s.Name, -1
	}
	sort.SliceStable(servers, func(i, j int) bool {
		gi, ii := key(servers[i])
		gj, ij := key(servers[j])
		if gi != gj {
			return gi < gj
		}
		return ii < ij
	})
}

// look says how much viewFleet looks at.
type look struct {
	// Probe runs each owned server's readiness check once.
	Probe bool
	// AskUp asks a running up for its status over its socket.
	AskUp bool
	// Detail takes the snapshot even when up answers (describe shows the
	// records).
	Detail bool
}

var (
	// lookStatus is status's: up's word when it answers, else everything.
	lookStatus = look{Probe: true, AskUp: true}
	// lookDetail is describe's: everything.
	lookDetail = look{Probe: true, AskUp: true, Detail: true}
)

// viewFleet asks a running up, else (or also, for detail) observes once
// through reconciler.Inspect: the same observation code up runs.
func viewFleet(ctx context.Context, opts *globalOptions, how look) (*fleetView, error) {
	path, err := opts.StateDirPath()
	if err != nil {
		return nil, err
	}
	v := &fleetView{}
	if how.AskUp {
		if st, ok := statusFromUp(ctx, path); ok {
			v.Status, v.Live = st, true
			if !how.Detail {
				return v, nil
			}
		}
	}
	v.Snap, err = reconciler.Inspect(ctx, reconciler.InspectConfig{Files: opts.FleetPaths(), StatePath: path, Probe: how.Probe})
	if err != nil {
		return nil, err
	}
	if !v.Live {
		v.Status = v.Snap.Status(time.Now())
	}
	return v, nil
}

// statusFromUp asks a running up for its status; false when none answers.
func statusFromUp(ctx context.Context, statePath string) (reconciler.Status, bool) {
	if _, err := os.Stat(statePath); err != nil {
		return reconciler.Status{}, false
	}
	sd, err := actuate.InspectStateDir(statePath)
	if err != nil {
		return reconciler.Status{}, false
	}
	dctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	c, err := api.Dial(dctx, sd.SocketPath())
	if err != nil {
		return reconciler.Status{}, false
	}
	defer c.Close()
	sctx, cancel2 := context.WithTimeout(ctx, apiTimeout)
	defer cancel2()
	var st reconciler.Status
	if err := c.Status(sctx, nil, &st); err != nil {
		return reconciler.Status{}, false
	}
	if st.Servers == nil {
		st.Servers = []reconciler.ServerStatus{}
	}
	if st.Errors == nil {
		st.Errors = []reconciler.StatusError{}
	}
	return st, true
}

// writeStatus prints st in format. now dates the AGE column.
func writeStatus(w io.Writer, format string, st reconciler.Status, now time.Time) error {
	switch format {
	case outputJSON:
		b, err := json.MarshalIndent(documented(st), "", "  ")
		if err != nil {
			return fmt.Errorf("status: %w", err)
		}
		_, err = fmt.Fprintf(w, "%s\n", b)
		return err
	case outputYAML:
		b, err := yaml.Marshal(documented(st))
		if err != nil {
			return fmt.Errorf("status: %w", err)
		}
		_, err = w.Write(b)
		return err
	}
	return writeTable(w, st, now)
}

// documented is st with the fields of DESIGN.md's `status -o json` only:
// the membership mode, which up's API carries for the table's line, is
// left out of the document.
func documented(st reconciler.Status) reconciler.Status {
	servers := slices.Clone(st.Servers)
	for i := range servers {
		servers[i].Membership = ""
	}
	st.Servers = servers
	return st
}

var tableHeader = []string{"NAME", "PHASE", "READY", "PID", "PORT", "RESTARTS", "AGE", "REASON"}

// tableRows renders the servers as table cells.
func tableRows(st reconciler.Status, now time.Time) [][]string {
	rows := make([][]string, 0, len(st.Servers))
	servers := slices.Clone(st.Servers)
	sortGrouped(servers)
	for _, s := range servers {
		ready := "no"
		if s.Ready {
			ready = "yes"
		}
		age := "-"
		if s.StartedAt != nil && (s.Phase == reconciler.PhaseRunning || s.Phase == reconciler.PhaseStarting || s.Phase == reconciler.PhaseStopping) {
			age = shortAge(now.Sub(*s.StartedAt))
		}
		rows = append(rows, []string{s.Name, s.Phase.String(), ready, dash(s.PID), dash(s.Port), strconv.Itoa(s.Restarts), age, shortReason(s)})
	}
	return rows
}

func writeTable(w io.Writer, st reconciler.Status, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(tableHeader, "\t"))
	for _, r := range tableRows(st, now) {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	return writeFileErrors(w, st.Errors)
}

// membershipLine names how the running servers' processes are found
// (DESIGN.md "Membership"): one mode for all, or the servers of each mode;
// "" when none runs. Status prints it to stderr under the table, so that
// standard output stays the table's rows.
func membershipLine(servers []reconciler.ServerStatus) string {
	byMode := map[actuate.MembershipMode][]string{}
	for _, s := range servers {
		if s.PID > 0 && s.Membership != "" {
			byMode[s.Membership] = append(byMode[s.Membership], s.Name)
		}
	}
	explain := map[actuate.MembershipMode]string{
		actuate.MembershipCgroup:  "cgroup (each server's processes are the members of its own cgroup)",
		actuate.MembershipSession: "session (each server's session and process group, and the processes carrying its instance token; cgroups are not available)",
	}
	switch len(byMode) {
	case 0:
		return ""
	case 1:
		for m := range byMode {
			if text, ok := explain[m]; ok {
				return "Membership: " + text
			}
			return "Membership: " + string(m)
		}
	}
	var parts []string
	for _, m := range []actuate.MembershipMode{actuate.MembershipCgroup, actuate.MembershipSession} {
		if names := byMode[m]; len(names) > 0 {
			sort.Strings(names)
			parts = append(parts, fmt.Sprintf("%s for %s", m, strings.Join(names, ", ")))
		}
	}
	return "Membership: " + strings.Join(parts, "; ")
}

func writeFileErrors(w io.Writer, errs []reconciler.StatusError) error {
	if len(errs) == 0 {
		return nil
	}
	fmt.Fprintf(w, "\nThe fleet files have %d error(s); a running up keeps the last good fleet until they are fixed:\n", len(errs))
	for _, e := range errs {
		loc := e.File
		if e.Line > 0 {
			loc += ":" + strconv.Itoa(e.Line)
		}
		if e.Field != "" {
			loc += ": " + e.Field
		}
		if loc != "" {
			loc += ": "
		}
		if _, err := fmt.Fprintf(w, "  %s%s\n", loc, e.Message); err != nil {
			return err
		}
	}
	return nil
}

func dash(n int) string {
	if n == 0 {
		return "-"
	}
	return strconv.Itoa(n)
}

// shortAge renders a duration as the table's AGE: 45s, 12m, 5h, 3d.
func shortAge(d time.Duration) string {
	switch {
	case d < 0:
		return "0s"
	case d < 2*time.Minute:
		return fmt.Sprintf("%ds", int(d/time.Second))
	case d < 2*time.Hour:
		return fmt.Sprintf("%dm", int(d/time.Minute))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d/time.Hour))
	}
	return fmt.Sprintf("%dd", int(d/(24*time.Hour)))
}

// shortReason is the table's REASON: the reason, its first line, clipped.
func shortReason(s reconciler.ServerStatus) string {
	r := s.Reason
	if r == "" {
		r = s.Message
	}
	if i := strings.IndexByte(r, '\n'); i >= 0 {
		r = r[:i]
	}
	if utf8.RuneCountInString(r) > reasonWidth {
		rs := []rune(r)
		r = string(rs[:reasonWidth-3]) + "..."
	}
	if r == "" {
		return "-"
	}
	return r
}
