package dashboard

import (
	"context"
	"errors"
	"fmt"

	"github.com/procfleet/procfleet/actuate"
	"github.com/procfleet/procfleet/reconciler"
	"github.com/procfleet/procfleet/spec"
)

// Backend is what the dashboard needs from the running reconciler. The
// dashboard calls it only while a page is open: with no browser connected it
// calls nothing and waits on nothing.
type Backend interface {
	// Snapshot returns the fleet now. It is called at most once per update
	// sent (Config.MinInterval apart) and must not block on I/O.
	Snapshot() Snapshot
	// Changed returns a channel that is closed at the next change of what
	// Snapshot or Detail return (a new channel after each close).
	Changed() <-chan struct{}
	// Detail returns what a server's page shows beyond its status. An
	// unknown name is an error wrapping ErrNotFound.
	Detail(ctx context.Context, name string) (Detail, error)
	// Request asks for a stop, start or restart of one server: the same
	// requests as the CLI verbs, never a command or a spec. It returns once
	// the reconciler has taken the request or refused it (an unknown name
	// wraps ErrNotFound); ctx bounds that wait, it never cancels a request
	// halfway. The page shows the progress through Changed.
	Request(ctx context.Context, name string, a Action) error
}

// Snapshot is the fleet at one moment.
type Snapshot struct {
	// Status is `procfleet status -o json` (DESIGN.md): every server and the
	// fleet files' load errors. ServerStatus.Events is not used (Detail
	// carries the events of the server whose page is open).
	Status reconciler.Status
	// Fleet is the fleet in force (the last one that loaded); nil when none
	// has. The dependency graph's edges are its servers' dependsOn.
	Fleet *spec.Fleet
}

// Detail is what a server's page shows beyond its status: the evidence.
type Detail struct {
	// Record is the server's ownership record; nil when it has none.
	Record *actuate.Record
	// Ownership is the verdict on the process the record names.
	Ownership Ownership
	// Events are the server's recent events, oldest first: starts, exits,
	// every signal with the evidence that allowed it, quarantines.
	Events []reconciler.Event
	// LogPath is the server's log file (logs/<name>.log), which the page
	// follows live; empty when there is none.
	LogPath string
}

// Ownership is why procfleet may (or may not) signal a server's process.
// Every field is text for people; empty fields are not shown.
type Ownership struct {
	// Verdict is the outcome of the ownership check ("owned", "quarantined
	// (IdentityMismatch)", "stale").
	Verdict string
	// Held is true when procfleet has held the process pinned (pidfd,
	// kqueue) since it spawned or adopted it.
	Held bool
	// Evidence names what proved ownership: pid, start time, boot id,
	// pidfd inode, the pin.
	Evidence string
	// Message says why the verdict is not "owned".
	Message string
	// Process is the process as observed now (state, ppid, pgid, sid, uid).
	Process string
	// Membership is how the server's processes are found: "process group
	// 1234" or a cgroup path.
	Membership string
	// StopByHand is the command that stops a quarantined server by hand.
	StopByHand string
}

// Action is a request on one server.
type Action string

// Actions: the dashboard's buttons, the CLI's stop, start and restart.
const (
	ActionStop    Action = "stop"
	ActionStart   Action = "start"
	ActionRestart Action = "restart"
)

// ParseAction returns the Action named s.
func ParseAction(s string) (Action, error) {
	switch a := Action(s); a {
	case ActionStop, ActionStart, ActionRestart:
		return a, nil
	}
	return "", fmt.Errorf("unknown action %q (want stop, start or restart)", s)
}

// ErrNotFound is wrapped by a Backend's error for an unknown server name.
var ErrNotFound = errors.New("no such server")
