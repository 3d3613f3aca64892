package reconciler

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"runtime"
	"sort"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/utils/clock"

	"github.com/procfleet/procfleet/actuate"
	"github.com/procfleet/procfleet/internal/logfile"
	"github.com/procfleet/procfleet/observe"
	"github.com/procfleet/procfleet/spec"
)

// Defaults of Config.
const (
	DefaultResyncPeriod = 30 * time.Second
	// startupReadyPeriod is how often the default readiness check (the port
	// accepts TCP) runs while a server starts: it bounds how late "ready" is
	// seen, and costs one loopback connect per server per period while
	// starting only.
	startupReadyPeriod = 10 * time.Millisecond
	// statusWriteInterval is the least time between two writes of
	// status.json.
	statusWriteInterval = 50 * time.Millisecond
)

// Actuator is what the reconciler needs to change the world
// (*actuate.Actuator).
type Actuator interface {
	Spawn(ctx context.Context, req actuate.StartRequest) (*actuate.Running, error)
	WaitReady(ctx context.Context, req actuate.StartRequest, r *actuate.Running) error
	Stop(ctx context.Context, rec actuate.Record, opts actuate.StopOptions) error
}

// RecordStore is what the reconciler needs of the state folder's records
// (*actuate.StateDir).
type RecordStore interface {
	ReadRecord(name string) (actuate.Record, error)
	Records() ([]actuate.Record, []error)
	RemoveRecord(name string) error
	WriteRecord(rec actuate.Record) error
}

// ExitWatcher tells when a watched process exits (*observe.ExitWatcher).
type ExitWatcher interface {
	Watch(h *observe.Handle, fn func())
	Unwatch(h *observe.Handle)
}

// Config configures a Reconciler. Zero values mean the defaults named.
type Config struct {
	// Files are the fleet files and folders (-f). Empty means
	// procfleet.yaml.
	Files []string
	// StateDir is the opened state folder. Required.
	StateDir *actuate.StateDir
	// Log receives the reconciler's logs. The zero Logger discards.
	Log logr.Logger
	// Clock drives backoff, resync, probes and the file debounce. Nil means
	// the real clock.
	Clock clock.WithTicker
	// Workers bounds how many servers are reconciled at once. Zero means
	// 16 x GOMAXPROCS, at least 64. Starting only spawns (readiness is
	// awaited off the workers), but a stop holds its worker until the
	// process has exited and its port is free, mostly waiting: the bound
	// is how many servers stop in parallel.
	Workers int
	// ResyncPeriod is how often every server is looked at again. Zero means
	// DefaultResyncPeriod; negative disables the resync.
	ResyncPeriod time.Duration
	// Debounce is the file watcher's quiet time. Zero means DefaultDebounce.
	Debounce time.Duration
	// OnEvent receives every event as it happens (progress lines). Nil
	// means none. It must not block for long.
	OnEvent func(Event)
	// OneShot (apply): a server that exits or fails to start is reported
	// Failed and not restarted.
	OneShot bool
	// Backoff is the restart backoff. Nil means a Backoff with the
	// DESIGN.md defaults on Clock.
	Backoff *Backoff

	// Actuator, Records and Exits replace the real implementations (tests).
	// Nil means actuate.Actuator, StateDir and observe.NewExitWatcher.
	Actuator Actuator
	Records  RecordStore
	Exits    ExitWatcher
	// Verify checks a record against the process at its pid. Nil means
	// actuate.Verify.
	Verify func(actuate.Record) actuate.Verification
	// Metrics, when set, receives the reconciler's metrics (NewMetrics).
	// Nil means none.
	Metrics *Metrics
	// LogRotation sets when Run rotates the servers' logs (logs/*.log in
	// StateDir): once as it starts, then on each periodic resync. The zero
	// value means logfile's defaults (10 MiB, 3 copies kept).
	LogRotation logfile.Options
}

// Reconciler keeps the servers in the state the fleet files declare.
type Reconciler struct {
	cfg     Config
	log     logr.Logger
	clock   clock.WithTicker
	backoff *Backoff
	act     Actuator
	records RecordStore
	exits   ExitWatcher
	verify  func(actuate.Record) actuate.Verification
	events  *eventFiles
	queue   queue
	closeFn func() error // closes the exit watcher we made

	statusKick chan struct{}
	// statusFault and eventsFault log a run of failed status.json or
	// events file writes once.
	statusFault, eventsFault writeFault

	// changeMu guards changeCh, closed (and replaced) on every change of a
	// phase, readiness or pass, so that any number of waiters wake.
	changeMu sync.Mutex
	changeCh chan struct{}

	mu      sync.Mutex
	desired map[string]Desired
	fleet   *spec.Fleet
	errs    spec.ErrorList
	servers map[string]*server
	held    map[string]bool
	passes  uint64         // reconcile passes done; server.lastPass is the last one's number
	fw      *FleetWatcher  // set by Run
	starts  sync.WaitGroup // readiness waits, probers and exit-status looks in flight
}

// server is the reconciler's memory of one server. Every field is guarded
// by Reconciler.mu.
type server struct {
	name     string
	phase    Phase
	reason   string
	message  string
	restarts int
	ready    Condition
	isReady  bool
	events   ring

	// tracked is the owned process this reconciler watches (started or
	// adopted), nil when none.
	tracked *tracked
	// starting: spawned, readiness awaited by a goroutine; startDone is
	// closed when it ends, startCancel abandons it (the process stays).
	starting    bool
	startHash   string
	startBegan  time.Time
	startCancel context.CancelFunc
	startDone   chan struct{}

	// The last exit (or failed start) not followed by a new start.
	lastExit    *LastExit
	exitPending bool
	exitHash    string
	restartAt   time.Time

	portHolder string
	// quarantine holds a quarantine found while stopping (Unkillable) so that
	// it is not stopped again while its record stands.
	quarantine *actuate.QuarantineError
	// untrusted is the record moved aside that caused an UntrustedRecord
	// quarantine: what is re-examined to lift it.
	untrusted *actuate.UntrustedRecordError
	// recordErr says why a record could not be written or removed (the
	// state folder full or read-only), "" when none; it is the status
	// message until a write or removal succeeds.
	recordErr string
	// rewrite: the tracked process's record on disk was untrusted and
	// writing it again failed; each pass tries again.
	rewrite bool

	livenessFailed bool
	probeCancel    context.CancelFunc
	// learnCancel ends the look for the exit status of the last adopted
	// process that exited (learnExit).
	learnCancel context.CancelFunc

	// lastPass is the number of this server's last reconcile pass.
	lastPass uint64
}

type tracked struct {
	rec       actuate.Record
	handle    *observe.Handle
	running   *actuate.Running // nil when adopted
	spec      spec.ServerSpec
	startedAt time.Time
}

// New builds a Reconciler. It loads nothing and starts nothing: Run and
// Converge do.
func New(cfg Config) (*Reconciler, error) {
	if cfg.StateDir == nil && (cfg.Records == nil || cfg.Actuator == nil) {
		return nil, errors.New("reconciler: Config.StateDir is required")
	}
	r := &Reconciler{
		cfg:        cfg,
		log:        cfg.Log,
		clock:      cfg.Clock,
		backoff:    cfg.Backoff,
		act:        cfg.Actuator,
		records:    cfg.Records,
		exits:      cfg.Exits,
		verify:     cfg.Verify,
		statusKick: make(chan struct{}, 1),
		changeCh:   make(chan struct{}),
		servers:    map[string]*server{},
		held:       map[string]bool{},
	}
	if r.clock == nil {
		r.clock = clock.RealClock{}
	}
	if r.backoff == nil {
		r.backoff = &Backoff{Clock: r.clock}
	}
	if r.cfg.Workers <= 0 {
		r.cfg.Workers = max(64, 16*runtime.GOMAXPROCS(0))
	}
	if r.cfg.ResyncPeriod == 0 {
		r.cfg.ResyncPeriod = DefaultResyncPeriod
	}
	if r.records == nil {
		r.records = cfg.StateDir
	}
	if r.act == nil {
		r.act = &actuate.Actuator{Dir: cfg.StateDir, Log: r.log.WithName("actuate"), Events: actuatorEvents{r}}
	}
	if r.verify == nil {
		r.verify = actuate.Verify
	}
	if cfg.StateDir != nil {
		r.events = &eventFiles{path: cfg.StateDir.EventsPath}
	}
	cfg.Metrics.attach(r)
	return r, nil
}

// actuatorEvents adapts the reconciler to actuate.EventSink.
type actuatorEvents struct{ r *Reconciler }

func (a actuatorEvents) Event(server, reason, message string) {
	typ := EventNormal
	if reason == actuate.EventQuarantined || reason == actuate.EventStartFailed {
		typ = EventWarning
	}
	a.r.event(server, typ, reason, message, true)
}

// event records an event for a server: its ring, its events file, the log
// and OnEvent.
func (r *Reconciler) event(name, typ, reason, message string, detail bool) {
	e := Event{Time: r.clock.Now(), Server: name, Type: typ, Reason: reason, Message: message, Detail: detail}
	r.mu.Lock()
	if s := r.servers[name]; s != nil {
		s.events.add(e)
	}
	r.mu.Unlock()
	if err := r.events.append(e); err != nil {
		r.eventsFault.failed(r.log, err, "Cannot append to the events file", "server", name)
	} else {
		r.eventsFault.ok(r.log, "Events file written again")
	}
	// With OnEvent set (the commands print a progress line per event) the
	// log line would say it twice: it moves to V(1).
	if detail || r.cfg.OnEvent != nil {
		r.log.V(1).Info("Event", "server", name, "type", typ, "reason", reason, "message", message)
	} else {
		r.log.Info("Event", "server", name, "type", typ, "reason", reason, "message", message)
	}
	if r.cfg.OnEvent != nil {
		r.cfg.OnEvent(e)
	}
}

// setDesired installs a fleet as the desired state.
func (r *Reconciler) setDesired(f *spec.Fleet, errs spec.ErrorList) {
	d := make(map[string]Desired, len(f.Servers))
	for i := range f.Servers {
		s := &f.Servers[i]
		d[s.Metadata.Name] = Desired{Server: s, Hash: s.Hash()}
	}
	r.mu.Lock()
	r.fleet, r.desired, r.errs = f, d, errs
	r.mu.Unlock()
	r.kickStatus()
}

// Status returns the status of every declared, tracked or recorded server,
// sorted by name, and the fleet-file errors.
func (r *Reconciler) Status() Status {
	r.mu.Lock()
	defer r.mu.Unlock()
	st := Status{Servers: make([]ServerStatus, 0, len(r.servers)), Errors: statusErrors(r.errs)}
	for _, s := range r.servers {
		ss := ServerStatus{
			Name: s.name, Phase: s.phase, Ready: s.isReady, Restarts: s.restarts,
			Reason: s.reason, Message: s.message, LastExit: s.lastExit,
			Conditions: []Condition{s.ready}, Events: s.events.list(),
		}
		if ss.Conditions[0].Type == "" {
			ss.Conditions[0] = Condition{Type: ConditionReady, Status: ConditionUnknown}
		}
		if d, ok := r.desired[s.name]; ok && d.Server != nil {
			ss.Port = d.Server.Spec.Port
		}
		if t := s.tracked; t != nil {
			ss.PID, ss.Port = t.rec.PID, t.rec.Port
			at := t.startedAt
			ss.StartedAt = &at
		}
		st.Servers = append(st.Servers, ss)
	}
	sort.Slice(st.Servers, func(i, j int) bool { return st.Servers[i].Name < st.Servers[j].Name })
	return st
}

func (r *Reconciler) kickStatus() {
	select {
	case r.statusKick <- struct{}{}:
	default:
	}
	r.notifyChange()
}

// notifyChange wakes every waiter of changes().
func (r *Reconciler) notifyChange() {
	r.changeMu.Lock()
	close(r.changeCh)
	r.changeCh = make(chan struct{})
	r.changeMu.Unlock()
}

// changes returns a channel closed at the next change.
func (r *Reconciler) changes() <-chan struct{} {
	r.changeMu.Lock()
	defer r.changeMu.Unlock()
	return r.changeCh
}

// statusWriter writes status.json after changes until ctx ends, then once
// more. Writes are at least statusWriteInterval apart: a fleet changing at
// once (100 servers stopping) kicks it hundreds of times, and each write
// takes a snapshot of every server under the reconciler's lock, which the
// workers need too; the file lags the changes by at most that interval.
func (r *Reconciler) statusWriter(ctx context.Context) {
	if r.cfg.StateDir == nil {
		return
	}
	write := func() {
		if err := WriteStatus(r.cfg.StateDir.StatusPath(), r.Status()); err != nil {
			// The state folder is full or read-only: status.json keeps
			// its last content (atomic writes); the next change tries
			// again.
			r.statusFault.failed(r.log, err, "Cannot write status")
		} else {
			r.statusFault.ok(r.log, "Status written again")
		}
	}
	for {
		select {
		case <-ctx.Done():
			write()
			return
		case <-r.statusKick:
			write()
		}
		// Let the changes of the next interval gather into one write.
		if !r.sleep(ctx, statusWriteInterval) {
			write()
			return
		}
	}
}

// serverLocked returns the memory of a server, creating it in Pending.
func (r *Reconciler) serverLocked(name string) *server {
	s := r.servers[name]
	if s == nil {
		s = &server{name: name, phase: PhasePending}
		s.ready = Condition{Type: ConditionReady, Status: ConditionUnknown}
		r.servers[name] = s
	}
	return s
}

// setPhaseLocked moves s to phase p, refusing moves the table forbids.
func (r *Reconciler) setPhaseLocked(s *server, p Phase, reason string) {
	if !s.phase.CanTransition(p) {
		r.log.Error(&TransitionError{Server: s.name, From: s.phase, To: p}, "Phase change refused", "server", s.name, "reason", reason)
		return
	}
	if s.phase != p || s.reason != reason {
		s.phase, s.reason = p, reason
		r.kickStatus()
	}
}

func (r *Reconciler) setPhase(s *server, p Phase, reason string) {
	r.mu.Lock()
	r.setPhaseLocked(s, p, reason)
	r.mu.Unlock()
}

// setReadyLocked updates the Ready condition and the backoff's view of it.
func (r *Reconciler) setReadyLocked(s *server, ready bool, reason, message string) bool {
	st := ConditionFalse
	if ready {
		st = ConditionTrue
	}
	changed := setCondition(&s.ready, st, reason, message, r.clock.Now())
	s.isReady = ready
	if ready {
		r.backoff.Ready(s.name)
	} else {
		r.backoff.NotReady(s.name)
	}
	if changed {
		r.kickStatus()
	}
	return changed
}

// names returns every server that is declared, remembered, or has a record.
func (r *Reconciler) names() []string {
	set := map[string]bool{}
	recs, errs := r.records.Records()
	for _, rec := range recs {
		set[rec.Name] = true
	}
	for _, err := range errs {
		var ue *actuate.UntrustedRecordError
		if errors.As(err, &ue) {
			r.quarantineUntrusted(ue)
			continue
		}
		r.log.Error(err, "Cannot read a record")
	}
	r.mu.Lock()
	for n := range r.desired {
		set[n] = true
	}
	for n := range r.servers {
		set[n] = true
	}
	r.mu.Unlock()
	out := make([]string, 0, len(set))
	for n := range set {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

func (r *Reconciler) quarantineUntrusted(ue *actuate.UntrustedRecordError) {
	r.mu.Lock()
	s := r.serverLocked(ue.Name)
	if t := s.tracked; t != nil && !t.handle.Exited() {
		// This reconciler holds the pinned handle of the process (it started
		// or adopted it: identity proven), so the record on disk is only
		// damaged, not a doubt about the process: write it again. If that
		// fails too (the state folder full or read-only), the process stays
		// Running and tracked, never quarantined, and each pass tries again
		// (rewriteRecord).
		r.mu.Unlock()
		msg := "record rewritten: the one on disk was untrusted"
		if ue.MovedTo != "" {
			msg += " and moved aside to " + ue.MovedTo
		}
		_ = r.writeTrackedRecord(s, t, msg)
		return
	}
	s.setUntrusted(ue)
	was := s.phase
	r.setPhaseLocked(s, PhaseQuarantined, string(actuate.UntrustedRecord))
	s.message = ue.Error()
	r.mu.Unlock()
	if was != PhaseQuarantined {
		r.event(ue.Name, EventWarning, ReasonQuarantined, ue.Error(), false)
	}
}

// setUntrusted puts s in an UntrustedRecord quarantine for the record ue
// moved aside; recordGone lifts it. The caller holds r.mu.
func (s *server) setUntrusted(ue *actuate.UntrustedRecordError) {
	s.quarantine = &actuate.QuarantineError{Name: s.name, Reason: actuate.UntrustedRecord, Message: ue.Error()}
	s.untrusted = ue
}

// writeTrackedRecord writes the record of a tracked process again. On
// success it reports RecordRewritten with msg; on failure it reports
// RecordFailed (once per run of failures), marks the record to be written
// again at the next pass, and returns the error.
func (r *Reconciler) writeTrackedRecord(s *server, t *tracked, msg string) error {
	if err := r.records.WriteRecord(t.rec); err != nil {
		r.mu.Lock()
		if s.tracked == t {
			s.rewrite = true
		}
		r.mu.Unlock()
		r.recordFailed(s, fmt.Sprintf("cannot write the record of pid %d (it runs on, tracked through its %s pin; retrying): %v", t.rec.PID, t.handle.Mode(), err))
		return fmt.Errorf("rewrite the record of server %s: %w", s.name, err)
	}
	r.mu.Lock()
	if s.tracked == t {
		s.rewrite = false
	}
	r.recordOKLocked(s)
	r.mu.Unlock()
	r.event(s.name, EventWarning, ReasonRecordRewritten, msg, false)
	return nil
}

// rewriteRecord retries, at each pass, the write of a tracked process's
// record that failed (state folder full or read-only). An untrusted file
// still there is moved aside first (ReadRecord does), as a resync would.
func (r *Reconciler) rewriteRecord(s *server) error {
	r.mu.Lock()
	t := s.tracked
	if t == nil {
		s.rewrite = false
	}
	retry := s.rewrite
	r.mu.Unlock()
	if !retry || t.handle.Exited() {
		return nil // an exit is the next pass's: it removes the record
	}
	msg := "record rewritten: writing it had failed"
	var ue *actuate.UntrustedRecordError
	if _, err := r.records.ReadRecord(s.name); errors.As(err, &ue) && ue.MovedTo != "" {
		msg += "; the untrusted one was moved aside to " + ue.MovedTo
	}
	return r.writeTrackedRecord(s, t, msg)
}

// recordFailed reports that a record could not be written or removed: the
// status message says so until it succeeds; the event is sent when a run
// of failures begins, not at each retry.
func (r *Reconciler) recordFailed(s *server, msg string) {
	r.mu.Lock()
	first := s.recordErr == ""
	if s.recordErr != msg || s.message != msg {
		s.recordErr, s.message = msg, msg
		r.kickStatus()
	}
	r.mu.Unlock()
	if first {
		r.event(s.name, EventWarning, ReasonRecordFailed, msg, false)
	}
}

// recordOKLocked ends a run of record failures: their message goes.
func (r *Reconciler) recordOKLocked(s *server) {
	if s.recordErr == "" {
		return
	}
	if s.message == s.recordErr {
		s.message = ""
	}
	s.recordErr = ""
	r.kickStatus()
}

// enqueueAll marks every server dirty.
func (r *Reconciler) enqueueAll() {
	for _, n := range r.names() {
		r.queue.Add(n)
	}
}

// enqueueDependents marks dirty every declared server that depends on name.
func (r *Reconciler) enqueueDependents(name string) {
	r.mu.Lock()
	var deps []string
	for n, d := range r.desired {
		if d.Server == nil {
			continue
		}
		for _, dep := range d.Server.Spec.DependsOn {
			if dep == name {
				deps = append(deps, n)
			}
		}
	}
	r.mu.Unlock()
	for _, n := range deps {
		r.queue.Add(n)
	}
}

// setup prepares the queue and the exit watcher, and carries over the
// restart counts and last exits of the previous run's status.json.
func (r *Reconciler) setup() error {
	r.queue = newQueue(r.clock)
	r.cfg.Metrics.setQueue(r.queue)
	if r.cfg.StateDir != nil {
		if prev, err := ReadStatus(r.cfg.StateDir.StatusPath()); err == nil {
			r.mu.Lock()
			for _, ps := range prev.Servers {
				if _, ok := r.desired[ps.Name]; !ok {
					continue
				}
				s := r.serverLocked(ps.Name)
				s.restarts, s.lastExit = ps.Restarts, ps.LastExit
			}
			r.mu.Unlock()
		}
	}
	if r.exits == nil {
		w, err := observe.NewExitWatcher(r.log)
		if err != nil {
			return fmt.Errorf("reconciler: %w", err)
		}
		if w.Mode() == observe.PinNone {
			r.log.Info("Process exits are polled: no pidfd or kqueue on this system")
		}
		r.exits, r.closeFn = w, w.Close
	}
	return nil
}

// teardown shuts the queue down, waits for the workers, abandons readiness waits (their
// processes keep running with their records, to be adopted next time),
// stops probes, and releases every handle.
func (r *Reconciler) teardown(workers <-chan struct{}) {
	r.queue.ShutDown()
	<-workers
	r.mu.Lock()
	var waits []chan struct{}
	for _, s := range r.servers {
		if s.startCancel != nil {
			s.startCancel()
			waits = append(waits, s.startDone)
		}
		if s.probeCancel != nil {
			s.probeCancel()
			s.probeCancel = nil
		}
		if s.learnCancel != nil {
			s.learnCancel()
			s.learnCancel = nil
		}
	}
	r.mu.Unlock()
	for _, w := range waits {
		<-w
	}
	r.starts.Wait()
	r.mu.Lock()
	for _, s := range r.servers {
		if t := s.tracked; t != nil {
			r.exits.Unwatch(t.handle)
			_ = t.handle.Close()
		}
	}
	r.mu.Unlock()
	if r.closeFn != nil {
		if err := r.closeFn(); err != nil {
			r.log.Error(err, "Cannot close the exit watcher")
		}
	}
}

// rotateLogs rotates the servers' logs that have reached their limit. It
// logs what goes wrong and goes on: a log that cannot be rotated keeps
// growing, which is no reason to stop reconciling. Only the holder of the
// state folder's lock may call it (logfile.Rotate wants a single rotator).
func (r *Reconciler) rotateLogs() {
	if r.cfg.StateDir == nil {
		return
	}
	rotated, err := logfile.RotateDir(filepath.Dir(r.cfg.StateDir.LogPath("x")), r.cfg.LogRotation)
	for _, p := range rotated {
		r.log.V(1).Info("Log rotated", "path", p)
	}
	if err != nil {
		r.log.Error(err, "Cannot rotate logs")
	}
}

// Run loads the fleet files and keeps the servers as they declare until ctx
// ends: it adopts what its records prove it owns, starts what is missing,
// restarts what exits (as its restartPolicy says, with backoff), replaces
// what changed, stops what was removed, watches the files, and rotates the
// logs (as it starts and on each resync). When ctx ends it returns nil and
// leaves the servers running. The caller holds the state folder's lock.
func (r *Reconciler) Run(ctx context.Context) error {
	fw, err := NewFleetWatcher(FleetWatcherConfig{Paths: r.cfg.Files, Debounce: r.cfg.Debounce, Log: r.log.WithName("files"), Clock: r.clock})
	if err != nil {
		return err
	}
	fleet, _ := fw.Fleet()
	r.setDesired(fleet, nil)
	if err := r.setup(); err != nil {
		return err
	}
	r.rotateLogs()
	r.mu.Lock()
	r.fw = fw // from now on the API may reload and down
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		r.fw = nil
		r.mu.Unlock()
	}()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var bg sync.WaitGroup
	bg.Go(func() { r.statusWriter(ctx) })
	bg.Go(func() {
		err := fw.Run(ctx, func(u FleetUpdate) {
			r.mu.Lock()
			// Any change of the files lifts "held by down".
			if len(u.Changed) > 0 {
				r.held = map[string]bool{}
			}
			r.mu.Unlock()
			r.setDesired(u.Fleet, u.Errors)
			if len(u.Changed) > 0 {
				r.enqueueAll()
			}
		})
		if err != nil {
			r.log.Error(err, "Fleet file watcher stopped")
		}
	})
	if r.cfg.ResyncPeriod > 0 {
		bg.Go(func() {
			t := r.clock.NewTicker(r.cfg.ResyncPeriod)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C():
					r.log.V(1).Info("Resync")
					r.rotateLogs()
					r.enqueueAll()
				}
			}
		})
	}
	r.enqueueAll()
	workers := make(chan struct{})
	go func() {
		defer close(workers)
		runWorkers(ctx, r.queue, r.cfg.Workers, r.log, r.reconcile)
	}()
	<-ctx.Done()
	r.teardown(workers)
	cancel()
	bg.Wait()
	return nil
}

// ConvergeOptions tune Converge.
type ConvergeOptions struct {
	// Wait: converged means every declared server is Ready.
	Wait bool
}

// NotConvergedError lists the servers that are not in their desired state.
type NotConvergedError struct {
	// Servers maps each such server to its phase and reason.
	Servers map[string]string
	// Cause is ctx's error when the wait ended early (timeout), else nil.
	Cause error
}

func (e *NotConvergedError) Error() string {
	names := make([]string, 0, len(e.Servers))
	for n := range e.Servers {
		names = append(names, n)
	}
	sort.Strings(names)
	msg := fmt.Sprintf("%d server(s) not converged", len(names))
	if e.Cause != nil {
		msg = fmt.Sprintf("%s (%v)", msg, e.Cause)
	}
	for _, n := range names {
		msg += fmt.Sprintf("\n  %s: %s", n, e.Servers[n])
	}
	return msg
}

func (e *NotConvergedError) Unwrap() error { return e.Cause }

// Converge loads the fleet files once and acts until every server has
// settled (Running, or Ready with opts.Wait; or Failed, Quarantined,
// Stopped), or ctx ends. Servers stay running when it returns. The error is
// the fleet's load errors, or *NotConvergedError naming every server that is
// not as declared.
func (r *Reconciler) Converge(ctx context.Context, opts ConvergeOptions) (Status, error) {
	fleet, err := spec.Load(r.cfg.Files...)
	if err != nil {
		return Status{Errors: statusErrors(asErrorList(err))}, err
	}
	r.setDesired(fleet, nil)
	if err := r.setup(); err != nil {
		return Status{}, err
	}
	wctx, cancel := context.WithCancel(context.Background())
	var bg sync.WaitGroup
	bg.Go(func() { r.statusWriter(wctx) })
	workers := make(chan struct{})
	go func() {
		defer close(workers)
		runWorkers(wctx, r.queue, r.cfg.Workers, r.log, r.reconcile)
	}()
	r.enqueueAll()
	var waitErr error
	for {
		ch := r.changes()
		if pending := r.unsettled(opts.Wait); pending == nil {
			break
		}
		select {
		case <-ch:
		case <-ctx.Done():
			waitErr = ctx.Err()
		}
		if waitErr != nil {
			break
		}
	}
	r.teardown(workers)
	cancel()
	bg.Wait()
	st := r.Status()
	bad := map[string]string{}
	for _, s := range st.Servers {
		d, declared := r.desired[s.Name]
		switch {
		case s.Phase == PhaseFailed || s.Phase == PhaseQuarantined:
		case !declared && s.Phase == PhaseStopped:
			continue
		case declared && d.Server != nil && s.Phase == PhaseStopped && d.Server.Spec.RestartPolicy != spec.RestartAlways && s.LastExit != nil:
			continue // ran to completion, as its policy allows
		case opts.Wait && !s.Ready:
		case !opts.Wait && (s.Phase == PhaseRunning || s.Phase == PhaseStarting):
			continue
		case s.Ready:
			continue
		}
		bad[s.Name] = describePhase(s)
	}
	if len(bad) > 0 {
		return st, &NotConvergedError{Servers: bad, Cause: waitErr}
	}
	return st, nil
}

func describePhase(s ServerStatus) string {
	out := s.Phase.String()
	if s.Reason != "" {
		out += ": " + s.Reason
	}
	if s.Message != "" && s.Message != s.Reason {
		out += " (" + s.Message + ")"
	}
	return out
}

// unsettled returns the servers Converge still waits for, nil when none.
func (r *Reconciler) unsettled(wait bool) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for n := range r.desired {
		if r.servers[n] == nil {
			out = append(out, n)
		}
	}
	for n, s := range r.servers {
		_, declared := r.desired[n]
		switch s.phase {
		case PhaseFailed, PhaseQuarantined, PhaseStopped:
			if s.starting {
				out = append(out, n)
			}
		case PhaseRunning:
			if wait && declared && !s.isReady && s.tracked != nil {
				// Running, readiness unknown or failing: wait for its
				// probe (bounded by ctx).
				out = append(out, n)
			}
			if !declared {
				out = append(out, n)
			}
		case PhaseStarting:
			if wait || r.hasWaitingDependent(n) {
				out = append(out, n)
			}
		default:
			out = append(out, n)
		}
	}
	return out
}

func (r *Reconciler) hasWaitingDependent(name string) bool {
	for n, d := range r.desired {
		if d.Server == nil {
			continue
		}
		for _, dep := range d.Server.Spec.DependsOn {
			if dep == name {
				if s := r.servers[n]; s == nil || s.phase == PhasePending {
					return true
				}
			}
		}
	}
	return false
}

// isNotExist reports a missing record.
func isNotExist(err error) bool { return errors.Is(err, fs.ErrNotExist) }
