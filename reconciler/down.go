package reconciler

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/go-logr/logr"
	"k8s.io/utils/clock"

	"github.com/procfleet/procfleet/actuate"
	"github.com/procfleet/procfleet/spec"
)

// DownConfig configures Down.
type DownConfig struct {
	// Files are the fleet files; their dependsOn orders the stops and their
	// timeouts bound them. Files that do not load leave the order unknown:
	// every server is then stopped at once, and the log says so.
	Files []string
	// StateDir is the state folder. Required.
	StateDir *actuate.StateDir
	Log      logr.Logger
	// OnEvent receives progress events. Nil means none.
	OnEvent func(Event)
	// Actuator replaces actuate.Actuator (tests). Nil means the real one.
	Actuator Actuator
	// Clock stamps events. Nil means the real clock.
	Clock clock.PassiveClock
}

// DownError names the servers that could not be stopped, and why.
type DownError struct {
	Servers map[string]error
}

func (e *DownError) Error() string {
	names := make([]string, 0, len(e.Servers))
	for n := range e.Servers {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	fmt.Fprintf(&b, "%d server(s) could not be stopped", len(names))
	for _, n := range names {
		fmt.Fprintf(&b, "\n  %s: %v", n, e.Servers[n])
	}
	return b.String()
}

// Unwrap returns the errors, so errors.As finds a *actuate.QuarantineError.
func (e *DownError) Unwrap() []error {
	out := make([]error, 0, len(e.Servers))
	for _, err := range e.Servers {
		out = append(out, err)
	}
	return out
}

// Down stops the named servers, or every server with a record when names is
// empty: dependents first, independent servers in parallel, each with the
// full stop sequence (which signals only what it proves is ours). Records
// are removed. A name with no record is not running: nothing to do. The
// error is a *DownError naming each server that could not be stopped.
func Down(ctx context.Context, cfg DownConfig, names []string) error {
	if cfg.StateDir == nil {
		return errors.New("down: StateDir is required")
	}
	var clk clock.PassiveClock = clock.RealClock{}
	if cfg.Clock != nil {
		clk = cfg.Clock
	}
	emit := func(name, typ, reason, msg string, detail bool) {
		cfg.Log.V(boolV(detail || cfg.OnEvent != nil)).Info("Event", "server", name, "type", typ, "reason", reason, "message", msg)
		if cfg.OnEvent != nil {
			cfg.OnEvent(Event{Time: clk.Now(), Server: name, Type: typ, Reason: reason, Message: msg, Detail: detail})
		}
	}
	act := cfg.Actuator
	if act == nil {
		act = &actuate.Actuator{Dir: cfg.StateDir, Log: cfg.Log.WithName("actuate"), Events: sinkFunc(func(s, reason, msg string) {
			emit(s, EventNormal, reason, msg, true)
		})}
	}
	// The fleet (for the order and the timeouts) and the records are read
	// at the same time: each costs tens of milliseconds with 100 servers on
	// a busy machine, and every stop waits for both.
	var fleet *spec.Fleet
	loaded := make(chan struct{})
	go func() {
		defer close(loaded)
		var err error
		fleet, err = spec.Load(cfg.Files...)
		if err != nil {
			cfg.Log.Info("Fleet files do not load; stopping without dependency order", "error", err.Error())
			fleet = &spec.Fleet{}
		}
	}()
	recs, errs := cfg.StateDir.Records()
	<-loaded
	failed := map[string]error{}
	for _, err := range errs {
		var ue *actuate.UntrustedRecordError
		if errors.As(err, &ue) {
			failed[ue.Name] = err
			continue
		}
		return fmt.Errorf("down: %w", err)
	}
	byName := map[string]actuate.Record{}
	for _, r := range recs {
		byName[r.Name] = r
	}
	todo := map[string]actuate.Record{}
	if len(names) == 0 {
		todo = byName
	} else {
		for _, n := range names {
			if r, ok := byName[n]; ok {
				todo[n] = r
			} else if _, bad := failed[n]; !bad {
				emit(n, EventNormal, ReasonStopped, "not running", false)
			}
		}
		for n := range failed {
			if !contains(names, n) {
				delete(failed, n)
			}
		}
	}
	// dependents[x] = servers that depend on x.
	dependents := map[string][]string{}
	for _, s := range fleet.Servers {
		for _, dep := range s.Spec.DependsOn {
			dependents[dep] = append(dependents[dep], s.Metadata.Name)
		}
	}
	var mu sync.Mutex
	done := map[string]bool{}
	for len(todo) > 0 {
		var wave []string
		for n := range todo {
			blocked := false
			for _, dn := range dependents[n] {
				if _, pending := todo[dn]; pending {
					blocked = true
				}
			}
			if !blocked {
				wave = append(wave, n)
			}
		}
		if len(wave) == 0 { // a cycle cannot validate; stop the rest at once
			for n := range todo {
				wave = append(wave, n)
			}
		}
		sort.Strings(wave)
		var wg sync.WaitGroup
		for _, n := range wave {
			rec := todo[n]
			delete(todo, n)
			opts := actuate.StopOptions{Port: rec.Port}
			if s, ok := fleet.Get(n); ok {
				opts.Grace, opts.KillTimeout = s.Spec.TerminationGracePeriod(), s.Spec.KillTimeout()
			}
			wg.Go(func() {
				emit(n, EventNormal, ReasonStopping, "stopping", false)
				err := act.Stop(ctx, rec, opts)
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					failed[n] = err
					emit(n, EventWarning, ReasonFailed, "could not be stopped: "+err.Error(), false)
					return
				}
				done[n] = true
				emit(n, EventNormal, ReasonStopped, "stopped", false)
			})
		}
		wg.Wait()
	}
	markStopped(cfg.StateDir.StatusPath(), done, clk)
	if len(failed) > 0 {
		return &DownError{Servers: failed}
	}
	return nil
}

// markStopped updates status.json, when there is one, for the servers
// stopped, so that a status read without a running reconciler is true.
func markStopped(path string, stopped map[string]bool, clk clock.PassiveClock) {
	if len(stopped) == 0 {
		return
	}
	st, err := ReadStatus(path)
	if err != nil {
		return
	}
	for i := range st.Servers {
		s := &st.Servers[i]
		if !stopped[s.Name] {
			continue
		}
		s.Phase, s.Ready, s.PID, s.StartedAt, s.Reason, s.Message = PhaseStopped, false, 0, nil, "stopped by down", ""
		for j := range s.Conditions {
			if s.Conditions[j].Type == ConditionReady {
				setCondition(&s.Conditions[j], ConditionFalse, ReasonStopped, "stopped by down", clk.Now())
			}
		}
	}
	_ = WriteStatus(path, st)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func boolV(detail bool) int {
	if detail {
		return 1
	}
	return 0
}

// sinkFunc adapts a function to actuate.EventSink.
type sinkFunc func(server, reason, message string)

func (f sinkFunc) Event(server, reason, message string) { f(server, reason, message) }
