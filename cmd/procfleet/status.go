package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/procfleet/procfleet/actuate"
	"github.com/procfleet/procfleet/internal/api"
	"github.com/procfleet/procfleet/observe"
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
	// probeParallel bounds the readiness checks run at once.
	probeParallel = 16
)

// Reasons status reports for what it finds without a running up.
const (
	reasonNotStarted = "NotStarted"
	reasonNotRunning = "NotRunning"
	reasonExited     = "Exited"
	reasonUndeclared = "NotDeclared"
)

func newStatusCmd(opts *globalOptions) *cobra.Command {
	var output string
	var watch bool
	cmd := &cobra.Command{
		Use:   "status [NAME]... [-o table|json|yaml] [--watch]",
		Short: "Show the fleet as observed now, with or without a running up",
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
			return writeStatus(out, output, st, time.Now())
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
	v, err := observeFleet(ctx, opts, lookStatus)
	if err != nil {
		return reconciler.Status{}, fmt.Errorf("status: %w", err)
	}
	return v.Status.only(names, v.describeSources())
}

// fleetView is the fleet as one status, describe or diff sees it.
type fleetView struct {
	// Status is what status prints (all servers).
	Status statusList
	// Fleet is the loaded fleet; nil when the files do not load.
	Fleet *spec.Fleet
	// LoadErr is the fleet files' load error, if any.
	LoadErr error
	// Files are the fleet paths read.
	Files []string
	// StateDir is the opened state folder; nil when there is none.
	StateDir *actuate.StateDir
	// StatePath is where the state folder is (or would be).
	StatePath string
	// Observed holds, per server with a record, what was found at its pid.
	Observed map[string]*observedServer
	// Saved is the status.json last written by up or apply (empty if none).
	Saved reconciler.Status
	// UpPID is the pid of the running up (or apply, down) holding the state
	// folder's lock, 0 when none.
	UpPID int
	// Live: Status came from a running up's API.
	Live bool
}

// statusList is reconciler.Status with the lookups status needs.
type statusList struct{ reconciler.Status }

// only keeps the named servers, in the order given; an unknown name is an
// error that says where status looked.
func (s statusList) only(names []string, where string) (reconciler.Status, error) {
	if len(names) == 0 {
		return s.Status, nil
	}
	out := reconciler.Status{Servers: make([]reconciler.ServerStatus, 0, len(names)), Errors: s.Errors}
	var missing []string
	for _, n := range names {
		ss, ok := s.Get(n)
		if !ok {
			missing = append(missing, n)
			continue
		}
		out.Servers = append(out.Servers, ss)
	}
	if len(missing) > 0 {
		return out, fmt.Errorf("status: no server named %s in %s (check the name, or pass the fleet files with -f)",
			strings.Join(missing, ", "), where)
	}
	return out, nil
}

func (v *fleetView) describeSources() string {
	return fmt.Sprintf("the fleet files (%s) or the state folder %s", strings.Join(v.Files, ", "), v.StatePath)
}

// observedServer is what was found for one record.
type observedServer struct {
	Record actuate.Record
	// Untrusted is set for a record that could not be trusted (rule 7); the
	// rest is then empty.
	Untrusted *actuate.UntrustedRecordError
	// Newer is set for a record written by a newer procfleet, which this
	// one cannot read (rule 6: its owner cannot be checked); the rest is
	// then empty.
	Newer    *actuate.NewerRecordError
	Verdict  actuate.Verdict
	Reason   actuate.QuarantineReason
	Message  string
	Identity observe.Identity
	Evidence string
	// Ready is the readiness check run now for an owned process; nil when it
	// has none (running is ready) or was not owned.
	Ready *observe.ProbeResult
}

// look says how much observeFleet looks at.
type look struct {
	// Probe runs each owned server's readiness check once.
	Probe bool
	// AskUp asks a running up for its status over its socket.
	AskUp bool
	// Detail reads and verifies the records even when up answers
	// (describe shows them).
	Detail bool
}

var (
	// lookStatus is status's: up's word when it answers, else everything.
	lookStatus = look{Probe: true, AskUp: true}
	// lookDetail is describe's: everything.
	lookDetail = look{Probe: true, AskUp: true, Detail: true}
)

// observeFleet gathers everything status, describe and diff show: the fleet
// files, the records verified against the kernel, readiness checked once,
// status.json, and (when up answers on its socket) up's own status.
func observeFleet(ctx context.Context, opts *globalOptions, how look) (*fleetView, error) {
	v := &fleetView{Files: opts.FleetPaths(), Observed: map[string]*observedServer{}}
	path, err := opts.StateDirPath()
	if err != nil {
		return nil, err
	}
	v.StatePath = path
	v.Fleet, v.LoadErr = spec.Load(v.Files...)

	if _, err := os.Stat(path); err == nil {
		sd, err := actuate.InspectStateDir(path)
		if err != nil {
			return nil, fmt.Errorf("read the state folder: %w", err)
		}
		v.StateDir = sd
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("read the state folder %s: %w", path, err)
	}
	if v.StateDir == nil && v.LoadErr != nil && noFleetFile(v.LoadErr) {
		return nil, fmt.Errorf("no fleet file at %s and no state folder at %s: nothing to look at (pass the fleet files with -f, or the state folder with --state-dir)",
			strings.Join(v.Files, ", "), path)
	}

	if v.StateDir != nil && how.AskUp {
		if st, ok := statusFromUp(ctx, v.StateDir); ok {
			v.Status, v.Live = statusList{st}, true
			if !how.Detail {
				return v, nil
			}
		}
	}
	if v.StateDir != nil {
		v.UpPID = lockHolder(v.StateDir)
		if saved, err := reconciler.ReadStatus(v.StateDir.StatusPath()); err == nil {
			v.Saved = saved
		}
		// Status, describe and diff never hold the state folder's lock:
		// they inspect the records and leave an untrusted one where it
		// is (the lock holder, up, apply or down, moves it aside).
		recs, errs := v.StateDir.InspectRecords()
		for _, rerr := range errs {
			var ue *actuate.UntrustedRecordError
			if errors.As(rerr, &ue) {
				v.Observed[ue.Name] = &observedServer{Record: actuate.Record{Name: ue.Name}, Untrusted: ue}
				continue
			}
			var ne *actuate.NewerRecordError
			if errors.As(rerr, &ne) {
				v.Observed[ne.Name] = &observedServer{Record: actuate.Record{Name: ne.Name}, Newer: ne}
				continue
			}
			return nil, fmt.Errorf("read the records in %s: %w (check the folder's owner and mode; it must be this user's, mode 0700)", v.StateDir.Path, rerr)
		}
		v.verify(ctx, recs, how.Probe)
	}
	if v.Live {
		return v, nil
	}
	v.Status = statusList{v.compose(time.Now())}
	return v, nil
}

// noFleetFile reports a load error that is only "the file does not exist".
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

// statusFromUp asks a running up for its status; false when none answers.
func statusFromUp(ctx context.Context, sd *actuate.StateDir) (reconciler.Status, bool) {
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

// lockHolder returns the pid written in the state folder's lock file when
// that process is alive, else 0. It does not take the lock (that would
// make an up starting at the same moment fail).
func lockHolder(sd *actuate.StateDir) int {
	b, err := os.ReadFile(sd.LockPath())
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 || pid == os.Getpid() {
		return 0
	}
	if observe.CheckLiveness(pid) != observe.LivenessAlive {
		return 0
	}
	return pid
}

// verify checks each record against the kernel, and runs the readiness
// check of each owned server once, in parallel.
func (v *fleetView) verify(ctx context.Context, recs []actuate.Record, probe bool) {
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, probeParallel)
	for _, rec := range recs {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			vr := actuate.Verify(rec)
			ob := &observedServer{Record: rec, Verdict: vr.Verdict, Reason: vr.Reason, Message: vr.Message,
				Identity: vr.Identity, Evidence: vr.Evidence}
			if vr.Handle != nil {
				_ = vr.Handle.Close()
			}
			if vr.Verdict == actuate.VerdictOwned && probe {
				var srv *spec.Server
				if v.Fleet != nil {
					srv, _ = v.Fleet.Get(rec.Name)
				}
				ob.Ready = readinessNow(ctx, srv, rec.Port)
			}
			mu.Lock()
			v.Observed[rec.Name] = ob
			mu.Unlock()
		})
	}
	wg.Wait()
}

// readinessNow runs a server's readiness check once: its declared probe,
// else a TCP connect to its port; nil when it has neither (running is
// ready). A server no longer declared is checked on its recorded port.
func readinessNow(ctx context.Context, srv *spec.Server, port int) *observe.ProbeResult {
	if srv == nil {
		if port <= 0 {
			return nil
		}
		r := observe.ProbeTCP(ctx, "", port, time.Second)
		return &r
	}
	r, ok := runProbe(ctx, srv, srv.Spec.EffectiveReadiness())
	if !ok {
		return nil
	}
	return &r
}

// runProbe runs one probe of srv; false when p is nil.
func runProbe(ctx context.Context, srv *spec.Server, p *spec.Probe) (observe.ProbeResult, bool) {
	if p == nil {
		return observe.ProbeResult{}, false
	}
	port := func(n int) int {
		if n == 0 {
			return srv.Spec.Port
		}
		return n
	}
	switch {
	case p.HTTPGet != nil:
		return observe.ProbeHTTP(ctx, p.HTTPGet.Host, port(p.HTTPGet.Port), p.HTTPGet.Path, p.Timeout()), true
	case p.TCPSocket != nil:
		return observe.ProbeTCP(ctx, p.TCPSocket.Host, port(p.TCPSocket.Port), p.Timeout()), true
	case p.Exec != nil:
		env := make([]string, 0, len(srv.Spec.Env))
		for _, e := range srv.Spec.Env {
			env = append(env, e.Name+"="+e.Value)
		}
		return observe.ProbeExec(ctx, p.Exec.Command, srv.Spec.WorkingDir, env, p.Timeout()), true
	}
	return observe.ProbeResult{}, false
}

// compose builds the status from the fleet, the records and status.json,
// for every server declared or recorded.
func (v *fleetView) compose(now time.Time) reconciler.Status {
	declared := map[string]*spec.Server{}
	if v.Fleet != nil {
		for i := range v.Fleet.Servers {
			declared[v.Fleet.Servers[i].Metadata.Name] = &v.Fleet.Servers[i]
		}
	}
	names := map[string]bool{}
	for n := range declared {
		names[n] = true
	}
	for n := range v.Observed {
		names[n] = true
	}
	if v.Fleet == nil {
		// The files do not load: what up last knew still names the fleet.
		for _, s := range v.Saved.Servers {
			names[s.Name] = true
		}
	}
	st := reconciler.Status{Servers: make([]reconciler.ServerStatus, 0, len(names)), Errors: []reconciler.StatusError{}}
	for n := range names {
		var saved *reconciler.ServerStatus
		if s, ok := v.Saved.Get(n); ok {
			saved = &s
		}
		_, isDeclared := declared[n]
		in := composeInput{Name: n, Declared: declared[n], Undeclared: v.Fleet != nil && !isDeclared,
			Observed: v.Observed[n], Saved: saved, UpRunning: v.UpPID > 0}
		st.Servers = append(st.Servers, composeServer(in, now))
	}
	sort.Slice(st.Servers, func(i, j int) bool { return st.Servers[i].Name < st.Servers[j].Name })
	var list spec.ErrorList
	if errors.As(v.LoadErr, &list) {
		for _, fe := range list {
			st.Errors = append(st.Errors, reconciler.StatusError{File: fe.File, Line: fe.Line, Field: fe.Field, Message: fe.Message})
		}
	} else if v.LoadErr != nil {
		st.Errors = append(st.Errors, reconciler.StatusError{Message: v.LoadErr.Error()})
	}
	return st
}

// composeInput is what is known of one server without a running up's word.
type composeInput struct {
	Name string
	// Declared is the server in the fleet files; nil when not declared or
	// when the files do not load.
	Declared *spec.Server
	// Undeclared: the files load and do not declare it.
	Undeclared bool
	// Observed is its record as verified; nil when it has none.
	Observed *observedServer
	// Saved is its entry in status.json; nil when none.
	Saved *reconciler.ServerStatus
	// UpRunning: an up holds the state folder (it will act on what it sees).
	UpRunning bool
}

// composeServer decides one server's status from what was observed now
// (the record's verdict and the readiness check win) and what status.json
// remembers (restarts, the last exit, and phases that only the reconciler
// can know: Starting, CrashLoopBackOff, a PortConflict quarantine). It is a
// pure function.
func composeServer(in composeInput, now time.Time) reconciler.ServerStatus {
	ss := reconciler.ServerStatus{Name: in.Name}
	if in.Declared != nil {
		ss.Port = in.Declared.Spec.Port
	}
	saved := in.Saved
	if saved != nil {
		ss.Restarts, ss.LastExit = saved.Restarts, saved.LastExit
		if ss.Port == 0 {
			ss.Port = saved.Port
		}
	}
	ob := in.Observed
	var readyMsg string
	switch {
	case ob != nil && ob.Untrusted != nil:
		ss.Phase, ss.Reason = reconciler.PhaseQuarantined, string(actuate.UntrustedRecord)
		ss.Message = untrustedAdvice(ob.Untrusted)

	case ob != nil && ob.Newer != nil:
		ss.Phase, ss.Reason = reconciler.PhaseQuarantined, string(actuate.UnverifiedOwner)
		ss.Message = ob.Newer.Error()

	case ob != nil && ob.Verdict == actuate.VerdictOwned:
		rec := ob.Record
		ss.PID, ss.Port = rec.PID, rec.Port
		at := rec.StartedAt
		ss.StartedAt = &at
		ss.Ready = ob.Ready == nil || ob.Ready.OK
		if ob.Ready != nil && !ob.Ready.OK {
			readyMsg = "readiness check failed: " + ob.Ready.Message
		}
		ss.Phase, ss.Reason, ss.Message = reconciler.PhaseRunning, "running", readyMsg
		switch {
		case in.UpRunning && saved != nil && !ss.Ready && (saved.Phase == reconciler.PhaseStarting || saved.Phase == reconciler.PhaseStopping):
			ss.Phase, ss.Reason = saved.Phase, saved.Reason
		case in.Undeclared:
			ss.Reason = reasonUndeclared
			ss.Message = "removed from the fleet files; 'procfleet apply' or a running up stops it, or stop it now with 'procfleet down " + in.Name + "'"
		case saved != nil && saved.Phase == reconciler.PhaseRunning && (saved.PID == 0 || saved.PID == rec.PID) && ss.Ready:
			ss.Reason = saved.Reason
		case ss.Ready:
			ss.Reason = "ready"
		default:
			ss.Reason = "not ready"
		}

	case ob != nil && ob.Verdict == actuate.VerdictQuarantine:
		ss.PID = ob.Record.PID
		ss.Phase, ss.Reason = reconciler.PhaseQuarantined, string(ob.Reason)
		ss.Message = ob.Message + "; nothing was signalled; " + actuate.ManualStopHint(ob.Record)

	default:
		// Not running: no record, or a record whose process is gone or
		// whose pid now belongs to another process.
		var gone string
		if ob != nil {
			gone = ob.Message
			if gone == "" {
				gone = fmt.Sprintf("pid %d is gone", ob.Record.PID)
			}
		}
		composeNotRunning(&ss, in, gone)
	}

	cond := reconciler.Condition{Type: reconciler.ConditionReady, Status: reconciler.ConditionFalse, Reason: ss.Reason, Message: readyMsg}
	if ss.Ready {
		cond = reconciler.Condition{Type: reconciler.ConditionReady, Status: reconciler.ConditionTrue}
	}
	switch {
	case saved != nil && len(saved.Conditions) > 0 && saved.Conditions[0].Status == cond.Status && !saved.Conditions[0].LastTransitionTime.IsZero():
		cond = saved.Conditions[0]
	case ss.Ready && ss.StartedAt != nil:
		cond.LastTransitionTime = *ss.StartedAt
	default:
		cond.LastTransitionTime = now
	}
	ss.Conditions = []reconciler.Condition{cond}
	return ss
}

// untrustedAdvice says what is wrong with an untrusted record file and
// what a person can do about it. The commands that only look (status,
// describe, diff) leave the file in place (MovedTo empty); up, apply and
// down move it aside.
func untrustedAdvice(ue *actuate.UntrustedRecordError) string {
	if ue.MovedTo != "" {
		return fmt.Sprintf("the record file %s cannot be trusted (%s); it was moved aside to %s. Check it, delete it, then run 'procfleet apply'.",
			ue.Path, ue.Reason, ue.MovedTo)
	}
	return fmt.Sprintf("the record file %s cannot be trusted (%s); procfleet never reads it. Check it, delete it or move it away, then run 'procfleet apply'. Left as it is, the next 'procfleet apply', 'up' or 'down' moves it aside to %s.corrupt-<time>.",
		ue.Path, ue.Reason, filepath.Base(ue.Path))
}

// composeNotRunning fills the phase of a server that has no running
// process. gone describes a record whose process is gone ("" when there is
// no record).
func composeNotRunning(ss *reconciler.ServerStatus, in composeInput, gone string) {
	saved := in.Saved
	what := "'procfleet apply' or 'procfleet up' starts it"
	if in.Undeclared || (in.Declared == nil && saved == nil) {
		ss.Phase, ss.Reason = reconciler.PhaseStopped, reasonUndeclared
		ss.Message = "not in the fleet files"
		if gone != "" {
			ss.Message += "; " + gone
		}
		return
	}
	if saved != nil {
		switch saved.Phase {
		case reconciler.PhaseFailed, reconciler.PhaseStopped, reconciler.PhaseQuarantined:
			ss.Phase, ss.Reason, ss.Message = saved.Phase, saved.Reason, saved.Message
			return
		case reconciler.PhasePending, reconciler.PhaseCrashLoopBackOff, reconciler.PhaseStarting:
			if in.UpRunning {
				ss.Phase, ss.Reason, ss.Message = saved.Phase, saved.Reason, saved.Message
				return
			}
		}
	}
	if in.UpRunning {
		ss.Phase, ss.Reason = reconciler.PhasePending, reasonNotRunning
		ss.Message = "not running; the running up will start it"
		if gone != "" {
			ss.Message = gone + "; the running up will restart it"
		}
		return
	}
	switch {
	case gone != "":
		ss.Phase, ss.Reason = reconciler.PhaseFailed, reasonExited
		ss.Message = gone + "; no procfleet up is running to restart it: " + what
		if ss.LastExit != nil && ss.LastExit.Reason != "" {
			ss.Message = ss.LastExit.Reason + "; " + ss.Message
		}
	case saved == nil:
		ss.Phase, ss.Reason = reconciler.PhaseStopped, reasonNotStarted
		ss.Message = "not started: " + what
	case ss.LastExit != nil && ss.LastExit.Failed():
		ss.Phase, ss.Reason = reconciler.PhaseFailed, reasonExited
		ss.Message = ss.LastExit.Reason + "; no procfleet up is running to restart it: " + what
	default:
		ss.Phase, ss.Reason = reconciler.PhaseStopped, reasonNotRunning
		ss.Message = "not running: " + what
	}
}

// writeStatus prints st in format. now dates the AGE column.
func writeStatus(w io.Writer, format string, st reconciler.Status, now time.Time) error {
	switch format {
	case outputJSON:
		b, err := json.MarshalIndent(st, "", "  ")
		if err != nil {
			return fmt.Errorf("status: %w", err)
		}
		_, err = fmt.Fprintf(w, "%s\n", b)
		return err
	case outputYAML:
		b, err := yaml.Marshal(st)
		if err != nil {
			return fmt.Errorf("status: %w", err)
		}
		_, err = w.Write(b)
		return err
	}
	return writeTable(w, st, now)
}

var tableHeader = []string{"NAME", "PHASE", "READY", "PID", "PORT", "RESTARTS", "AGE", "REASON"}

// tableRows renders the servers as table cells.
func tableRows(st reconciler.Status, now time.Time) [][]string {
	rows := make([][]string, 0, len(st.Servers))
	for _, s := range st.Servers {
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

// watchStatus prints the status again every watchInterval until ctx ends.
// On a terminal it redraws the screen; otherwise it prints the table once,
// then only the rows that changed (JSON and YAML: the whole document, one
// per change).
func watchStatus(ctx context.Context, opts *globalOptions, names []string, format string, w io.Writer, terminal bool) error {
	t := time.NewTicker(watchInterval)
	defer t.Stop()
	var last string
	var lastRows map[string]string
	for first := true; ; first = false {
		st, err := fleetStatus(ctx, opts, names)
		if err != nil {
			return err
		}
		now := time.Now()
		switch {
		case terminal:
			var b strings.Builder
			if err := writeStatus(&b, format, st, now); err != nil {
				return err
			}
			fmt.Fprintf(&b, "\nEvery %s: procfleet status (Ctrl-C ends)   %s\n", watchInterval, now.Format("15:04:05"))
			// Home, then each line over the old one (cleared to its end),
			// then clear what is left below: no flicker.
			frame := "\x1b[H" + strings.ReplaceAll(b.String(), "\n", "\x1b[K\n") + "\x1b[J"
			if first {
				frame = "\x1b[2J" + frame
			}
			if _, err := io.WriteString(w, frame); err != nil {
				return err
			}
		case format == outputTable:
			rows := changedRows(lastRows, st, now)
			if first {
				if err := writeStatus(w, format, st, now); err != nil {
					return err
				}
			} else if err := writeRowsOnly(w, rows, st, now); err != nil {
				return err
			}
			lastRows = rowKeys(st, now)
		default:
			// A change is a change of a row (AGE aside) or of the errors:
			// the document itself carries times that move on their own.
			key := fmt.Sprint(rowKeys(st, now), st.Errors)
			if key != last {
				doc, err := changeDocument(format, st)
				if err != nil {
					return err
				}
				if _, err := io.WriteString(w, doc); err != nil {
					return err
				}
				last = key
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// rowKeys maps each server to its row without the AGE column (which
// changes every second and is not a change worth a line).
func rowKeys(st reconciler.Status, now time.Time) map[string]string {
	m := map[string]string{}
	for _, r := range tableRows(st, now) {
		k := append(append([]string{}, r[:6]...), r[7])
		m[r[0]] = strings.Join(k, "\t")
	}
	return m
}

// changedRows returns the names of the servers whose row differs from
// last (new ones included), in table order; removed servers come back as
// "-name".
func changedRows(last map[string]string, st reconciler.Status, now time.Time) []string {
	cur := rowKeys(st, now)
	var out []string
	for _, s := range st.Servers {
		if last[s.Name] != cur[s.Name] {
			out = append(out, s.Name)
		}
	}
	var gone []string
	for n := range last {
		if _, ok := cur[n]; !ok {
			gone = append(gone, "-"+n)
		}
	}
	sort.Strings(gone)
	return append(out, gone...)
}

// writeRowsOnly prints the rows of the named servers, columns as wide as in
// a table, with a header-less tabwriter; a removed server is one line.
func writeRowsOnly(w io.Writer, names []string, st reconciler.Status, now time.Time) error {
	if len(names) == 0 {
		return nil
	}
	rows := map[string][]string{}
	for _, r := range tableRows(st, now) {
		rows[r[0]] = r
	}
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	for _, n := range names {
		if strings.HasPrefix(n, "-") {
			fmt.Fprintf(tw, "%s\t(gone: no longer declared or recorded)\n", strings.TrimPrefix(n, "-"))
			continue
		}
		fmt.Fprintln(tw, strings.Join(rows[n], "\t"))
	}
	return tw.Flush()
}

// changeDocument renders st for --watch when piped: JSON on one line, YAML
// as a document with its separator.
func changeDocument(format string, st reconciler.Status) (string, error) {
	if format == outputJSON {
		b, err := json.Marshal(st)
		if err != nil {
			return "", fmt.Errorf("status: %w", err)
		}
		return string(b) + "\n", nil
	}
	b, err := yaml.Marshal(st)
	if err != nil {
		return "", fmt.Errorf("status: %w", err)
	}
	return "---\n" + string(b), nil
}
