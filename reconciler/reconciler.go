package reconciler

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"runtime"
	"slices"
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
	// accepts TCP) runs while a server starts, where sock_diag is missing
	// (one loopback connect per server per period, while starting only);
	// on Linux actuate's one listener-table loop serves every start.
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
	// Loader, when set, has read Files already: Run's first read of them
	// decodes only the documents changed since (FleetWatcherConfig.Loader).
	Loader *spec.Loader
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
	// Debounce is the file watcher's quiet time. Zero means the watcher's
	// default (FleetWatcherConfig.Debounce).
	Debounce time.Duration
	// OnEvent receives every event as it happens (progress lines). Nil
	// means none. It must not block for long.
	OnEvent func(Event)
	// OneShot (apply): a first exit before Ready is restarted at once; a
	// second, or an exit after Ready, makes the server Failed (DESIGN.md
	// "Exit codes").
	OneShot bool
	// Backoff is the restart policy's arithmetic. Nil means DESIGN.md's
	// (1 s doubling to 60 s, loop window 10 s).
	Backoff *Backoff
	// OnRunning, when set, is called once Run has loaded the fleet files
	// and begun to act (up prints its banner then). Nil means none.
	OnRunning func()

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
//
// Concurrency: only the worker that holds a server's key in the queue
// changes that server's state, through the named transitions of state.go.
// Every other goroutine (exit watcher, readiness wait, probes, the API, the
// file watcher, the resync) posts what it learned to the server's inbox or
// to the desired state and enqueues the server. r.mu guards what readers
// see (Status) and the inboxes; it is held only for short copies.
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
	queue   *queue
	closeFn func() error // closes the exit watcher we made

	statusKick chan struct{}
	// statusFault, eventsFault and startedFault log a run of failed
	// status.json, events file or started/ writes once.
	statusFault, eventsFault, startedFault writeFault

	// changeMu guards changeCh, closed (and replaced) on every change of a
	// server's state or pass, so that any number of waiters wake.
	changeMu sync.Mutex
	changeCh chan struct{}
	// changeTaken: changeCh was handed out since it was made. A channel
	// no one holds is not closed and replaced: a resync's 1,000 passes
	// allocate nothing for it while nothing waits.
	changeTaken bool

	// emitMu makes a transition and its events one step: whoever saw the
	// new state (a dependent that starts once this server is Ready) emits
	// its own events after these.
	emitMu sync.Mutex

	mu      sync.Mutex
	desired map[string]Desired // keyed by instance
	fleet   *spec.Fleet
	errs    spec.ErrorList
	servers map[string]*server
	// held are the servers kept stopped by down or stop, until the files
	// change, apply, start or restart; kept are those of them whose hold
	// is saved in held.json (stop, down NAME), so a later up keeps it.
	held map[string]bool
	kept map[string]holdEntry
	// requests are the starts and restarts asked (Start, Restart) per
	// server; one is pending until its worker takes it (server.taken).
	requests map[string]startAsk
	reqSeq   uint64
	// acting: requests are taken (Run, Act).
	acting bool
	// stopping lists, while a down runs, the servers it stops that have
	// not stopped yet, with what they depend on: dependents stop first.
	stopping map[string][]string
	// stoppingDeps counts the entries of stopping with dependencies
	// (setStoppingLocked, unstopLocked).
	stoppingDeps int
	// passes counts reconcile passes done; begun counts those begun, and
	// a server's lastPass is the begun number its latest finished pass
	// drew at its start: lastPass > since (since read from begun) means a
	// pass that observed after since was read, never one already under way.
	passes, begun uint64
	holdsMu       sync.Mutex     // one writer of held.json at a time
	recScan       recordScan     // lists the records at each resync (its own lock)
	untrusted     untrustedList  // the quarantines on disk, for first passes (its own lock)
	heldView      heldView       // desired with the holds applied (desiredLocked)
	heldGen       uint64         // counts the changes of held, for heldView
	depsSeen      depsSeen       // whether a desired map declares dependencies (anyDependsLocked)
	fw            *FleetWatcher  // set by Run
	starts        sync.WaitGroup // readiness waits, probers and exit-status looks in flight

	// Replicas (replicas.go), guarded by mu: each declared server's
	// instances in index order, and the replicas whose replace waits for
	// its turn.
	instances map[string][]string
	rolling   map[string]bool
	// dependents is desired by dependency: the instances whose server
	// depends on each server; nil after desired changed, built at its
	// first use (enqueueDependents), guarded by mu.
	dependents map[string][]string

	// desiredGen counts the fleets installed (setDesired) and resyncs the
	// periodic resyncs done, guarded by mu; resyncBuf is the resync's
	// scratch (enqueueResync, one caller).
	desiredGen, resyncs uint64
	resyncBuf           resyncScratch
}

// server is the reconciler's memory of one server.
type server struct {
	name string

	// Guarded by Reconciler.mu. st is written only by the worker that
	// holds the server's key; inbox by anyone (post).
	st       state
	events   ring
	inbox    []post
	lastPass uint64
	// taken is the seq of the last start request its worker carried out.
	taken uint64

	// Owned by the worker that holds the server's key (and by teardown,
	// once the workers have ended).
	gen         uint64   // generation of the process started or tracked
	tracked     *tracked // the owned process watched, nil when none
	startCancel context.CancelFunc
	startDone   chan struct{}
	probeCancel context.CancelFunc
	learnCancel context.CancelFunc
	exitSeq     uint64          // number of the last exit, for learned statuses
	pinned      *observe.Handle // a quarantined process, pinned for its exit only
	// recordLost: the record of the process being started was found
	// untrusted and moved aside; it is written again once it is Ready.
	recordLost string
	// startedFor is the declaration started/<name>.json was last written
	// for (noteStarted).
	startedFor *spec.Server
	// untrustedDisk is its UntrustedRecord quarantine kept on disk, once
	// untrustedListed (untrusted_disk.go).
	untrustedDisk   *actuate.UntrustedQuarantine
	untrustedListed bool

	// rest is the pin of its tracked process while the server is at rest
	// (restLocked), taken at desired generation restGen; nil otherwise.
	// Guarded by Reconciler.mu.
	rest    *observe.Handle
	restGen uint64
	// deadRecord, deadStarted: an exited process's record and started/
	// file, left for a restart to replace or the pass's end to remove
	// (deadrecord.go).
	deadRecord, deadStarted bool
}

type tracked struct {
	rec     actuate.Record
	handle  *observe.Handle
	running *actuate.Running // nil when adopted
	spec    spec.ServerSpec
	// logOffset is the size of the server's log before this process was
	// spawned (0 when adopted): what it wrote comes after.
	logOffset int64
}

// New builds a Reconciler. It loads nothing and starts nothing: Run,
// Converge and Down do.
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
		kept:       map[string]holdEntry{},
		requests:   map[string]startAsk{},
		desired:    map[string]Desired{},
	}
	if r.clock == nil {
		r.clock = clock.RealClock{}
	}
	if r.backoff == nil {
		r.backoff = &Backoff{}
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

// actuatorEvents adapts the reconciler to actuate.EventSink. Actuate's
// events carry the evidence of each signal; its quarantine event is the
// server's one (the reconciler adds none of its own), so it is a progress
// line, the rest are detail.
type actuatorEvents struct{ r *Reconciler }

func (a actuatorEvents) Event(server, reason, message string) {
	typ, detail := EventNormal, true
	switch reason {
	case actuate.EventQuarantined:
		typ, detail = EventWarning, false
	case actuate.EventStartFailed:
		typ = EventWarning
	case actuate.EventQuarantineLifted:
		return // the lift transition says it (untrusted_disk.go)
	}
	a.r.event(Event{Server: server, Type: typ, Reason: reason, Message: message, Detail: detail})
}

// event records an event for a server: its ring, its events file, the log
// and OnEvent.
func (r *Reconciler) event(e Event) {
	if e.Time.IsZero() {
		e.Time = r.clock.Now()
	}
	r.mu.Lock()
	r.ringLocked(e)
	r.mu.Unlock()
	r.publish(e)
}

// ringLocked keeps e in its server's ring. The caller holds r.mu.
func (r *Reconciler) ringLocked(e Event) {
	if s := r.servers[e.Server]; s != nil {
		s.events.add(e)
	}
}

// publish sends an event on: the events file, the log and OnEvent.
func (r *Reconciler) publish(e Event) {
	if err := r.events.append(e); err != nil {
		r.eventsFault.failed(r.log, err, "Cannot append to the events file", "server", e.Server)
	} else {
		r.eventsFault.ok(r.log, "Events file written again")
	}
	// With OnEvent set (the commands print a progress line per event) the
	// log line would say it twice: it moves to V(1).
	kv := []any{"server", e.Server, "type", e.Type, "reason", e.Reason, "message", e.Message}
	if e.Detail || r.cfg.OnEvent != nil {
		r.log.V(1).Info("Event", kv...)
	} else {
		r.log.Info("Event", kv...)
	}
	if r.cfg.OnEvent != nil {
		r.cfg.OnEvent(e)
	}
}

// change applies one transition to s's state (the caller is the worker
// that holds s's key) and emits its events. A refused transition is
// logged and returned: it is a bug, and the pass is retried.
func (r *Reconciler) change(s *server, f func(st *state) ([]Event, error)) error {
	r.emitMu.Lock()
	defer r.emitMu.Unlock()
	r.mu.Lock()
	before := s.st.shown()
	evs, err := f(&s.st)
	moved := s.st.shown() != before
	// In the ring with the state: whoever sees the state sees its events.
	now := r.clock.Now()
	for i := range evs {
		if err != nil {
			break
		}
		evs[i].Server = s.name
		if evs[i].Time.IsZero() {
			evs[i].Time = now
		}
		r.ringLocked(evs[i])
	}
	r.mu.Unlock()
	if err != nil {
		r.log.Error(err, "Transition refused", "server", s.name)
		return err
	}
	for _, e := range evs {
		r.publish(e)
	}
	if moved || len(evs) > 0 {
		// Only what status shows wakes the status writer and the waiters:
		// a resync over an idle fleet changes nothing.
		r.kickStatus()
	}
	return nil
}

// setDesired installs a fleet as the desired state.
func (r *Reconciler) setDesired(f *spec.Fleet, errs spec.ErrorList) {
	d, insts := desiredOf(f, r.cfg.OneShot), instanceNamesOf(f)
	r.mu.Lock()
	r.fleet, r.desired, r.instances, r.errs = f, d, insts, errs
	r.dependents = nil
	r.desiredGen++
	r.mu.Unlock()
	r.kickStatus()
}

// desiredOf is the fleet as Plan reads it: each declared instance (a
// server without replicas, or one replica) with its spec hash, by name.
func desiredOf(f *spec.Fleet, oneShot bool) map[string]Desired {
	insts := f.Instances()
	d := make(map[string]Desired, len(insts))
	for i := range insts {
		in := &insts[i]
		d[in.Name] = Desired{Server: in.Server, Instance: in, Hash: in.Hash, OneShot: oneShot}
	}
	return d
}

// Status returns the status of every declared, tracked or recorded server,
// sorted by name, and the fleet-file errors.
func (r *Reconciler) Status() Status { return r.statusInto(nil, true) }

// statusInto is Status, with each server's events or without them (what
// status.json holds), built in buf's memory where it has room: the status
// writer hands back the servers of its last snapshot, which nothing else
// holds.
func (r *Reconciler) statusInto(buf []ServerStatus, events bool) Status {
	r.mu.Lock()
	defer r.mu.Unlock()
	servers := slices.Grow(buf[:0], len(r.servers)) // as append grows: the fleet grows as servers are first seen
	for _, s := range r.servers {
		servers = servers[:len(servers)+1]
		ss := &servers[len(servers)-1]
		s.st.statusTo(ss, s.name)
		if events {
			ss.Events = s.events.list()
		}
		d := r.desired[s.name]
		if ss.Port == 0 {
			ss.Port = d.port()
		}
		ss.setReplica(d, r.instances)
	}
	sort.Slice(servers, func(i, j int) bool { return servers[i].Name < servers[j].Name })
	return Status{Servers: servers, Errors: statusErrors(r.errs)}
}

// status renders a server's state as status shows it.
func (s *state) status(name string) ServerStatus {
	var ss ServerStatus
	s.statusTo(&ss, name)
	return ss
}

// statusTo renders a server's state into ss, in the memory of ss's
// conditions and start time where it has them.
func (s *state) statusTo(ss *ServerStatus, name string) {
	conds, at := ss.Conditions[:0], ss.StartedAt
	*ss = ServerStatus{
		Name: name, Phase: s.phase, Ready: s.isReady, Restarts: s.restarts,
		Reason: s.reason, Message: s.message, LastExit: s.lastExit,
		PID: s.pid, Port: s.port, Conditions: append(conds, s.ready),
	}
	if s.pid != 0 {
		ss.Membership = s.membership
	}
	if ss.Conditions[0].Type == "" {
		ss.Conditions[0] = Condition{Type: ConditionReady, Status: ConditionUnknown}
	}
	if s.pid != 0 && !s.startedAt.IsZero() {
		if at == nil {
			at = new(time.Time)
		}
		*at = s.startedAt
		ss.StartedAt = at
	}
}

func (r *Reconciler) kickStatus() {
	select {
	case r.statusKick <- struct{}{}:
	default:
	}
	r.notifyChange()
}

// notifyChange wakes every waiter of Changes.
func (r *Reconciler) notifyChange() {
	r.changeMu.Lock()
	if r.changeTaken {
		close(r.changeCh)
		r.changeCh, r.changeTaken = make(chan struct{}), false
	}
	r.changeMu.Unlock()
}

// Changes returns a channel closed at the next change of any server's
// state (a transition, a reconcile pass) or of the desired state. Any
// number of goroutines may wait on it; each takes a new one after it fires.
func (r *Reconciler) Changes() <-chan struct{} {
	r.changeMu.Lock()
	defer r.changeMu.Unlock()
	r.changeTaken = true
	return r.changeCh
}

// statusWriter writes status.json after changes until ctx ends, then once
// more. Writes are at least statusWriteInterval apart: a fleet changing at
// once (100 servers stopping) kicks it hundreds of times, and each write
// takes a snapshot of every server under the reconciler's lock, which the
// workers need too; the file lags the changes by at most that interval.
// A kick that changed nothing status.json shows writes nothing.
func (r *Reconciler) statusWriter(ctx context.Context) {
	if r.cfg.StateDir == nil {
		return
	}
	f := statusFile{path: r.cfg.StateDir.StatusPath()}
	var last []ServerStatus
	write := func() {
		st := r.statusInto(last, false)
		last = st.Servers
		if err := f.write(st); err != nil {
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
		s = &server{name: name, st: state{phase: PhasePending, ready: Condition{Type: ConditionReady, Status: ConditionUnknown}}}
		r.servers[name] = s
	}
	return s
}

// names returns every server that is declared, remembered, or has a record.
// A record found untrusted or foreign (and moved aside) is posted to its
// server.
func (r *Reconciler) names() []string {
	set := map[string]bool{}
	r.addRecorded(set)
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

// addRecorded adds to set every server that has a record, or one found
// untrusted (moved aside and posted to its server); a foreign record is
// posted to its server.
func (r *Reconciler) addRecorded(set map[string]bool) {
	recorded, errs := r.recordNames()
	r.addListed(set, recorded, errs)
}

// addListed is addRecorded for what a recordNames call found.
func (r *Reconciler) addListed(set map[string]bool, recorded []string, errs []error) {
	for _, n := range recorded {
		set[n] = true
	}
	for _, n := range r.postListed(nil, errs) {
		set[n] = true
	}
}

// postListed posts each untrusted or foreign record of a recordNames call's
// errors to its server, logs the other errors, and appends to dst the
// servers of the untrusted ones.
func (r *Reconciler) postListed(dst []string, errs []error) []string {
	for _, err := range errs {
		var ue *actuate.UntrustedRecordError
		if errors.As(err, &ue) {
			dst = append(dst, ue.Name)
			r.post(ue.Name, post{kind: postUntrusted, untrusted: ue})
			continue
		}
		var fe *actuate.ForeignRecordError
		if errors.As(err, &fe) {
			r.post(fe.Name, post{kind: postForeign, foreign: fe})
			continue
		}
		r.log.Error(err, "Cannot read a record")
	}
	return dst
}

// recordNames lists the servers that have a record: through recScan (only
// changed records read) on a state folder, else every record read.
func (r *Reconciler) recordNames() (names []string, errs []error) {
	return r.recordNamesInto(nil)
}

// recordNamesInto is recordNames appending the names to dst.
func (r *Reconciler) recordNamesInto(dst []string) (names []string, errs []error) {
	names = dst
	if sd, ok := r.records.(*actuate.StateDir); ok {
		return r.recScan.names(sd, dst)
	}
	recs, errs := r.records.Records()
	for _, rec := range recs {
		names = append(names, rec.Name)
	}
	return names, errs
}

// enqueueAll marks every server dirty.
func (r *Reconciler) enqueueAll() {
	for _, n := range r.names() {
		r.queue.Add(n)
	}
}

// enqueueDependents marks dirty, once instance name is Ready, every
// declared instance that depends on its server, and the replicas of its
// server that wait for their rolling turn.
func (r *Reconciler) enqueueDependents(name string) {
	r.mu.Lock()
	server := name
	if d, ok := r.desired[name]; ok && d.Server != nil {
		server = d.serverName()
	}
	if r.dependents == nil {
		r.dependents = dependentsOf(r.desired)
	}
	deps := append(r.rollingWaitersLocked(server), r.dependents[server]...)
	r.mu.Unlock()
	for _, n := range deps {
		r.queue.Add(n)
	}
}

// dependentsOf indexes desired by dependency: for each server named in a
// dependsOn, the instances that depend on it. Each Ready looks its
// dependents up there: a scan of desired at each of them was, in a cold
// start of 1,000 servers, a million map steps under mu.
func dependentsOf(desired map[string]Desired) map[string][]string {
	m := make(map[string][]string)
	for n, d := range desired {
		if d.Server == nil {
			continue
		}
		for _, dep := range d.Server.Spec.DependsOn {
			m[dep] = append(m[dep], n)
		}
	}
	return m
}

// setup prepares the queue and the exit watcher, and carries over the
// restart counts and last exits of the previous run's status.json (kept
// for a server that is adopted; a fresh start resets them).
func (r *Reconciler) setup() error { return r.setupWith(r.savedStatus()) }

// savedStatus reads the state folder's status.json: nil when there is none
// or it does not read.
func (r *Reconciler) savedStatus() *Status {
	if r.cfg.StateDir == nil {
		return nil
	}
	prev, err := ReadStatus(r.cfg.StateDir.StatusPath())
	if err != nil {
		return nil
	}
	return &prev
}

// setupWith is setup with status.json already read (savedStatus).
func (r *Reconciler) setupWith(prev *Status) error {
	r.queue = newQueue(r.clock)
	r.cfg.Metrics.setQueue(r.queue)
	if prev != nil {
		r.mu.Lock()
		for _, ps := range prev.Servers {
			if _, ok := r.desired[ps.Name]; !ok {
				continue
			}
			s := r.serverLocked(ps.Name)
			s.st.restarts, s.st.lastExit = ps.Restarts, ps.LastExit
		}
		r.mu.Unlock()
	}
	r.loadHolds()
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

// teardown shuts the queue down, waits for the workers, abandons readiness
// waits (their processes keep running with their records, to be adopted
// next time), stops probes, and releases every handle.
func (r *Reconciler) teardown(workers <-chan struct{}) {
	r.queue.ShutDown()
	<-workers
	// The workers have ended: teardown owns every server now.
	r.mu.Lock()
	servers := make([]*server, 0, len(r.servers))
	for _, s := range r.servers {
		servers = append(servers, s)
	}
	r.mu.Unlock()
	for _, s := range servers {
		if s.startCancel != nil {
			s.startCancel()
			<-s.startDone
		}
		if s.probeCancel != nil {
			s.probeCancel()
		}
		if s.learnCancel != nil {
			s.learnCancel()
		}
	}
	r.starts.Wait()
	r.dropAllPrepared()
	r.mu.Lock()
	for _, s := range r.servers {
		for _, p := range s.inbox {
			if p.running != nil && p.err == nil {
				_ = p.running.Handle.Close() // ready, never taken: adopted next time
			}
		}
		s.inbox = nil
	}
	r.mu.Unlock()
	for _, s := range servers {
		if t := s.tracked; t != nil {
			r.exits.Unwatch(t.handle)
			_ = t.handle.Close()
		}
		r.unpin(s)
	}
	r.events.closeAll()
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

// startWorkers runs the workers until teardown; the channel is closed once
// they have ended.
func (r *Reconciler) startWorkers(ctx context.Context) <-chan struct{} {
	workers := make(chan struct{})
	go func() {
		defer close(workers)
		runWorkers(ctx, r.queue, r.cfg.Workers, r.log, r.reconcile)
	}()
	return workers
}

// Run loads the fleet files and keeps the servers as they declare until ctx
// ends: it adopts what its records prove it owns, starts what is missing,
// restarts what exits (as its restartPolicy says, with backoff), replaces
// what changed, stops what was removed, watches the files, and rotates the
// logs (as it starts and on each resync). When ctx ends it returns nil and
// leaves the servers running. The caller holds the state folder's lock.
func (r *Reconciler) Run(ctx context.Context) error {
	fw, err := NewFleetWatcher(FleetWatcherConfig{Paths: r.cfg.Files, Debounce: r.cfg.Debounce, Log: r.log.WithName("files"), Clock: r.clock, Loader: r.cfg.Loader})
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
	r.fw = fw // from now on the API may reload, down, stop, start, restart
	r.acting = true
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		r.fw, r.acting = nil, false
		r.mu.Unlock()
	}()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var bg sync.WaitGroup
	bg.Go(func() { r.statusWriter(ctx) })
	bg.Go(func() {
		err := fw.Run(ctx, r.applyUpdate)
		if err != nil {
			r.log.Error(err, "Fleet file watcher stopped")
		}
	})
	var lost error // the state folder deleted or replaced (stateDirLost)
	if r.cfg.ResyncPeriod > 0 {
		bg.Go(func() {
			t := r.clock.NewTicker(r.cfg.ResyncPeriod)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C():
					if lost = r.stateDirLost(); lost != nil {
						cancel()
						return
					}
					r.log.V(1).Info("Resync")
					r.tendLogs(r.staleCheck())
					r.enqueueResync()
				}
			}
		})
	}
	r.enqueueAll()
	workers := r.startWorkers(ctx)
	if r.cfg.OnRunning != nil {
		r.cfg.OnRunning()
	}
	<-ctx.Done()
	r.teardown(workers)
	cancel()
	bg.Wait()
	return lost
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
	// Why maps each such server to what the wait found beyond its phase
	// ("exited after it was Ready"); "" when its phase says it all or the
	// wait ended first.
	Why map[string]string
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
// settled (settled, settleApply or settleWait), or ctx ends. Servers stay
// running when it returns. The error is the fleet's load errors, or
// *NotConvergedError naming every server that is not as declared.
func (r *Reconciler) Converge(ctx context.Context, opts ConvergeOptions) (Status, error) {
	fleet, err := spec.Load(r.cfg.Files...)
	if err != nil {
		return Status{Errors: statusErrors(asErrorList(err))}, err
	}
	r.setDesired(fleet, nil)
	if err := r.setup(); err != nil {
		return Status{}, err
	}
	r.mu.Lock()
	save := r.liftAllLocked() // apply lifts every stop
	r.mu.Unlock()
	if save {
		r.saveHolds()
	}
	wctx, cancel := context.WithCancel(context.Background())
	var bg sync.WaitGroup
	bg.Go(func() { r.statusWriter(wctx) })
	workers := r.startWorkers(wctx)
	mode := settleApply
	if opts.Wait {
		mode = settleWait
	}
	began := r.clock.Now()
	names := r.names()
	for _, n := range names {
		r.queue.Add(n)
	}
	bad, why, waitErr := r.waitSettled(ctx, names, 0, began, mode)
	r.teardown(workers)
	cancel()
	bg.Wait()
	st := r.Status()
	if len(bad) > 0 {
		return st, &NotConvergedError{Servers: bad, Why: why, Cause: waitErr}
	}
	return st, nil
}

// waitSettled waits until every server in names has been reconciled after
// pass number since and is settled in mode, or ctx ends. It returns the
// servers that failed or are still pending (with ctx's error), each with
// its phase summary, and what settled found beyond it (why).
func (r *Reconciler) waitSettled(ctx context.Context, names []string, since uint64, began time.Time, mode settleMode) (bad, why map[string]string, cause error) {
	// A look at all names judges each; the looks at later changes judge
	// the servers pending at the last full look, in order, and stop at
	// the first one still pending (a fleet's down would otherwise judge
	// every pending server, under r.mu, at each of its servers'
	// changes: quadratic). Once none is left, all of them are judged
	// again, so that the answer is one look at all.
	var pending []string // nil: the next look is at all names
	for {
		ch := r.Changes()
		if pending != nil {
			pending = r.stillPending(pending, since, began, mode)
			if len(pending) == 0 {
				pending = nil
				continue
			}
		} else {
			verdicts := r.settledAll(names, since, began, mode)
			for _, n := range names {
				if !verdicts[n].done {
					pending = append(pending, n)
				}
			}
			if len(pending) == 0 {
				return r.unsettled(verdicts, nil)
			}
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return r.unsettled(r.settledAll(names, since, began, mode), ctx.Err())
		}
	}
}

// unsettled is waitSettled's answer from the verdicts of one look at all
// its names: the servers that failed or are still pending, each with its
// phase summary, and what settled found beyond it (why).
func (r *Reconciler) unsettled(verdicts map[string]settleVerdict, cause error) (bad, why map[string]string, _ error) {
	st := r.Status()
	bad, why = map[string]string{}, map[string]string{}
	for n, v := range verdicts {
		if v.done && !v.failed {
			continue
		}
		summary := "not looked at yet"
		if ss, ok := st.Get(n); ok {
			summary = PhaseSummary(ss)
		}
		if v.why != "" {
			summary = v.why + ": " + summary
		}
		bad[n], why[n] = summary, v.why
	}
	return bad, why, cause
}

// stillPending judges names in order and returns them from the first one
// not done (nil when all are). Those before it are done; those after it
// are not judged.
func (r *Reconciler) stillPending(names []string, since uint64, began time.Time, mode settleMode) []string {
	i := 0
	r.settledEach(names, since, began, mode, func(_ string, v settleVerdict) bool {
		if !v.done {
			return false
		}
		i++
		return true
	})
	return names[i:]
}

// settledAll gives the verdict of settled for each name. A server is
// judged after its dependencies, so that one that waits for a dependency
// given up on is given up on too.
func (r *Reconciler) settledAll(names []string, since uint64, began time.Time, mode settleMode) map[string]settleVerdict {
	out := make(map[string]settleVerdict, len(names))
	r.settledEach(names, since, began, mode, func(n string, v settleVerdict) bool {
		out[n] = v
		return true
	})
	return out
}

// settledEach calls fn with the verdict of settled for each name, in
// order, under r.mu, until fn returns false. A server is judged after its
// dependencies, as settledAll does.
func (r *Reconciler) settledEach(names []string, since uint64, began time.Time, mode settleMode, fn func(string, settleVerdict) bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	// A down's verdict reads neither the servers waited on nor the
	// dependencies' verdicts (settled): a down's look allocates nothing.
	var waitedOn, judging map[string]bool
	var memo map[string]settleVerdict // the verdicts judged so far
	if mode != settleDown {
		waitedOn, judging, memo = map[string]bool{}, map[string]bool{}, map[string]settleVerdict{}
		for n, d := range r.desired {
			if d.Server == nil {
				continue
			}
			if s := r.servers[n]; s == nil || s.st.phase == PhasePending {
				for _, dep := range d.Server.Spec.DependsOn {
					for _, in := range r.instanceNamesLocked(dep) {
						waitedOn[in] = true
					}
				}
			}
		}
	}
	var judge func(n string) settleVerdict
	judge = func(n string) settleVerdict {
		if v, ok := memo[n]; ok {
			return v
		}
		s := r.servers[n]
		d, declared := r.desired[n]
		_, toStop := r.stopping[n]
		v := settleView{declared: declared && d.Server != nil, held: r.held[n], waitedOn: waitedOn[n], toStop: toStop}
		if s != nil {
			st := &s.st
			v.requested = r.requests[n].seq > s.taken
			v.passed = s.lastPass > since
			v.phase, v.ready = st.phase, st.isReady
			v.running, v.starting = st.pid != 0 && st.phase != PhaseQuarantined, st.starting
			v.outdated = v.declared && st.hash != "" && st.hash != d.Hash
			if v.outdated {
				v.blockedBy = r.rollingBlockerLocked(n, d)
			}
			v.exitsBeforeReady = st.exitsBeforeReady
			v.exitedAfterReady = st.lastExitAfterReady && st.lastExit != nil && !st.lastExit.At.Before(began)
			v.completed = st.phase == PhaseStopped && st.lastExit != nil && d.Server != nil && d.Server.Spec.RestartPolicy != spec.RestartAlways
		} else if !v.declared {
			// Forgotten: undeclared and stopped.
			v.passed, v.phase = true, PhaseStopped
		}
		if v.declared && mode != settleDown && !judging[n] {
			judging[n] = true // a guard: validation refuses cycles
			for _, dep := range d.Server.Spec.DependsOn {
				for _, in := range r.instanceNamesLocked(dep) {
					if dv := judge(in); dv.failed && v.depFailed == "" {
						v.depFailed = in
					}
				}
			}
			delete(judging, n)
		}
		sv := settled(v, mode)
		if memo != nil {
			memo[n] = sv
		}
		return sv
	}
	for _, n := range names {
		if !fn(n, judge(n)) {
			return
		}
	}
}

// PhaseSummary is a server's phase with its reason and message, in one
// line: "Quarantined: PortConflict (port 8080 is held by ...)". Every
// command that reports a server that is not as wanted says it this way.
func PhaseSummary(s ServerStatus) string {
	out := s.Phase.String()
	if s.Reason != "" {
		out += ": " + s.Reason
	}
	if s.Message != "" && s.Message != s.Reason {
		out += " (" + s.Message + ")"
	}
	return out
}

// isNotExist reports a missing record.
func isNotExist(err error) bool { return errors.Is(err, fs.ErrNotExist) }
