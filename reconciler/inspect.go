package reconciler

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/procfleet/procfleet/actuate"
	"github.com/procfleet/procfleet/observe"
	"github.com/procfleet/procfleet/spec"
)

// Reasons the read-only status reports for what it finds without a running
// up.
const (
	ReasonNotStarted  = "NotStarted"
	ReasonNotRunning  = "NotRunning"
	ReasonNotDeclared = "NotDeclared"
	ReasonStartFailed = "StartFailed"
)

// inspectParallel bounds the records verified (and probed) at once.
const inspectParallel = 16

// InspectConfig says what Inspect looks at.
type InspectConfig struct {
	// Files are the fleet files and folders.
	Files []string
	// StatePath is the state folder; it need not exist.
	StatePath string
	// Probe runs each owned server's readiness check once.
	Probe bool
}

// RecordView is one record as Inspect found it: read without moving
// anything, verified against the kernel with the same code up runs.
type RecordView struct {
	Record actuate.Record
	// Untrusted is set for a record that cannot be trusted (rule 7), Newer
	// for one written by a newer procfleet (rule 6); the rest is then
	// empty.
	Untrusted *actuate.UntrustedRecordError
	Newer     *actuate.NewerRecordError
	Verdict   actuate.Verdict
	Reason    actuate.QuarantineReason
	Message   string
	Identity  observe.Identity
	Evidence  string
	// Observed is what Plan reads of it (ObservedFromRecord).
	Observed Observed
	// Ready is the readiness check run now for an owned process; nil when
	// it has none (running is ready) or was not run.
	Ready *observe.ProbeResult
	// Started is what the owned process runs with (started/<name>.json);
	// nil when that is not known (a process started by an older procfleet,
	// or not yet Ready).
	Started *StartedWith
}

// Snapshot is the fleet as status, describe and diff see it without a
// running up: the fleet files, the records verified, status.json, and who
// holds the state folder. Taking it changes nothing and signals nothing.
type Snapshot struct {
	Files []string
	// Fleet is the loaded fleet; nil when the files do not load (LoadErr).
	Fleet   *spec.Fleet
	LoadErr error
	// StatePath is where the state folder is (or would be); StateDir is
	// nil when there is none.
	StatePath string
	StateDir  *actuate.StateDir
	// Records holds, per server with a record, what was found.
	Records map[string]*RecordView
	// Saved is the status.json last written by up or apply (empty if none).
	Saved Status
	// UpPID is the pid holding the state folder's lock (up, apply, down),
	// 0 when none.
	UpPID int
}

// ErrNothingToInspect: no fleet file and no state folder.
var ErrNothingToInspect = errors.New("nothing to look at")

// Inspect takes a Snapshot. It never holds the state folder's lock: it
// inspects the records and leaves an untrusted one where it is (the lock
// holder moves it aside).
func Inspect(ctx context.Context, cfg InspectConfig) (*Snapshot, error) {
	s := &Snapshot{Files: cfg.Files, StatePath: cfg.StatePath, Records: map[string]*RecordView{}}
	s.Fleet, s.LoadErr = spec.Load(cfg.Files...)
	if _, err := os.Stat(cfg.StatePath); err == nil {
		sd, err := actuate.InspectStateDir(cfg.StatePath)
		if err != nil {
			return nil, fmt.Errorf("read the state folder: %w", err)
		}
		s.StateDir = sd
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("read the state folder %s: %w", cfg.StatePath, err)
	}
	if s.StateDir == nil && s.LoadErr != nil && noFleetFile(s.LoadErr) {
		return nil, fmt.Errorf("%w: no fleet file at %s and no state folder at %s (pass the fleet files with -f, or the state folder with --state-dir)",
			ErrNothingToInspect, strings.Join(cfg.Files, ", "), cfg.StatePath)
	}
	if s.StateDir == nil {
		return s, nil
	}
	s.UpPID = lockHolder(s.StateDir)
	if saved, err := ReadStatus(s.StateDir.StatusPath()); err == nil {
		s.Saved = saved
	}
	recs, errs := s.StateDir.InspectRecords()
	for _, rerr := range errs {
		rv, ok := unreadableRecordView(rerr)
		if !ok {
			return nil, fmt.Errorf("read the records in %s: %w (check the folder's owner and mode; it must be this user's, mode 0700)", s.StateDir.Path, rerr)
		}
		s.Records[rv.Record.Name] = rv
	}
	s.verify(ctx, recs, cfg.Probe)
	return s, nil
}

// verify checks each record against the kernel, and runs the readiness
// check of each owned server once, in parallel.
func (s *Snapshot) verify(ctx context.Context, recs []actuate.Record, probe bool) {
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, inspectParallel)
	for _, rec := range recs {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			rv := verifiedRecordView(actuate.Verify, rec)
			if rv.Verdict == actuate.VerdictOwned {
				rv.Started, _ = ReadStartedWith(s.StateDir.Path, rec) // a help for diff: unreadable means unknown
				if probe {
					rv.Ready = s.readinessNow(ctx, rec)
				}
			}
			mu.Lock()
			s.Records[rec.Name] = rv
			mu.Unlock()
		})
	}
	wg.Wait()
}

// readinessNow runs an instance's readiness check once, as up does; one
// no longer declared is checked on its recorded port.
func (s *Snapshot) readinessNow(ctx context.Context, rec actuate.Record) *observe.ProbeResult {
	var in *spec.Instance
	if s.Fleet != nil {
		in, _ = s.Fleet.Instance(rec.Name)
	}
	if in == nil {
		if rec.Port <= 0 {
			return nil
		}
		r := observe.ProbeTCP(ctx, "", rec.Port, time.Second)
		return &r
	}
	r, ok := ProbeOnce(ctx, in, ReadinessProbe(in))
	if !ok {
		return nil
	}
	return &r
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

// lockHolder returns the pid written in the state folder's lock file when
// that process is alive, else 0. It does not take the lock (that would make
// an up starting at the same moment fail).
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

// Sources names where the snapshot looked, for "no server named X in ...".
func (s *Snapshot) Sources() string {
	return fmt.Sprintf("the fleet files (%s) or the state folder %s", strings.Join(s.Files, ", "), s.StatePath)
}

// Desired is the fleet as Plan reads it.
func (s *Snapshot) Desired() map[string]Desired {
	if s.Fleet == nil {
		return map[string]Desired{}
	}
	return desiredOf(s.Fleet, false)
}

// Plan is what a fresh apply would do: Plan over the fleet and the records'
// verdicts, nothing tracked, nothing remembered (no exits, no backoff).
func (s *Snapshot) Plan() []Action {
	observed := map[string]Observed{}
	for name, rv := range s.Records {
		o := rv.Observed
		o.Phase = PhasePending
		observed[name] = o
	}
	return Plan(s.Desired(), observed)
}

// Status is the fleet's status as the snapshot shows it: every server
// declared or recorded (or, when the files do not load, the ones up last
// knew), each summarized by summarize.
func (s *Snapshot) Status(now time.Time) Status {
	declared := map[string]*spec.Instance{}
	var instances map[string][]string
	if s.Fleet != nil {
		insts := s.Fleet.Instances()
		for i := range insts {
			declared[insts[i].Name] = &insts[i]
		}
		instances = instanceNamesOf(s.Fleet)
	}
	names := map[string]bool{}
	for n := range declared {
		names[n] = true
	}
	for n := range s.Records {
		names[n] = true
	}
	if s.Fleet == nil {
		for _, ss := range s.Saved.Servers {
			names[ss.Name] = true
		}
	}
	st := Status{Servers: make([]ServerStatus, 0, len(names)), Errors: []StatusError{}}
	for n := range names {
		var saved *ServerStatus
		if ss, ok := s.Saved.Get(n); ok {
			saved = &ss
		}
		inst, isDeclared := declared[n]
		in := summaryInput{Name: n, Undeclared: s.Fleet != nil && !isDeclared,
			Record: s.Records[n], Saved: saved, UpRunning: s.UpPID > 0}
		var d Desired
		if isDeclared {
			in.Declared, in.Port = inst.Server, inst.Port
			d = Desired{Server: inst.Server, Instance: inst}
		}
		ss := summarize(in, now)
		ss.setReplica(d, instances)
		st.Servers = append(st.Servers, ss)
	}
	sort.Slice(st.Servers, func(i, j int) bool { return st.Servers[i].Name < st.Servers[j].Name })
	var list spec.ErrorList
	if errors.As(s.LoadErr, &list) {
		st.Errors = statusErrors(list)
	} else if s.LoadErr != nil {
		st.Errors = append(st.Errors, StatusError{Message: s.LoadErr.Error()})
	}
	return st
}

// summaryInput is what is known of one server without a running up's word.
type summaryInput struct {
	Name string
	// Declared is the server in the fleet files; nil when not declared or
	// when the files do not load. Port is the declared instance's port
	// (spec.port + index for a replica).
	Declared *spec.Server
	Port     int
	// Undeclared: the files load and do not declare it.
	Undeclared bool
	// Record is its record as inspected; nil when it has none.
	Record *RecordView
	// Saved is its entry in status.json; nil when none.
	Saved *ServerStatus
	// UpRunning: an up holds the state folder (it will act on what it sees).
	UpRunning bool
}

// summarize decides one server's status from what was observed now (the
// record's verdict and the readiness check win) and what status.json
// remembers (restarts, the last exit, and phases that only the reconciler
// can know: Starting, CrashLoopBackOff, a PortConflict quarantine). It is a
// pure function.
func summarize(in summaryInput, now time.Time) ServerStatus {
	ss := ServerStatus{Name: in.Name, Port: in.Port}
	saved := in.Saved
	if saved != nil {
		ss.Restarts, ss.LastExit = saved.Restarts, saved.LastExit
		if ss.Port == 0 {
			ss.Port = saved.Port
		}
		if in.Declared == nil && !in.Undeclared {
			// The files do not load: what up last knew of it.
			ss.ReplicaOf, ss.Index = saved.ReplicaOf, saved.Index
		}
	}
	rv := in.Record
	var readyMsg string
	switch {
	case rv != nil && rv.Observed.Ownership == OwnQuarantined:
		ss.Phase, ss.Reason, ss.Message = PhaseQuarantined, rv.Observed.Reason, rv.Observed.Message
		if rv.Record.PID > 0 {
			ss.PID, ss.Port = rv.Record.PID, rv.Record.Port
			ss.Membership = actuate.MembershipOf(rv.Record)
		}

	case rv != nil && rv.Observed.Ownership == OwnOwned:
		rec := rv.Record
		ss.PID, ss.Port = rec.PID, rec.Port
		ss.Membership = actuate.MembershipOf(rec)
		at := rec.StartedAt
		ss.StartedAt = &at
		ss.Ready = rv.Ready == nil || rv.Ready.OK
		if rv.Ready != nil && !rv.Ready.OK {
			readyMsg = "readiness check failed: " + rv.Ready.Message
		}
		window := false
		if min, in := minReadyWindow(in, rec, now); ss.Ready && in {
			ss.Ready, window, readyMsg = false, true, minReadyMessage(min)
		}
		ss.Phase, ss.Reason, ss.Message = PhaseRunning, "running", readyMsg
		switch {
		case in.UpRunning && saved != nil && !ss.Ready && (saved.Phase == PhaseStarting || saved.Phase == PhaseStopping):
			ss.Phase, ss.Reason = saved.Phase, saved.Reason
		case in.Undeclared:
			ss.Reason = ReasonNotDeclared
			ss.Message = "removed from the fleet files; 'procfleet apply' or a running up stops it, or stop it now with 'procfleet down " + in.Name + "'"
		case saved != nil && saved.Phase == PhaseRunning && (saved.PID == 0 || saved.PID == rec.PID) && ss.Ready:
			ss.Reason = saved.Reason
		case ss.Ready:
			ss.Reason = "ready"
		case window:
			ss.Reason = ReasonMinReadySeconds
		default:
			ss.Reason = "not ready"
		}

	default:
		// Not running: no record, or a record whose process is gone or
		// whose pid now belongs to another process.
		var gone string
		if rv != nil {
			gone = rv.Observed.Reason
			if gone == "" {
				gone = fmt.Sprintf("pid %d is gone", rv.Record.PID)
			}
		}
		summarizeNotRunning(&ss, in, gone)
	}

	cond := Condition{Type: ConditionReady, Status: ConditionFalse, Reason: ss.Reason, Message: readyMsg}
	if ss.Ready {
		cond = Condition{Type: ConditionReady, Status: ConditionTrue}
	}
	switch {
	case saved != nil && len(saved.Conditions) > 0 && saved.Conditions[0].Status == cond.Status && !saved.Conditions[0].LastTransitionTime.IsZero():
		cond = saved.Conditions[0]
	case ss.Ready && ss.StartedAt != nil:
		cond.LastTransitionTime = *ss.StartedAt
	default:
		cond.LastTransitionTime = now
	}
	ss.Conditions = []Condition{cond}
	return ss
}

// exitReason is the REASON of a server that is not running after an exit:
// StartFailed when its program never ran (not found, not executable), else
// Exited.
func exitReason(le *LastExit) string {
	if le != nil && le.Code == -1 && le.Signal == "" && !strings.HasPrefix(le.Reason, "exited") {
		return ReasonStartFailed
	}
	return ReasonExited
}

// summarizeNotRunning fills the phase of a server that has no running
// process. gone describes a record whose process is gone ("" when there is
// no record).
func summarizeNotRunning(ss *ServerStatus, in summaryInput, gone string) {
	saved := in.Saved
	what := "'procfleet apply' or 'procfleet up' starts it"
	if in.Undeclared || (in.Declared == nil && saved == nil) {
		ss.Phase, ss.Reason = PhaseStopped, ReasonNotDeclared
		ss.Message = "not in the fleet files"
		if gone != "" {
			ss.Message += "; " + gone
		}
		return
	}
	if saved != nil {
		switch saved.Phase {
		case PhaseFailed, PhaseStopped, PhaseQuarantined:
			ss.Phase, ss.Reason, ss.Message = saved.Phase, saved.Reason, saved.Message
			return
		case PhasePending, PhaseCrashLoopBackOff, PhaseStarting:
			if in.UpRunning {
				ss.Phase, ss.Reason, ss.Message = saved.Phase, saved.Reason, saved.Message
				return
			}
		}
	}
	if in.UpRunning {
		ss.Phase, ss.Reason = PhasePending, ReasonNotRunning
		ss.Message = "not running; the running up will start it"
		if gone != "" {
			ss.Message = gone + "; the running up will restart it"
		}
		return
	}
	switch {
	case gone != "":
		ss.Phase, ss.Reason = PhaseFailed, ReasonExited
		ss.Message = gone + "; no procfleet up is running to restart it: " + what
		if ss.LastExit != nil && ss.LastExit.Reason != "" {
			ss.Message = ss.LastExit.Reason + "; " + ss.Message
		}
	case saved == nil:
		ss.Phase, ss.Reason = PhaseStopped, ReasonNotStarted
		ss.Message = "not started: " + what
	case ss.LastExit != nil && ss.LastExit.Failed():
		ss.Phase, ss.Reason = PhaseFailed, exitReason(ss.LastExit)
		ss.Message = ss.LastExit.Reason + "; no procfleet up is running to restart it: " + what
	default:
		ss.Phase, ss.Reason = PhaseStopped, ReasonNotRunning
		ss.Message = "not running: " + what
	}
}
