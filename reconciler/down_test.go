package reconciler

import (
	"context"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"

	"github.com/procfleet/procfleet/actuate"
	"github.com/procfleet/procfleet/internal/testserver"
)

// TestDownMergesStatus: a standalone down of one server writes its new
// entry into status.json and keeps the other servers' entries as apply
// wrote them.
func TestDownMergesStatus(t *testing.T) {
	f := newTestFleet(t)
	ports := testserver.FreePorts(t, 2)
	f.add(&testSpec{name: "db", port: ports[0]})
	f.add(&testSpec{name: "api", port: ports[1]})
	f.write()
	st, err := converge(t, f, true)
	if err != nil {
		t.Fatalf("Converge: %v", err)
	}
	db := pidOf(st, "db")
	r, err := New(Config{Files: []string{f.file}, StateDir: f.state, Log: testr.New(t), ResyncPeriod: -1})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := r.Down(ctx, []string{"api"}); err != nil {
		t.Fatalf("Down(api): %v", err)
	}
	disk, err := ReadStatus(f.state.StatusPath())
	if err != nil {
		t.Fatal(err)
	}
	if s, ok := disk.Get("api"); !ok || s.Phase != PhaseStopped || s.Reason != ReasonStoppedByUser {
		t.Errorf("status.json api = %+v, want Stopped/%s", s, ReasonStoppedByUser)
	}
	if s, ok := disk.Get("db"); !ok || s.Phase != PhaseRunning || s.PID != db {
		t.Errorf("status.json db = %+v, want Running with pid %d as apply wrote it", s, db)
	}
	// The stop is told once: the signal with its evidence, then one
	// Stopped event (actuate leaves it to the stopped transition).
	evs, _, err := ReadEvents(f.state.EventsPath("api"), 64)
	if err != nil {
		t.Fatal(err)
	}
	var stopped, signals int
	for _, e := range evs {
		switch e.Reason {
		case ReasonStopped:
			stopped++
		case actuate.EventSignal:
			signals++
		}
	}
	if stopped != 1 || signals == 0 {
		t.Errorf("api's events: %d Stopped, %d Signal; want 1 and at least 1: %+v", stopped, signals, evs)
	}
}

// TestDownEventFiles: a down keeps an events file open per server, up to
// 1,024 and to a quarter of the descriptor limit, never fewer than up.
func TestDownEventFiles(t *testing.T) {
	for _, tt := range []struct{ n, limit, want int }{
		{10, 20000, maxOpenEventFiles},
		{1000, 20000, 1000},
		{5000, 20000, maxDownEventFiles},
		{1000, 0, 1000},       // limit unknown
		{1000, 1024, 256},     // a 1,024 limit: as up, since the pidfds need the rest
		{1000, 2048, 512},     // a quarter of the limit
		{3000, 1 << 20, 1024}, // the cap
	} {
		if got := downEventFiles(tt.n, tt.limit); got != tt.want {
			t.Errorf("downEventFiles(%d, %d) = %d, want %d", tt.n, tt.limit, got, tt.want)
		}
	}
}
