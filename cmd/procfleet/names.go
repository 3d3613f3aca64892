package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/procfleet/procfleet/internal/api"
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

// expandNames turns the server names a user typed into instance names, the
// names status, records, logs and the reconciler use: the name of a server
// with spec.replicas ("api") becomes its instances ("api-0", "api-1", ...,
// none with replicas: 0), in index order; any other name stays as typed.
// The result keeps the order given, each name once. A name that is neither
// a server or instance of fleet (nil when the files do not load) nor in
// extra (servers known otherwise: records, a running up's status) is an
// error naming the nearest known name. Every verb that takes server names
// expands them with it.
func expandNames(names []string, fleet *spec.Fleet, extra []string) ([]string, error) {
	replicated := map[string][]string{}
	known := slices.Clone(extra)
	if fleet != nil {
		for i := range fleet.Servers {
			s := &fleet.Servers[i]
			insts := s.InstanceNames()
			known = append(known, s.Metadata.Name)
			known = append(known, insts...)
			if s.Spec.Replicas != nil {
				replicated[s.Metadata.Name] = insts
			}
		}
	}
	if err := unknownNames(names, known); err != nil {
		return nil, err
	}
	out := make([]string, 0, len(names))
	add := func(n string) {
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	for _, n := range names {
		insts, ok := replicated[n]
		if !ok {
			add(n)
			continue
		}
		for _, in := range insts {
			add(in)
		}
	}
	return out, nil
}

// recordNames are the servers with an ownership record in the state folder
// at statePath (read without trusting the records: names only).
func recordNames(statePath string) []string {
	entries, err := os.ReadDir(filepath.Join(statePath, "servers"))
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range entries {
		if n, ok := strings.CutSuffix(e.Name(), ".json"); ok && api.CheckName(n) == nil {
			out = append(out, n)
		}
	}
	return out
}
