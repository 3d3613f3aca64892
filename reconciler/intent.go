package reconciler

import (
	"context"
	"fmt"
	"io/fs"

	"github.com/procfleet/procfleet/actuate"
)

// intentResolver is the part of *actuate.Actuator that resolves an intent
// record (ownership rule 8). An Actuator without it (a test's fake) leaves
// intent records to the quarantine Verify reports for them.
type intentResolver interface {
	ResolveIntent(ctx context.Context, rec actuate.Record, opts actuate.StopOptions) (actuate.IntentResolution, error)
}

// resolveIntent resolves the intent record a crash left between the spawn
// and the full record: the live process carrying its instance token (or
// living in its cgroup) that leads its own session is adopted, a full
// record written for it, and its verification (holding its pin) returned;
// otherwise what carries the token is stopped and the record removed, and
// fs.ErrNotExist says the server now has no record.
func (r *Reconciler) resolveIntent(ctx context.Context, s *server, d Desired, rec actuate.Record) (actuate.Record, *actuate.Verification, error) {
	ir, ok := r.act.(intentResolver)
	if !ok {
		return rec, nil, nil
	}
	var opts actuate.StopOptions
	if d.Server != nil {
		opts.Grace, opts.KillTimeout = d.Server.Spec.TerminationGracePeriod(), d.Server.Spec.KillTimeout()
	}
	res, err := ir.ResolveIntent(ctx, rec, opts)
	if err != nil {
		return rec, nil, fmt.Errorf("observe server %s: %w", s.name, err)
	}
	if !res.Adopted {
		return rec, nil, fs.ErrNotExist
	}
	return res.Record, &res.Verification, nil
}
