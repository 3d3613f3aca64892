package actuate

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/procfleet/procfleet/observe"
)

func TestDecide(t *testing.T) {
	const euid = 1000
	rec := Record{Name: "api", PID: 100, PGID: 100, StartTime: 5000, BootID: "boot-a", UID: euid,
		Cmdline: []string{"./api", "--port", "8080"}, PidfdInode: 77}
	live := observe.Identity{PID: 100, PGID: 100, UID: euid, State: observe.StateSleeping, StartTime: 5000,
		BootID: "boot-a", Cmdline: []string{"./api", "--port", "8080"}}
	with := func(f func(*Record)) Record {
		r := rec
		r.Cmdline = append([]string(nil), rec.Cmdline...)
		f(&r)
		return r
	}
	id := func(f func(*observe.Identity)) observe.Identity { i := live; f(&i); return i }

	tests := []struct {
		name      string
		rec       Record
		id        observe.Identity
		idErr     error
		boot      string
		inode     uint64
		haveInode bool
		want      Verdict
		reason    QuarantineReason
		msg       string
	}{
		{name: "rule 2 owned", rec: rec, id: live, boot: "boot-a", inode: 77, haveInode: true, want: VerdictOwned},
		{name: "rule 2 owned, kernel without pidfs", rec: rec, id: live, boot: "boot-a", want: VerdictOwned},
		{name: "rule 2 owned, record without inode", rec: with(func(r *Record) { r.PidfdInode = 0 }), id: live, boot: "boot-a", inode: 99, haveInode: true, want: VerdictOwned},
		{name: "rule 1 gone", rec: rec, idErr: observe.ErrGone, boot: "boot-a", want: VerdictStale, msg: "exited"},
		{name: "rule 1 exited while pinned", rec: rec, idErr: fmt.Errorf("read: %w", observe.ErrUntrusted), boot: "boot-a", want: VerdictStale},
		{name: "rule 1 zombie", rec: rec, id: id(func(i *observe.Identity) { i.State = observe.StateZombie; i.Cmdline = nil }), boot: "boot-a", want: VerdictStale, msg: "zombie"},
		{name: "rule 1 dead", rec: rec, id: id(func(i *observe.Identity) { i.State = observe.StateDead }), boot: "boot-a", want: VerdictStale},
		{name: "rule 3 start time differs", rec: rec, id: id(func(i *observe.Identity) { i.StartTime = 6000 }), boot: "boot-a", want: VerdictReused, msg: "start time 6000"},
		{name: "rule 3 boot differs", rec: rec, id: live, boot: "boot-b", want: VerdictReused, msg: "another boot"},
		{name: "rule 3 inode differs", rec: rec, id: live, boot: "boot-a", inode: 78, haveInode: true, want: VerdictReused, msg: "pidfd inode 78"},
		{name: "rule 3 start time differs and cmdline differs", rec: rec, id: id(func(i *observe.Identity) { i.StartTime = 1; i.Cmdline = []string{"sh"} }), boot: "boot-a", want: VerdictReused},
		{name: "rule 4 cmdline differs", rec: rec, id: id(func(i *observe.Identity) { i.Cmdline = []string{"./api", "--port", "9090"} }), boot: "boot-a", inode: 77, haveInode: true, want: VerdictQuarantine, reason: IdentityMismatch, msg: "9090"},
		{name: "rule 4 cmdline rewritten to one element", rec: rec, id: id(func(i *observe.Identity) { i.Cmdline = []string{"./api --port 8080"} }), boot: "boot-a", want: VerdictQuarantine, reason: IdentityMismatch},
		{name: "rule 5 no start time, cmdline matches", rec: with(func(r *Record) { r.StartTime = 0 }), id: live, boot: "boot-a", want: VerdictQuarantine, reason: UnverifiedOwner, msg: "no start time"},
		{name: "rule 5 no boot id, cmdline matches", rec: with(func(r *Record) { r.BootID = "" }), id: live, boot: "boot-a", want: VerdictQuarantine, reason: UnverifiedOwner, msg: "no boot id"},
		{name: "rule 5 no start time, cmdline differs", rec: with(func(r *Record) { r.StartTime = 0 }), id: id(func(i *observe.Identity) { i.Cmdline = []string{"vim"} }), boot: "boot-a", want: VerdictReused},
		{name: "rule 5 no start time, exited", rec: with(func(r *Record) { r.StartTime = 0 }), idErr: observe.ErrGone, want: VerdictStale},
		{name: "rule 5 no start time, zombie", rec: with(func(r *Record) { r.StartTime = 0 }), id: id(func(i *observe.Identity) { i.State = observe.StateZombie }), want: VerdictStale},
		{name: "process of another uid, record names it", rec: with(func(r *Record) { r.UID = 65534 }), id: id(func(i *observe.Identity) { i.UID = 65534 }), boot: "boot-a", want: VerdictQuarantine, reason: IdentityMismatch, msg: "uid 65534"},
		{name: "process of another uid than recorded", rec: rec, id: id(func(i *observe.Identity) { i.UID = 0 }), boot: "boot-a", want: VerdictQuarantine, reason: IdentityMismatch, msg: "runs as uid 0"},
		{name: "rule 6 identity unreadable", rec: rec, idErr: errors.New("permission denied"), boot: "boot-a", want: VerdictQuarantine, reason: UnverifiedOwner, msg: "permission denied"},
		{name: "rule 6 boot id unreadable", rec: rec, id: live, boot: "", want: VerdictQuarantine, reason: UnverifiedOwner, msg: "boot id"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := decideAs(euid, tt.rec, tt.id, tt.idErr, tt.boot, tt.inode, tt.haveInode)
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
				for _, w := range []string{"pid 100", "start time 5000", "boot id boot-a"} {
					if !strings.Contains(got.Evidence, w) {
						t.Errorf("Evidence %q does not name %q", got.Evidence, w)
					}
				}
				if tt.rec.PidfdInode != 0 && tt.haveInode && !strings.Contains(got.Evidence, "pidfd inode 77") {
					t.Errorf("Evidence %q does not name the pidfd inode", got.Evidence)
				}
			} else if got.Evidence != "" {
				t.Errorf("Evidence %q set for a verdict that allows no signal", got.Evidence)
			}
		})
	}
}

func TestManualStopHint(t *testing.T) {
	got := ManualStopHint(Record{Name: "api", PID: 1234, PGID: 1200, Cmdline: []string{"./api"}})
	for _, w := range []string{"kill -TERM -- -1200", "pid 1234", "api.json"} {
		if !strings.Contains(got, w) {
			t.Errorf("ManualStopHint = %q, want it to mention %q", got, w)
		}
	}
}
