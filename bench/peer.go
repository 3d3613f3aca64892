package main

import (
	"context"
	"time"
)

// Peer is a supervisor under test, driven the way its documentation tells a
// user to drive it. Every method is bounded by ctx or by its own timeout.
type Peer interface {
	// Name is the column the peer's figures go to.
	Name() string
	// Start brings the supervisor up from nothing with f's servers and
	// returns once its start command has returned (servers may still be
	// starting).
	Start(ctx context.Context, f Fleet) error
	// Apply saves the edited fleet f in the peer's config file and does what
	// a user must do for the running supervisor to take it (nothing more).
	Apply(ctx context.Context, f Fleet) error
	// PrepareStop does the unmeasured part before StopAll (procfleet: end
	// `up`, so `down` is the only actor).
	PrepareStop(ctx context.Context) error
	// StopAll stops every server with the peer's own command.
	StopAll(ctx context.Context) error
	// SupervisorPID is the process whose CPU and memory are the peer's cost.
	SupervisorPID() (int, error)
	// Err is non-nil once the supervisor died unexpectedly.
	Err() error
	// Close ends the supervisor and everything it started; idempotent.
	Close(ctx context.Context) error
}

// cmdBound bounds one command of a peer's CLI (pm2, supervisorctl,
// procfleet down). The scenario's own limit, in the context, is usually
// the tighter one.
const cmdBound = 10 * time.Minute

// restartReporter is a peer that counts restarts itself (procfleet status);
// the crash scenario cross-checks the count against its kills.
type restartReporter interface {
	Restarts(ctx context.Context) (int, error)
}

// readyReporter is a peer whose own state says when every server is ready
// (procfleet's status.json): the idle scenario also measures a window that
// begins there, once the supervisor has nothing left to do.
type readyReporter interface {
	// AllReady reports whether every server is ready by the peer's own
	// account, and how many are not; it must cost the supervisor nothing.
	AllReady(ctx context.Context) (bool, int, error)
}

// onceApplier is a peer with a converge-once command (procfleet apply
// --wait), measured as an extra cold start.
type onceApplier interface {
	ApplyOnce(ctx context.Context, f Fleet) error
}

// scaler is a peer that runs several instances of one server and changes
// their number (the scale scenario).
type scaler interface {
	// StartScaled brings the supervisor up from nothing with s's server at
	// s.Replicas instances; an *unsupportedError when the binary cannot.
	StartScaled(ctx context.Context, s ScaledServer) error
	// Scale changes the number of instances to s.Replicas the way the
	// peer's documentation says.
	Scale(ctx context.Context, s ScaledServer) error
}

// peerMaker makes a fresh Peer for one scenario, in that scenario's folder.
type peerMaker struct {
	name string
	make func(dir string) Peer
}
