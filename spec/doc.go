// Package spec is procfleet's fleet-file API: the Server type, loading of
// files, multi-document files and folders, env files, defaults, validation
// that reports every error with its file, line and field path, warnings,
// the instances a fleet runs and their spec hashes, and the JSON Schema of
// the file format. It imports nothing of the project.
//
// The pipeline is Load = read files -> strict decode -> SetDefaults -> read
// env files -> Validate -> Instances and Warnings. Its guarantees:
//
//   - Load never returns a partial fleet: either every file read, decoded
//     and validated cleanly and the Fleet holds every server, sorted by
//     name, or the Fleet is nil and the error is an ErrorList.
//   - Errors are all reported at once, not the first one only, each with
//     the file, the line where the YAML parser gives one, and the field
//     path ("spec.readinessProbe.httpGet.port", "spec.env[2].name"), sorted
//     by file, line and field. An unknown field suggests the nearest known
//     one ("did you mean \"command\"?"); a bad enumerated value lists the
//     valid ones. Errors that would only repeat a decoding error (the same
//     field, or one under it) are left out.
//   - Decoding is strict: unknown fields, duplicate fields and values of
//     the wrong type (a quoted "8080" for a port, a number for a string)
//     are errors. Documents must say apiVersion: procfleet.dev/v1alpha1 and
//     kind: Server; empty documents are skipped. Anchors, aliases and merge
//     keys (<<) work as in YAML 1.1, with every alias expansion charged to
//     the bound below.
//   - Folders contribute their *.yaml and *.yml files, sorted by name, not
//     recursively; hidden files (editor temp and lock files) are skipped.
//     Symlinks are followed; a file reached twice is read once. workingDir
//     is resolved against the folder of the file as given (not of a
//     symlink's target) and is absolute after Load.
//   - Validate, Warn and Changes are pure (no I/O) and deterministic;
//     ProgramWarnings and FindProgram read the file system.
//   - Hostile input is bounded: files over MaxFileSize, more than
//     MaxServers servers or MaxFiles files, alias fan-out beyond a fixed
//     node budget, and more than 100 errors in a file are errors; no input
//     makes the loader panic (FuzzLoadBytes).
//   - Fleet.Instances is the flat view the reconciler runs: one Instance
//     per server, or <name>-0 ... <name>-<n-1> for spec.replicas, with its
//     port (spec.port + index), its argv and environment after $(NAME)
//     expansion (each variable with where it came from, for describe), its
//     probes on its own port, its minimum ready time and its hash.
//   - Expansion is Kubernetes': $(NAME) in command, args and env values
//     refers to procfleet's environment, the env files, earlier env entries,
//     PORT, PROCFLEET_REPLICA and PROCFLEET_SERVER; "$$" is "$"; a
//     reference that does not resolve stays as written and is a warning.
//     Env files are dotenv (KEY=VALUE, # comments, quotes); their values are
//     literal. A missing env file is an error at its spec.envFile entry.
//   - Instance.Hash covers only what shapes the running process: command
//     and args after expansion, the variables set by envFile and env,
//     workingDir and port. Probes, timeouts, replicas, minReadySeconds,
//     restart policy, dependencies, labels and procfleet's own inherited
//     environment never change it, so never replace a running instance;
//     an edited env file changes the hash of exactly the instances whose
//     variables it changes. Changes lists what differs between two
//     versions of an instance, naming variables, never their values.
//   - Validation also refuses port 0, overlapping port ranges (naming both
//     servers and the port), a server named like another's replica, and
//     the variables procfleet reserves; the habits of docker compose,
//     process-compose and PM2 (a string command, an env mapping, a probe
//     at the wrong level, their field names, tabs and bad indentation) get
//     a hint saying what to write.
//   - Schema is generated from the types (not hand-written) with their doc
//     comments as descriptions, and forbids unknown fields as Load does.
package spec
