package reconciler

import (
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

func TestBackoffArithmetic(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Unix(1_700_000_000, 0))
	b := &Backoff{Clock: clk}
	wants := []time.Duration{
		0, // the first restart after a reset is immediate
		1 * time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second,
		16 * time.Second, 32 * time.Second, 64 * time.Second, 128 * time.Second, 256 * time.Second,
		5 * time.Minute, 5 * time.Minute, 5 * time.Minute,
	}
	for i, w := range wants {
		if got := b.When("api"); got != w {
			t.Errorf("restart %d: When = %v, want %v", i+1, got, w)
		}
		if got := b.NumRequeues("api"); got != i+1 {
			t.Errorf("restart %d: NumRequeues = %d, want %d", i+1, got, i+1)
		}
	}
	if got := b.When("other"); got != 0 {
		t.Errorf("keys are independent: When(other) = %v, want 0", got)
	}
	b.Forget("api")
	if got := b.NumRequeues("api"); got != 0 {
		t.Errorf("after Forget: NumRequeues = %d, want 0", got)
	}
	if got := b.When("api"); got != 0 {
		t.Errorf("after Forget: When = %v, want 0", got)
	}
}

func TestBackoffResetsAfterTenMinutesReady(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Unix(1_700_000_000, 0))
	b := &Backoff{Clock: clk}
	for range 4 {
		b.When("api")
	}
	// Ready for just under ten minutes: the count stays.
	b.Ready("api")
	clk.SetTime(clk.Now().Add(10*time.Minute - time.Second))
	if got := b.When("api"); got != 8*time.Second {
		t.Errorf("crash after 9m59s Ready: When = %v, want 8s", got)
	}

	// Ready, then not Ready (probe failure), then Ready again: the clock
	// restarts at the second Ready.
	b.Ready("api")
	clk.SetTime(clk.Now().Add(5 * time.Minute))
	b.NotReady("api")
	b.Ready("api")
	b.Ready("api") // repeated Ready keeps the first time
	clk.SetTime(clk.Now().Add(9 * time.Minute))
	if got := b.NumRequeues("api"); got != 5 {
		t.Errorf("Ready 9m after a blip: NumRequeues = %d, want 5", got)
	}
	clk.SetTime(clk.Now().Add(time.Minute))
	if got := b.NumRequeues("api"); got != 0 {
		t.Errorf("Ready 10m: NumRequeues = %d, want 0", got)
	}
	if got := b.When("api"); got != 0 {
		t.Errorf("first crash after 10m Ready: When = %v, want 0 (immediate)", got)
	}
	if got := b.When("api"); got != time.Second {
		t.Errorf("second crash: When = %v, want 1s", got)
	}
}

func TestBackoffCustomLimits(t *testing.T) {
	b := &Backoff{Base: 10 * time.Millisecond, Max: 35 * time.Millisecond, Clock: clocktesting.NewFakePassiveClock(time.Unix(0, 0))}
	wants := []time.Duration{0, 10 * time.Millisecond, 20 * time.Millisecond, 35 * time.Millisecond, 35 * time.Millisecond}
	for i, w := range wants {
		if got := b.When("x"); got != w {
			t.Errorf("restart %d: When = %v, want %v", i+1, got, w)
		}
	}
}
