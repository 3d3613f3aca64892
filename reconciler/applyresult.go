package reconciler

import "errors"

// ApplyResult is what an apply ends with, in one shape whether it acted
// itself (Converge) or through a running up (Reload, which sends it over
// the socket): the fleet's status, and every server that is not in its
// desired state.
type ApplyResult struct {
	Status
	// NotConverged maps each server that is not in its desired state to
	// what the wait found beyond its phase ("exited twice before it was
	// Ready", "exited after it was Ready", "waits for db, which failed");
	// "" when its phase says it all or the wait ended first. Empty when
	// every server is.
	NotConverged map[string]string `json:"notConverged,omitempty"`
}

// NewApplyResult pairs the status an apply ended with and its error (a
// *NotConvergedError names the servers that are not as declared).
func NewApplyResult(st Status, err error) ApplyResult {
	res := ApplyResult{Status: st}
	var nc *NotConvergedError
	if errors.As(err, &nc) {
		res.NotConverged = make(map[string]string, len(nc.Servers))
		for n := range nc.Servers {
			res.NotConverged[n] = nc.Why[n]
		}
	}
	return res
}
