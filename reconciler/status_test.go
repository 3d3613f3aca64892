package reconciler

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/procfleet/procfleet/actuate"
)

// statusFixture is a fleet of n servers in assorted states.
func statusFixture(n int) Status {
	at := time.Date(2026, 12, 2, 10, 0, 0, 123, time.UTC)
	st := Status{Servers: make([]ServerStatus, 0, n), Errors: []StatusError{}}
	for i := range n {
		ss := ServerStatus{
			Name: fmt.Sprintf("web-%04d", i), Phase: PhaseRunning, Ready: i%3 != 0,
			PID: 1000 + i, Port: 5000 + i, Restarts: i % 4,
			Reason: "Ready", Message: `answers on "127.0.0.1" <ok> & more`,
			Conditions: []Condition{{Type: ConditionReady, Status: ConditionTrue, LastTransitionTime: at}},
		}
		if i%2 == 0 {
			started := at.Add(time.Duration(i) * time.Millisecond)
			ss.StartedAt = &started
		}
		if i%5 == 0 {
			ss.LastExit = &LastExit{Code: -1, Signal: "SIGKILL", Reason: "killed", At: at}
		}
		if i%7 == 0 {
			idx := i % 3
			ss.ReplicaOf, ss.Index = "web", &idx
		}
		st.Servers = append(st.Servers, ss)
	}
	return st
}

// TestStatusFileEncodesAsWriteStatus: status.json written by up's writer
// has, after every change, the bytes WriteStatus writes for the same status.
func TestStatusFileEncodesAsWriteStatus(t *testing.T) {
	var f statusFile
	check := func(what string, s Status) {
		t.Helper()
		want, err := json.MarshalIndent(s, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, '\n')
		changed, err := f.update(s)
		if err != nil {
			t.Fatalf("%s: update: %v", what, err)
		}
		if unchanged := strings.HasPrefix(what, "unchanged"); changed == unchanged {
			t.Fatalf("%s: update says changed %v", what, changed)
		}
		var buf bytes.Buffer
		if err := f.encode(&buf, s); err != nil {
			t.Fatalf("%s: encode: %v", what, err)
		}
		got := buf.Bytes()
		if !bytes.Equal(got, want) {
			t.Fatalf("%s: encoded\n%s\nwant\n%s", what, got, want)
		}
		var back Status
		if err := json.Unmarshal(got, &back); err != nil {
			t.Fatalf("%s: does not read back: %v", what, err)
		}
	}
	check("no servers", Status{Servers: []ServerStatus{}, Errors: []StatusError{}})
	check("nil servers", Status{Errors: []StatusError{}})
	check("nil lists", Status{})
	st := statusFixture(12)
	check("first", st)
	check("unchanged", st)
	check("unchanged, a copy", statusFixture(12))
	st.Servers[3].Phase, st.Servers[3].Reason = PhaseStopping, "Stopping"
	st.Servers[4].Conditions = []Condition{{Type: ConditionReady, Status: ConditionFalse}}
	idx := 9
	st.Servers[5].Index = &idx
	check("three changed", st)
	*st.Servers[5].Index = 10 // the same pointer, a new value
	check("pointed-to value changed", st)
	st.Errors = []StatusError{{File: "a.yaml", Line: 3, Field: "spec.port", Message: "must be > 0"}}
	check("errors", st)
	st.Servers = append(st.Servers[:2], st.Servers[6:]...)
	check("servers removed", st)
	if len(f.entries) != len(st.Servers) {
		t.Fatalf("%d entries kept for %d servers", len(f.entries), len(st.Servers))
	}
	st.Servers = append(st.Servers, ServerStatus{Name: "zz", Conditions: []Condition{{Type: ConditionReady, Status: ConditionUnknown}}})
	check("server added", st)
}

// TestServerStatusSameAndClone: same tells apart two statuses that differ
// in any one field, and clone shares no memory. Every field of
// ServerStatus is listed here: a new one fails the test until same and
// clone take it in, or statusFile would miss its changes.
func TestServerStatusSameAndClone(t *testing.T) {
	at := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	idx := 2
	base := ServerStatus{
		Name: "web-1", Phase: PhaseRunning, Ready: true, PID: 10, Port: 5001, Restarts: 1,
		StartedAt: &at, Reason: "Ready", Message: "m", LastExit: &LastExit{Code: 1, At: at},
		Conditions: []Condition{{Type: ConditionReady, Status: ConditionTrue, LastTransitionTime: at}},
		ReplicaOf:  "web", Index: &idx, Membership: actuate.MembershipCgroup,
	}
	later, otherIdx := at.Add(time.Nanosecond), 3
	change := map[string]func(*ServerStatus){
		"Name":       func(s *ServerStatus) { s.Name = "web-2" },
		"Phase":      func(s *ServerStatus) { s.Phase = PhaseStopping },
		"Ready":      func(s *ServerStatus) { s.Ready = false },
		"PID":        func(s *ServerStatus) { s.PID = 11 },
		"Port":       func(s *ServerStatus) { s.Port = 5002 },
		"Restarts":   func(s *ServerStatus) { s.Restarts = 2 },
		"StartedAt":  func(s *ServerStatus) { s.StartedAt = &later },
		"Reason":     func(s *ServerStatus) { s.Reason = "Exited" },
		"Message":    func(s *ServerStatus) { s.Message = "n" },
		"LastExit":   func(s *ServerStatus) { s.LastExit = &LastExit{Code: 2, At: at} },
		"Conditions": func(s *ServerStatus) { s.Conditions = []Condition{{Type: ConditionReady, Status: ConditionFalse}} },
		"ReplicaOf":  func(s *ServerStatus) { s.ReplicaOf = "api" },
		"Index":      func(s *ServerStatus) { s.Index = &otherIdx },
		"Membership": func(s *ServerStatus) { s.Membership = actuate.MembershipSession },
		"Events":     nil, // not written to status.json
	}
	typ := reflect.TypeFor[ServerStatus]()
	for i := range typ.NumField() {
		name := typ.Field(i).Name
		mod, listed := change[name]
		if !listed {
			t.Errorf("ServerStatus.%s is new: make same and clone take it in, then list it here", name)
			continue
		}
		if mod == nil {
			continue
		}
		c := base.clone()
		mod(&c)
		if base.same(&c) || c.same(&base) {
			t.Errorf("a change of %s is not seen by same", name)
		}
	}
	c := base.clone()
	if !base.same(&c) {
		t.Fatal("a clone is not the same")
	}
	if c.StartedAt == base.StartedAt || c.LastExit == base.LastExit || c.Index == base.Index || &c.Conditions[0] == &base.Conditions[0] {
		t.Fatal("a clone shares memory with its original")
	}
	*base.Index = 7
	if base.same(&c) {
		t.Fatal("a change through a pointer is not seen by same against a clone")
	}
}

// TestStatusFileWritesOnlyChanges: a write of the content already in the
// file leaves the file alone; a changed status replaces it; a failed write
// is tried again even if the status has not changed since.
func TestStatusFileWritesOnlyChanges(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "status.json")
	f := statusFile{path: path}
	inode := func() uint64 {
		t.Helper()
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		return fi.Sys().(*syscall.Stat_t).Ino
	}
	st := statusFixture(5)
	if err := f.write(st); err != nil {
		t.Fatal(err)
	}
	first := inode()
	if err := f.write(statusFixture(5)); err != nil {
		t.Fatal(err)
	}
	if inode() != first {
		t.Fatal("an unchanged status was written again")
	}
	st.Servers[1].PID = 4242
	if err := f.write(st); err != nil {
		t.Fatal(err)
	}
	if inode() == first {
		t.Fatal("a changed status was not written")
	}
	if got, err := ReadStatus(path); err != nil || got.Servers[1].PID != 4242 {
		t.Fatalf("ReadStatus = %+v, %v; want pid 4242", got.Servers[1], err)
	}

	// The folder moved away: the write fails; once it is back, the same
	// status is written, though it has not changed since the failure.
	if err := os.Rename(dir, dir+".away"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir + ".away") })
	st.Servers[2].PID = 4343
	if err := f.write(st); err == nil {
		t.Fatal("a write into a missing folder did not fail")
	}
	if err := os.Rename(dir+".away", dir); err != nil {
		t.Fatal(err)
	}
	if err := f.write(st); err != nil {
		t.Fatal(err)
	}
	if got, err := ReadStatus(path); err != nil || got.Servers[2].PID != 4343 {
		t.Fatalf("after the failed write, ReadStatus = %+v, %v; want pid 4343", got.Servers[2], err)
	}
}

// BenchmarkStatusWrite1000 is one write of status.json by up's writer
// while a fleet of 1,000 starts: 20 servers changed since the last write.
func BenchmarkStatusWrite1000(b *testing.B) {
	st := statusFixture(1000)
	f := statusFile{path: filepath.Join(b.TempDir(), "status.json")}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		for j := range 20 {
			st.Servers[(i*20+j)%1000].PID++
		}
		if err := f.write(st); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkWriteStatus1000 is WriteStatus of a fleet of 1,000: what each
// write of status.json cost before statusFile.
func BenchmarkWriteStatus1000(b *testing.B) {
	st := statusFixture(1000)
	path := filepath.Join(b.TempDir(), "status.json")
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		st.Servers[i%1000].PID++
		if err := WriteStatus(path, st); err != nil {
			b.Fatal(err)
		}
	}
}

// TestStatusIntoReusedMemory: a snapshot built in the memory of an
// earlier one (the status writer's) is the snapshot Status builds afresh,
// whatever changed in between, and shares no memory with the earlier one
// beyond what it was handed.
func TestStatusIntoReusedMemory(t *testing.T) {
	r := &Reconciler{servers: map[string]*server{}, desired: map[string]Desired{}}
	at := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	set := func(name string, pid int, ready ConditionStatus) {
		s := r.serverLocked(name)
		s.st.pid, s.st.startedAt, s.st.phase = pid, at.Add(time.Duration(pid)), PhaseRunning
		s.st.ready = Condition{Type: ConditionReady, Status: ready, LastTransitionTime: at}
	}
	for i := range 5 {
		set(fmt.Sprintf("s%d", i), 100+i, ConditionTrue)
	}
	buf := r.statusInto(nil, false).Servers
	check := func(what string) {
		t.Helper()
		want := r.Status()
		for i := range want.Servers {
			want.Servers[i].Events = nil
		}
		got := r.statusInto(buf, false)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: built in reused memory\n%+v\nwant\n%+v", what, got, want)
		}
		buf = got.Servers
	}
	check("unchanged")
	set("s1", 0, ConditionFalse) // no process: no start time
	set("s3", 300, ConditionUnknown)
	check("changed")
	r.serverLocked("a-new") // sorts first, Pending, no condition yet
	delete(r.servers, "s4")
	check("one added, one gone")
	for i := range 8 {
		set(fmt.Sprintf("t%d", i), 200+i, ConditionTrue)
	}
	check("grown past the buffer")
}
