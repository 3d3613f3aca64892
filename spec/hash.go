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

// Hash is "sha256:<hex>" over what shapes the running process, and only
// that: command, args, env (in order), workingDir and port. Probes,
// timeouts, restart policy, dependencies and labels are left out, so
// changing them never replaces a running server. nil and empty lists hash
// the same. The encoding is length-prefixed, so no two different specs
// share an input.
func (s *Server) Hash() string {
	h := sha256.New()
	writeString(h, hashVersion)
	writeStrings(h, s.Spec.Command)
	writeStrings(h, s.Spec.Args)
	writeUint(h, uint64(len(s.Spec.Env)))
	for _, e := range s.Spec.Env {
		writeString(h, e.Name)
		writeString(h, e.Value)
	}
	writeString(h, s.Spec.WorkingDir)
	writeUint(h, uint64(int64(s.Spec.Port)))
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

// FieldDiff names the fields covered by the spec hash that differ between a
// and b, in the order command, args, env, workingDir, port. It is empty
// exactly when the two hashes are equal.
func FieldDiff(a, b ServerSpec) []string {
	var diff []string
	if !slices.Equal(a.Command, b.Command) {
		diff = append(diff, "command")
	}
	if !slices.Equal(a.Args, b.Args) {
		diff = append(diff, "args")
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
