package actuate

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/procfleet/procfleet/internal/testserver"
	"github.com/procfleet/procfleet/observe"
)

// TestDecideLift holds the lift of an UntrustedRecord quarantine row by
// row (rule 7), without processes.
func TestDecideLift(t *testing.T) {
	q := UntrustedQuarantine{Name: "api", PID: 100, StartTime: 5, Instance: "0123456789abcdef0123456789abcdef"}
	clear := LiftFacts{Named: NamedGone, Scanned: true}
	with := func(f func(*LiftFacts)) LiftFacts { x := clear; f(&x); return x }
	tests := []struct {
		name string
		q    UntrustedQuarantine
		port int
		f    LiftFacts
		lift bool
		why  string
	}{
		{"gone, port free, nothing runs", q, 8080, clear, true, "pid 100 it named is gone, port 8080 is free"},
		{"another process at its pid", q, 0, with(func(f *LiftFacts) { f.Named = NamedOther }), true, "now another process"},
		{"names no process", UntrustedQuarantine{Name: "api"}, 0, with(func(f *LiftFacts) { f.Named = NamedNone }), true, "names no process"},
		{"its pid may still run", q, 0, with(func(f *LiftFacts) { f.Named = NamedAlive }), false, "may still run"},
		{"its pid cannot be examined", q, 0, with(func(f *LiftFacts) { f.Named = NamedUnknown }), false, "cannot be examined"},
		{"port held", q, 8080, with(func(f *LiftFacts) { f.Holder = &observe.PortHolder{Port: 8080, PIDs: []int{7}, UID: 0, Visible: true} }), false, "port 8080 is held by pid 7"},
		{"processes not listed", q, 0, with(func(f *LiftFacts) { f.Scanned = false }), false, "cannot be listed"},
		{"runs its command line", q, 0, with(func(f *LiftFacts) { f.Runners = []int{9} }), false, "pid 9 runs its command line"},
		{"carries its token", q, 0, with(func(f *LiftFacts) { f.Carriers = []int{11} }), false, "pid 11 carries its instance token"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			why, lift := DecideLift(tt.q, tt.port, tt.f)
			if lift != tt.lift || !strings.Contains(why, tt.why) {
				t.Errorf("DecideLift = %q, %v; want %v and %q", why, lift, tt.lift, tt.why)
			}
		})
	}
}

// The quarantine is on disk: the newest moved-aside record of a name
// stands until a later one is resolved; a corruption after that stands
// again. Every reader sees it, and listing it changes nothing.
func TestUntrustedQuarantinesOnDisk(t *testing.T) {
	d := newStateDir(t)
	dir := filepath.Join(d.Path, serversDir)
	write := func(file, data string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, file), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	at := func(s string) string { return s + ".000000000Z" }
	write("api.json.corrupt-"+at("20261201T100000"), `{"name":"api","pid":42,"startTime":777,"instance":"0123456789abcdef0123456789abcdef", broken`)
	write("web.json.corrupt-"+at("20261201T100000"), "garbage")
	write("web.json.resolved-"+at("20261201T110000"), "garbage")
	write("db.json.resolved-"+at("20261201T100000"), "x")
	write("db.json.corrupt-"+at("20261201T120000"), "x")
	write("old.json.foreign-"+at("20261201T120000"), "x")
	write("notes.txt", "x")
	before, _ := os.ReadDir(dir)
	qs, err := d.UntrustedQuarantines()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, q := range qs {
		names = append(names, q.Name)
	}
	if strings.Join(names, ",") != "api,db" {
		t.Fatalf("quarantines %v, want api (never resolved) and db (corrupted after it was resolved)", names)
	}
	if q := qs[0]; q.PID != 42 || q.StartTime != 777 || q.Instance != "0123456789abcdef0123456789abcdef" || q.MovedAt.Hour() != 10 {
		t.Errorf("salvaged %+v", q)
	}
	if after, _ := os.ReadDir(dir); len(after) != len(before) {
		t.Errorf("listing changed servers/: %d entries, then %d", len(before), len(after))
	}
	// Resolving one makes it stand no more, and keeps the file.
	a := &Actuator{Dir: d, Events: &events{}}
	if err := a.ResolveUntrusted(qs[0], "a test"); err != nil {
		t.Fatal(err)
	}
	qs, _ = d.UntrustedQuarantines()
	if len(qs) != 1 || qs[0].Name != "db" {
		t.Errorf("after resolving api: %+v", qs)
	}
	matches, _ := filepath.Glob(filepath.Join(dir, "api.json.resolved-*"))
	if len(matches) != 1 {
		t.Errorf("resolved files %v, want one", matches)
	}
}

// CheckUntrusted looks at the real machine: a live process running the
// declared command line, or carrying the record's token, keeps the
// quarantine; once it is gone, the quarantine lifts.
func TestCheckUntrustedLive(t *testing.T) {
	a, _ := newActuator(t)
	ctx := testCtx(t)
	port := testserver.FreePort(t)
	r, err := a.Start(ctx, serverReq("api", port, "-port", itoa(port)))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Handle.Close()
	killPinned(t, r.Record.PID)
	q := UntrustedQuarantine{Name: "api", Path: filepath.Join(t.TempDir(), "x"), Instance: r.Record.Instance, PID: 0}
	if why, lift := a.CheckUntrusted(ctx, q, r.Record.SpawnCmdline, 0); lift || !strings.Contains(why, "runs its command line") {
		t.Errorf("CheckUntrusted with the server running = %q, %v", why, lift)
	}
	if why, lift := a.CheckUntrusted(ctx, q, []string{"other"}, 0); lift || !strings.Contains(why, "carries its instance token") {
		t.Errorf("CheckUntrusted with a token carrier = %q, %v", why, lift)
	}
	if why, lift := a.CheckUntrusted(ctx, UntrustedQuarantine{Name: "api"}, []string{"other"}, port); lift || !strings.Contains(why, "port "+itoa(port)+" is held") {
		t.Errorf("CheckUntrusted with the port held = %q, %v", why, lift)
	}
	if err := a.Stop(ctx, r.Record, StopOptions{}); err != nil {
		t.Fatal(err)
	}
	q.PID, q.StartTime = r.Record.PID, r.Record.StartTime
	if why, lift := a.CheckUntrusted(ctx, q, r.Record.SpawnCmdline, port); !lift {
		t.Errorf("CheckUntrusted after the stop = %q, %v; want lifted", why, lift)
	}
}
