package actuate

import (
	"crypto/rand"
	"encoding/hex"
	"path"
	"strings"
)

// Environment variables procfleet sets in every server it starts, after the
// declared ones (they cannot be overridden).
const (
	// InstanceEnv carries the instance token: 128 random bits, new at each
	// spawn, also kept in the record. A process carrying it descends from
	// that spawn (or was given the token on purpose by one that does).
	InstanceEnv = "PROCFLEET_INSTANCE"
	// ServerEnv carries the server's (instance) name.
	ServerEnv = "PROCFLEET_SERVER"
)

// cgroupPrefix starts the name of a state folder's cgroup:
// procfleet-<StateDir.ID>.
const cgroupPrefix = "procfleet-"

// newToken returns a fresh instance token: 16 bytes from crypto/rand in
// lower-case hex. rand.Read does not fail on the supported systems (it
// panics rather than return short on Go 1.24 and later).
func newToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// validToken reports whether s has the form of an instance token.
func validToken(s string) bool {
	if len(s) != 32 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// validCgroupPath reports whether p has the form of a server's cgroup:
// absolute, clean, ending in /procfleet-<something>/<name>. Which
// procfleet-<id> is this folder's is StateDir.ownCgroup's to say.
func validCgroupPath(p, name string) bool {
	if !strings.HasPrefix(p, "/") || path.Clean(p) != p || path.Base(p) != name {
		return false
	}
	parent := path.Base(path.Dir(p))
	return strings.HasPrefix(parent, cgroupPrefix) && len(parent) > len(cgroupPrefix)
}

// ownCgroup reports whether the record's cgroup is one this state folder
// makes for that server: .../procfleet-<this folder's ID>/<name>. A record
// naming any other cgroup is untrusted: cgroup.kill on its word could end
// anything.
func (d *StateDir) ownCgroup(r Record) bool {
	return validCgroupPath(r.Cgroup, r.Name) && path.Base(path.Dir(r.Cgroup)) == cgroupPrefix+d.ID()
}
