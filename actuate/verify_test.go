package actuate

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/procfleet/procfleet/observe"
)

// TestDecide holds the ownership rules (DESIGN.md rules 1-6, the record v2
// evidence) row by row, without processes: Decide is pure.
func TestDecide(t *testing.T) {
	const token = "0123456789abcdef0123456789abcdef"
	rec := Record{Version: 2, Name: "api", PID: 100, PGID: 100, StartTime: 5000, BootID: "boot-a", UID: 1000,
		Cmdline: []string{"./api", "--port", "8080"}, PidfdInode: 77, Instance: token}
	live := observe.Identity{PID: 100, PGID: 100, UID: 1000, State: observe.StateSleeping, StartTime: 5000,
		BootID: "boot-a", Cmdline: []string{"./api", "--port", "8080"}}
	with := func(f func(*Record)) Record {
		r := rec
		r.Cmdline = append([]string(nil), rec.Cmdline...)
		f(&r)
		return r
	}
	id := func(f func(*observe.Identity)) observe.Identity { i := live; f(&i); return i }
	execd := id(func(i *observe.Identity) { i.Cmdline = []string{"/usr/bin/python3", "app.py"} })
	seen := func(f func(*Seen)) Seen {
		s := Seen{Identity: live, BootID: "boot-a", Inode: 77, HaveInode: true}
		f(&s)
		return s
	}
	noInode := func(s *Seen) { s.Inode, s.HaveInode = 0, false }

	tests := []struct {
		name   string
		rec    Record
		seen   Seen
		want   Verdict
		reason QuarantineReason
		msg    string // in Message
		proof  string // in Evidence (Owned)
	}{
		// Rule 1.
		{name: "rule 1 gone", rec: rec, seen: Seen{IdentityErr: observe.ErrGone}, want: VerdictStale, msg: "exited"},
		{name: "rule 1 exited while pinned", rec: rec, seen: Seen{IdentityErr: fmt.Errorf("read: %w", observe.ErrUntrusted)}, want: VerdictStale},
		{name: "rule 1 zombie", rec: rec, seen: seen(func(s *Seen) { s.Identity.State = observe.StateZombie; s.Identity.Cmdline = nil }), want: VerdictStale, msg: "zombie"},
		{name: "rule 1 dead", rec: rec, seen: seen(func(s *Seen) { s.Identity.State = observe.StateDead }), want: VerdictStale},
		// Rule 2: any one proof of identity beyond pid, start time and boot id.
		{name: "rule 2 everything matches", rec: rec, seen: seen(func(s *Seen) { s.Token = TokenOurs }), want: VerdictOwned, proof: "pidfd inode 77"},
		{name: "rule 2 pidfd inode alone (exec'd, token wiped)", rec: rec, seen: seen(func(s *Seen) { s.Identity = execd }), want: VerdictOwned, proof: "pidfd inode 77"},
		{name: "rule 2 token alone (exec'd, no pidfs)", rec: rec, seen: seen(func(s *Seen) { s.Identity = execd; noInode(s); s.Token = TokenOurs }), want: VerdictOwned, proof: "instance token " + token},
		{name: "rule 2 cgroup alone (retitled, token wiped, no pidfs)", rec: with(func(r *Record) { r.Cgroup = "/procfleet-1-2/api" }),
			seen: seen(func(s *Seen) { s.Identity = execd; noInode(s); s.Cgroup = CgroupMember }), want: VerdictOwned, proof: "member of cgroup /procfleet-1-2/api"},
		{name: "rule 2 command line alone (v1 record, no pidfs)", rec: with(func(r *Record) { r.Instance = ""; r.PidfdInode = 0 }), seen: seen(noInode), want: VerdictOwned, proof: "command line"},
		{name: "rule 2 record without inode, command line", rec: with(func(r *Record) { r.PidfdInode = 0 }), seen: seen(func(s *Seen) { s.Inode = 99 }), want: VerdictOwned, proof: "command line"},
		{name: "rule 2 another uid (privilege drop) is still owned", rec: rec, seen: seen(func(s *Seen) { s.Identity.UID = 65534; s.Token = TokenOurs }), want: VerdictOwned, proof: "runs as uid 65534"},
		{name: "rule 2 pidfd inode, command line unread (a stop)", rec: rec, seen: seen(func(s *Seen) { s.Identity.Cmdline = nil; s.CmdlineUnread = true }), want: VerdictOwned, proof: "pidfd inode 77"},
		{name: "rule 4 command line unread proves nothing", rec: with(func(r *Record) { r.Cmdline = nil }), seen: seen(func(s *Seen) { s.Identity.Cmdline = nil; s.CmdlineUnread = true; noInode(s) }), want: VerdictQuarantine, reason: IdentityMismatch},
		{name: "rule 2 cgroup elsewhere does not decide", rec: with(func(r *Record) { r.Cgroup = "/procfleet-1-2/api" }), seen: seen(func(s *Seen) { s.Cgroup = CgroupElsewhere }), want: VerdictOwned, proof: "pidfd inode 77"},
		// Rule 3.
		{name: "rule 3 start time differs", rec: rec, seen: seen(func(s *Seen) { s.Identity.StartTime = 6000 }), want: VerdictReused, msg: "start time 6000"},
		{name: "rule 3 boot differs", rec: rec, seen: seen(func(s *Seen) { s.BootID = "boot-b" }), want: VerdictReused, msg: "another boot"},
		{name: "rule 3 inode differs", rec: rec, seen: seen(func(s *Seen) { s.Inode = 78 }), want: VerdictReused, msg: "pidfd inode 78"},
		{name: "rule 3 inode differs though the token matches", rec: rec, seen: seen(func(s *Seen) { s.Inode = 78; s.Token = TokenOurs }), want: VerdictReused},
		{name: "rule 3 another instance's token", rec: rec, seen: seen(func(s *Seen) { noInode(s); s.Token = TokenOther }), want: VerdictReused, msg: "another instance token"},
		{name: "rule 3 start time differs and cmdline differs", rec: rec, seen: seen(func(s *Seen) { s.Identity.StartTime = 1; s.Identity.Cmdline = []string{"sh"} }), want: VerdictReused},
		// Rule 4.
		{name: "rule 4 cmdline differs, no token readable, no pidfs", rec: rec, seen: seen(func(s *Seen) { s.Identity = execd; noInode(s) }), want: VerdictQuarantine, reason: IdentityMismatch, msg: "python3"},
		{name: "rule 4 cmdline rewritten to one element", rec: rec, seen: seen(func(s *Seen) { s.Identity.Cmdline = []string{"./api --port 8080"}; noInode(s) }), want: VerdictQuarantine, reason: IdentityMismatch},
		{name: "rule 4 record inode, kernel without pidfs", rec: rec, seen: seen(func(s *Seen) { s.Identity = execd; noInode(s); s.Cgroup = CgroupElsewhere }), want: VerdictQuarantine, reason: IdentityMismatch},
		// Rule 5.
		{name: "rule 5 no start time, cmdline matches", rec: with(func(r *Record) { r.StartTime = 0 }), seen: seen(noInode), want: VerdictQuarantine, reason: UnverifiedOwner, msg: "no start time"},
		{name: "rule 5 no boot id, cmdline matches", rec: with(func(r *Record) { r.BootID = "" }), seen: seen(noInode), want: VerdictQuarantine, reason: UnverifiedOwner, msg: "no boot id"},
		{name: "rule 5 no start time, token ours still unproven", rec: with(func(r *Record) { r.StartTime = 0 }), seen: seen(func(s *Seen) { s.Token = TokenOurs }), want: VerdictQuarantine, reason: UnverifiedOwner},
		{name: "rule 5 no start time, cmdline differs", rec: with(func(r *Record) { r.StartTime = 0 }), seen: seen(func(s *Seen) { s.Identity.Cmdline = []string{"vim"} }), want: VerdictReused},
		{name: "rule 5 no start time, exited", rec: with(func(r *Record) { r.StartTime = 0 }), seen: Seen{IdentityErr: observe.ErrGone}, want: VerdictStale},
		{name: "rule 5 no start time, zombie", rec: with(func(r *Record) { r.StartTime = 0 }), seen: seen(func(s *Seen) { s.Identity.State = observe.StateZombie }), want: VerdictStale},
		// Rule 6.
		{name: "rule 6 identity unreadable", rec: rec, seen: Seen{IdentityErr: errors.New("permission denied"), BootID: "boot-a"}, want: VerdictQuarantine, reason: UnverifiedOwner, msg: "permission denied"},
		{name: "rule 6 boot id unreadable", rec: rec, seen: seen(func(s *Seen) { s.BootID = "" }), want: VerdictQuarantine, reason: UnverifiedOwner, msg: "boot id"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Decide(tt.rec, tt.seen)
			if got.Verdict != tt.want || got.Reason != tt.reason {
				t.Fatalf("Decide = %v/%q (%s), want %v/%q", got.Verdict, got.Reason, got.Message, tt.want, tt.reason)
			}
			if !strings.Contains(got.Message, tt.msg) {
				t.Errorf("Message %q does not mention %q", got.Message, tt.msg)
			}
			if got.Handle != nil {
				t.Error("Decide must not set a Handle")
			}
			if got.Verdict == VerdictOwned {
				for _, w := range []string{"pid 100", "start time 5000", "boot id boot-a", tt.proof} {
					if !strings.Contains(got.Evidence, w) {
						t.Errorf("Evidence %q does not name %q", got.Evidence, w)
					}
				}
				if tt.seen.CmdlineUnread && strings.Contains(got.Evidence, "command line") {
					t.Errorf("Evidence %q names a command line it did not read", got.Evidence)
				}
			} else if got.Evidence != "" {
				t.Errorf("Evidence %q set for a verdict that allows no signal", got.Evidence)
			}
		})
	}
}

// An intent record is never judged by its (absent) pid: Verify leaves it
// to ResolveIntent and signals nothing.
func TestVerifyIntentRecord(t *testing.T) {
	v := Verify(Record{Version: 2, Name: "api", Instance: "0123456789abcdef0123456789abcdef"})
	if v.Verdict != VerdictQuarantine || v.Handle != nil || !strings.Contains(v.Message, "intent record") {
		t.Errorf("Verify(intent) = %+v", v)
	}
}

func TestManualStopHint(t *testing.T) {
	got := ManualStopHint(Record{Name: "api", PID: 1234, PGID: 1200, Cmdline: append([]string{"./api"}, make([]string, 30)...), Cgroup: "/procfleet-1-2/api"})
	for _, w := range []string{"kill -TERM -- -1200", "pid 1234", `["./api"]`, "/procfleet-1-2/api/cgroup.kill", "api.json"} {
		if !strings.Contains(got, w) {
			t.Errorf("ManualStopHint = %q, want it to mention %q", got, w)
		}
	}
	if strings.Contains(got, "environ") {
		t.Errorf("ManualStopHint(cgroup) = %q: the cgroup holds every member, no token search needed", got)
	}
	// Without a cgroup, a member that left the group is found by its token.
	got = ManualStopHint(Record{Name: "api", PID: 1234, PGID: 1234, Cmdline: []string{"./api"}, Instance: "0123456789abcdef0123456789abcdef"})
	for _, w := range []string{"kill -TERM -- -1234", "PROCFLEET_INSTANCE=0123456789abcdef0123456789abcdef", "grep -l 0123456789abcdef0123456789abcdef /proc/*/environ", "api.json"} {
		if !strings.Contains(got, w) {
			t.Errorf("ManualStopHint(session) = %q, want it to mention %q", got, w)
		}
	}
	got = ManualStopHint(Record{Name: "api", Instance: "0123456789abcdef0123456789abcdef"})
	if !strings.Contains(got, "PROCFLEET_INSTANCE=0123456789abcdef0123456789abcdef") {
		t.Errorf("ManualStopHint(intent) = %q, want the token to look for", got)
	}
}
