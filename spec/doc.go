// Package spec is procfleet's fleet-file API: the Server type, loading of
// files, multi-document files and folders, defaults, validation that reports
// every error with its file, line and field path, the spec hash, and the JSON
// Schema of the file format. It imports nothing of the project.
//
// The pipeline is Load = read files -> strict decode -> SetDefaults ->
// Validate. Its guarantees:
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
//   - Validate is pure (no I/O) and deterministic.
//   - Hostile input is bounded: files over MaxFileSize, more than
//     MaxServers servers or MaxFiles files, alias fan-out beyond a fixed
//     node budget, and more than 100 errors in a file are errors; no input
//     makes the loader panic (FuzzLoadBytes).
//   - Server.Hash covers only what shapes the running process: command,
//     args, env (in order), workingDir and port. Changing probes, timeouts,
//     restart policy, dependencies or labels never changes it, so never
//     replaces a running server. FieldDiff names the covered fields that
//     differ.
//   - Schema is generated from the types (not hand-written) with their doc
//     comments as descriptions, and forbids unknown fields as Load does.
package spec
