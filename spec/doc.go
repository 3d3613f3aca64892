// Package spec is procfleet's fleet-file API: the Server type, loading of
// files, multi-document files and folders, defaults, validation that reports
// every error with its file, line and field path, the spec hash, and the JSON
// Schema of the file format. It imports nothing of the project.
package spec
