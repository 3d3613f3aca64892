package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/procfleet/procfleet/actuate"
	"github.com/procfleet/procfleet/internal/api"
	"github.com/procfleet/procfleet/internal/dashboard"
	"github.com/procfleet/procfleet/reconciler"
)

// uiBackend is the dashboard's view of up's running reconciler
// (dashboard.Backend). It lives in cmd because internal/dashboard imports
// the reconciler's types: the reconciler cannot import the dashboard.
// Every call reads; only Request asks for a change, the same requests as
// the CLI's verbs.
type uiBackend struct {
	r *reconciler.Reconciler
}

var _ dashboard.Backend = uiBackend{}

// Snapshot is the status and the fleet in force.
func (b uiBackend) Snapshot() dashboard.Snapshot {
	return dashboard.Snapshot{Status: b.r.Status(), Fleet: b.r.Fleet()}
}

// Changed is closed at the reconciler's next change.
func (b uiBackend) Changed() <-chan struct{} { return b.r.Changes() }

// Detail is what describe shows of a server, from the reconciler.
func (b uiBackend) Detail(ctx context.Context, name string) (dashboard.Detail, error) {
	d, err := b.r.Detail(ctx, name)
	if errors.Is(err, api.ErrNotFound) {
		return dashboard.Detail{}, fmt.Errorf("%w: %w", dashboard.ErrNotFound, err)
	}
	if err != nil {
		return dashboard.Detail{}, err
	}
	return uiDetail(d), nil
}

// Request is the CLI's stop, start or restart of one server, taken by the
// reconciler (reconciler.Stop, Start, Restart): it returns once the
// request is queued, and the page follows it through Changed. An unknown
// name wraps dashboard.ErrNotFound; a refusal (a restart of a quarantined
// server, a start of one no longer declared) says why.
func (b uiBackend) Request(ctx context.Context, name string, a dashboard.Action) error {
	var take func(context.Context, []string) (*reconciler.Request, error)
	switch a {
	case dashboard.ActionStop:
		take = b.r.Stop
	case dashboard.ActionStart:
		take = b.r.Start
	case dashboard.ActionRestart:
		take = b.r.Restart
	default:
		return fmt.Errorf("%s %s: not a request the reconciler takes", a, name)
	}
	_, err := take(ctx, []string{name})
	if errors.Is(err, api.ErrNotFound) {
		return fmt.Errorf("%w: %w", dashboard.ErrNotFound, err)
	}
	return err
}

// uiDetail maps a server's detail to what its page shows: the record
// (when it can be trusted), the ownership verdict in describe's words, and
// for a quarantined server what to do by hand.
func uiDetail(d reconciler.ServerDetail) dashboard.Detail {
	out := dashboard.Detail{Events: d.Events, LogPath: d.LogPath, Ownership: uiOwnership(d)}
	if rv := d.Record; rv != nil && rv.Untrusted == nil && rv.Newer == nil {
		rec := rv.Record
		out.Record = &rec
	}
	return out
}

// heldVerdict is the verdict on a process up holds: the kernel vouches for
// it, whatever its record says now.
const heldVerdict = "Owned: held by this procfleet up since it started or adopted it"

func uiOwnership(d reconciler.ServerDetail) dashboard.Ownership {
	rv := d.Record
	o := dashboard.Ownership{Held: d.Held}
	switch {
	case rv == nil:
		if d.Held {
			o.Verdict, o.Message = heldVerdict, "its record is missing (see the events)"
		}
	case rv.Untrusted != nil:
		o.Verdict, o.Message = "Untrusted record: never acted on", rv.Untrusted.Error()
	case rv.Newer != nil:
		o.Verdict, o.Message = "Unreadable record", rv.Newer.Error()
	case d.Held && rv.Verdict != actuate.VerdictOwned:
		o.Verdict, o.Message = heldVerdict, "its record alone would not prove it now: "+rv.Message
	default:
		o.Verdict, o.Message = verdictText(rv), rv.Message
	}
	if rv != nil && rv.Untrusted == nil && rv.Newer == nil {
		o.Evidence = rv.Evidence
		if rv.Identity.PID > 0 {
			o.Process = processText(rv.Identity)
		}
		if rv.Record.PID > 0 {
			o.Membership = membershipText(rv.Record)
		}
	}
	if d.Status.Phase == reconciler.PhaseQuarantined {
		o.StopByHand, _ = quarantineAdvice(rv, "see the message above")
	}
	return o
}

// membershipText says how a server's processes are found, in the mode its
// record names (actuate.MembershipOf): its cgroup, which no member can
// leave, or its session and process group and, with an instance token,
// the processes whose environment carries it.
func membershipText(rec actuate.Record) string {
	group := fmt.Sprintf("process group %d (its own session)", rec.PGID)
	switch {
	case actuate.MembershipOf(rec) == actuate.MembershipCgroup:
		return fmt.Sprintf("cgroup %s (no member can leave it); %s", rec.Cgroup, group)
	case rec.Instance != "":
		return group + ", and the processes whose environment carries its instance token"
	}
	return group
}
