package reconciler

import (
	"errors"
	"fmt"

	"github.com/procfleet/procfleet/actuate"
)

// stateDirLost reports, at a resync, that the state folder's path no
// longer names the folder this reconciler locked (deleted, or replaced by
// another: DESIGN.md "State folder"). Run then stops acting and returns
// it, leaving the servers running: another procfleet may hold the new
// folder's lock, and two actors on one fleet would start second
// instances. Any other failure of the check is logged and acted on
// nothing.
func (r *Reconciler) stateDirLost() error {
	if r.cfg.StateDir == nil {
		return nil
	}
	err := r.cfg.StateDir.Check()
	var ce *actuate.StateDirChangedError
	if errors.As(err, &ce) {
		return fmt.Errorf("stop acting, leaving the servers running: %w", err)
	}
	if err != nil {
		r.log.V(1).Info("State folder not checked", "error", err.Error())
	}
	return nil
}
