package reconciler

import (
	"reflect"
)

// heldView is the desired state as Plan reads it while servers are held
// (down, stop): the desired map with Held set on them. It is made again
// only when the desired map is replaced or the held set changes; before,
// every pass copied the whole map, so one stopped server made a resync of
// 1,000 cost a million copied entries.
type heldView struct {
	of   map[string]Desired // the desired map it was made from
	gen  uint64             // the heldGen of the held set it was made with
	view map[string]Desired // read-only: shared by every pass
}

// desiredLocked returns the desired state with the holds applied, for
// reading only. r.mu is held.
func (r *Reconciler) desiredLocked() map[string]Desired {
	if len(r.held) == 0 {
		return r.desired
	}
	hv := &r.heldView
	if hv.view == nil || reflect.ValueOf(hv.of).UnsafePointer() != reflect.ValueOf(r.desired).UnsafePointer() || hv.gen != r.heldGen {
		hv.of, hv.gen, hv.view = r.desired, r.heldGen, withHeld(r.desired, r.held)
	}
	return hv.view
}
