package spec

import (
	"encoding/json"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// Change is one difference between two versions of an instance, for `diff`
// to render.
type Change struct {
	// Field is the field path: "spec.command", "spec.args",
	// "spec.workingDir", "spec.port", "spec.env" (one variable, see Var),
	// or one that does not restart: "spec.readinessProbe", "metadata.labels",
	// "spec.terminationGracePeriodSeconds" ...
	Field string
	// Var names the variable of a "spec.env" change; its values are never
	// given.
	Var string
	// How is "added", "removed" or "changed" for a "spec.env" change.
	How string
	// Old and New render the two values (argv as a quoted list, numbers,
	// probes and labels as JSON); empty for "spec.env".
	Old, New string
	// Restart is true when the change replaces the instance (it changes
	// the spec hash), false for the ones applied without a restart.
	Restart bool
}

// Changes lists what differs from old to cur, two versions of one
// instance: first what replaces it (command, args, workingDir, port, then
// each variable set by envFile or env whose value changed, by name), then
// what does not (probes, restart policy, dependencies, timeouts,
// minReadySeconds, envFile entries that changed no variable, labels). It is
// empty when nothing changed, and has a Restart change exactly when the two
// hashes differ. It is pure and never reports a variable's value.
func Changes(old, cur *Instance) []Change {
	var out []Change
	restart := func(field, o, n string) {
		if o != n {
			out = append(out, Change{Field: field, Old: o, New: n, Restart: true})
		}
	}
	restart("spec.command", argvText(old.Command), argvText(cur.Command))
	restart("spec.args", argvText(old.Args), argvText(cur.Args))
	restart("spec.workingDir", old.WorkingDir, cur.WorkingDir)
	restart("spec.port", portText(old.Port), portText(cur.Port))
	out = append(out, envChanges(hashedEnv(old), hashedEnv(cur))...)

	o, c := &old.Server.Spec, &cur.Server.Spec
	keep := func(field string, a, b any) {
		ja, jb := jsonText(a), jsonText(b)
		if ja != jb {
			out = append(out, Change{Field: field, Old: ja, New: jb})
		}
	}
	keep("spec.envFile", o.EnvFile, c.EnvFile)
	keep("spec.readinessProbe", old.Readiness, cur.Readiness)
	keep("spec.livenessProbe", old.Liveness, cur.Liveness)
	keep("spec.restartPolicy", o.RestartPolicy, c.RestartPolicy)
	keep("spec.dependsOn", o.DependsOn, c.DependsOn)
	keep("spec.minReadySeconds", old.MinReady.Seconds(), cur.MinReady.Seconds())
	keep("spec.startupTimeoutSeconds", o.StartupTimeout().Seconds(), c.StartupTimeout().Seconds())
	keep("spec.terminationGracePeriodSeconds", o.TerminationGracePeriod().Seconds(), c.TerminationGracePeriod().Seconds())
	keep("spec.killTimeoutSeconds", o.KillTimeout().Seconds(), c.KillTimeout().Seconds())
	keep("metadata.labels", old.Server.Metadata.Labels, cur.Server.Metadata.Labels)
	return out
}

// hashedEnv is the variables the hash covers (set by envFile and env, with
// references to procfleet's own environment as written), by name.
func hashedEnv(in *Instance) map[string]string {
	own := in.Server.procfleetVars(in.Name, in.indexOrNone(), in.Port)
	r := in.Server.Resolve(own, nil, nil)
	m := make(map[string]string, len(r.Env))
	for _, v := range r.Env[:len(r.Env)-len(own)] {
		m[v.Name] = v.Value
	}
	return m
}

func (in *Instance) indexOrNone() int {
	if in.ReplicaOf == "" {
		return -1
	}
	return in.Index
}

// envChanges names the variables added, removed or changed, sorted.
func envChanges(old, cur map[string]string) []Change {
	var out []Change
	for _, name := range slices.Sorted(maps.Keys(cur)) {
		switch ov, ok := old[name]; {
		case !ok:
			out = append(out, Change{Field: "spec.env", Var: name, How: "added", Restart: true})
		case ov != cur[name]:
			out = append(out, Change{Field: "spec.env", Var: name, How: "changed", Restart: true})
		}
	}
	for _, name := range slices.Sorted(maps.Keys(old)) {
		if _, ok := cur[name]; !ok {
			out = append(out, Change{Field: "spec.env", Var: name, How: "removed", Restart: true})
		}
	}
	slices.SortStableFunc(out, func(a, b Change) int { return strings.Compare(a.Var, b.Var) })
	return out
}

func argvText(argv []string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		q[i] = strconv.Quote(a)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

func portText(p int) string {
	if p == 0 {
		return "none"
	}
	return strconv.Itoa(p)
}

func jsonText(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return err.Error()
	}
	return string(b)
}
