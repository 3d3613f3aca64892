package spec

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"hash"
	"slices"
)

// hashVersion is hashed first, so that a change of the encoding below
// changes every hash rather than colliding with old ones.
const hashVersion = "procfleet.dev/spec-hash/v1"

// Hash is the spec hash of the server's first instance (its only one
// without spec.replicas): see Instance.Hash, which the reconciler should
// use, one per instance. It covers only what shapes the running process:
// command and args after $(NAME) expansion, the variables set by envFile
// and env (values after expansion), workingDir and port. Probes, timeouts,
// minReadySeconds, replicas, restart policy, dependencies and labels are
// left out, so changing them never replaces a running server; nor does
// procfleet's own inherited environment: a reference to it is hashed as
// written, so starting procfleet from another shell replaces nothing. nil
// and empty lists hash the same. The encoding is length-prefixed, so no two
// different processes share an input, and a server that uses neither
// envFile nor $(NAME) hashes as it did before they existed.
func (s *Server) Hash() string {
	name, index, port := s.Metadata.Name, -1, s.Spec.Port
	if s.Spec.Replicas != nil {
		name, index = InstanceName(name, 0), 0
	}
	return s.hashFor(s.procfleetVars(name, index, port), port)
}

// hashFor hashes the instance whose procfleet variables are own and whose
// port is port.
func (s *Server) hashFor(own []Var, port int) string {
	r := s.Resolve(own, nil, nil)
	h := sha256.New()
	writeString(h, hashVersion)
	writeStrings(h, r.Command)
	writeStrings(h, r.Args)
	env := r.Env[:len(r.Env)-len(own)] // what envFile and env set
	writeUint(h, uint64(len(env)))
	for _, e := range env {
		writeString(h, e.Name)
		writeString(h, e.Value)
	}
	writeString(h, s.Spec.WorkingDir)
	writeUint(h, uint64(int64(port)))
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

func writeUint(h hash.Hash, v uint64) {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], v)
	h.Write(b[:])
}

func writeString(h hash.Hash, s string) {
	writeUint(h, uint64(len(s)))
	h.Write([]byte(s))
}

func writeStrings(h hash.Hash, ss []string) {
	writeUint(h, uint64(len(ss)))
	for _, s := range ss {
		writeString(h, s)
	}
}

// FieldDiff names the declared fields that shape the process and differ
// between a and b, in the order command, args, envFile, env, workingDir,
// port. It compares the fields as written: an edited env file or a
// variable that $(NAME) refers to changes the hash but not FieldDiff (see
// Changes, which compares instances).
func FieldDiff(a, b ServerSpec) []string {
	var diff []string
	if !slices.Equal(a.Command, b.Command) {
		diff = append(diff, "command")
	}
	if !slices.Equal(a.Args, b.Args) {
		diff = append(diff, "args")
	}
	if !slices.Equal(a.EnvFile, b.EnvFile) {
		diff = append(diff, "envFile")
	}
	if !slices.Equal(a.Env, b.Env) {
		diff = append(diff, "env")
	}
	if a.WorkingDir != b.WorkingDir {
		diff = append(diff, "workingDir")
	}
	if a.Port != b.Port {
		diff = append(diff, "port")
	}
	return diff
}
