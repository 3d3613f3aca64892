package main

import (
	"fmt"
	"slices"

	"github.com/procfleet/procfleet/spec"
)

// unknownNames checks every name against the servers known (declared in
// the fleet files or recorded in the state folder) and returns an error
// for the first one that is not among them: "no server named X", with the
// nearest known name when one is near. Every verb that takes server names
// uses it, so that a typo never silently does nothing.
func unknownNames(names, known []string) error {
	for _, n := range names {
		if slices.Contains(known, n) {
			continue
		}
		if best, near := spec.NearestName(n, known); near {
			return fmt.Errorf("no server named %s (did you mean %s?)", n, best)
		}
		return fmt.Errorf("no server named %s", n)
	}
	return nil
}
