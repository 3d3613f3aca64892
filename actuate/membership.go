package actuate

import (
	"fmt"
	"os"
)

// MembershipMode names how procfleet tells which processes belong to a
// server (DESIGN.md "Membership").
type MembershipMode string

// Membership modes.
const (
	// MembershipCgroup: each server runs in a cgroup v2 of its own, made by
	// procfleet (<procfleet's cgroup>/procfleet-<state folder id>/<name>),
	// which no member can leave by forking, setsid, double fork, exec,
	// retitling or dropping privileges.
	MembershipCgroup MembershipMode = "cgroup"
	// MembershipSession: the server's session and process group (the
	// leader's pid, by construction), its descendants while their parent
	// chain leads to it, and every process whose environment carries its
	// instance token where that can still be read.
	MembershipSession MembershipMode = "session"
)

// CgroupEnv set to "off" makes procfleet use MembershipSession even where
// it could make cgroups (tests run both modes with it).
const CgroupEnv = "PROCFLEET_CGROUP"

// Membership is the mode a spawn would use now.
type Membership struct {
	Mode MembershipMode
	// Cgroup is the cgroup v2 path below which server cgroups are made
	// (MembershipCgroup).
	Cgroup string
	// Why says why cgroups are not used (MembershipSession).
	Why string
}

// String names the mode for status and describe.
func (m Membership) String() string {
	if m.Mode == MembershipCgroup {
		return fmt.Sprintf("cgroup (each server in its own cgroup below %s)", m.Cgroup)
	}
	return fmt.Sprintf("session (session and process group, plus processes carrying the instance token; cgroups not used: %s)", m.Why)
}

// MembershipOf names the mode of a running server from its record.
func MembershipOf(rec Record) MembershipMode {
	if rec.Cgroup != "" {
		return MembershipCgroup
	}
	return MembershipSession
}

// cgroupsOff reports whether the environment forces the session mode.
func cgroupsOff() bool { return os.Getenv(CgroupEnv) == "off" }
