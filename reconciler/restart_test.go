package reconciler

import (
	"strings"
	"testing"
	"time"
)

// TestBackoffAfter is the restart policy of DESIGN.md "Starting" as
// arithmetic: 9.9 s and 10 s of Ready, loops, the cap, and resets.
func TestBackoffAfter(t *testing.T) {
	def := &Backoff{}
	tests := []struct {
		name      string
		b         *Backoff
		crashes   int
		readyFor  time.Duration
		want      Restart
		ruleParts []string
	}{
		{"never ready, first exit: at once", def, 0, 0, Restart{Crashes: 1}, []string{"first restart at once"}},
		{"ready 9.9s: counts, first", def, 0, 9900 * time.Millisecond, Restart{Crashes: 1}, []string{"exit 1 within 10s"}},
		{"ready 9.9s after one crash: 1s", def, 1, 9900 * time.Millisecond, Restart{Crashes: 2, Delay: time.Second}, []string{"exit 2 in a row", "back-off 1s x 2^(n-2)"}},
		{"ready 10s: not a loop, count reset", def, 7, 10 * time.Second, Restart{}, []string{"ran Ready for 10s", "count reset"}},
		{"ready an hour: not a loop", def, 3, time.Hour, Restart{}, []string{"not a crash loop"}},
		{"third in a row: 2s", def, 2, 0, Restart{Crashes: 3, Delay: 2 * time.Second}, nil},
		{"fourth: 4s", def, 3, 0, Restart{Crashes: 4, Delay: 4 * time.Second}, nil},
		{"seventh: 32s", def, 6, 0, Restart{Crashes: 7, Delay: 32 * time.Second}, nil},
		{"eighth: capped at 60s", def, 7, 0, Restart{Crashes: 8, Delay: 60 * time.Second}, []string{"capped at 1m0s"}},
		{"fiftieth: still 60s", def, 49, 0, Restart{Crashes: 50, Delay: 60 * time.Second}, nil},
		{"custom base and cap", &Backoff{Base: 50 * time.Millisecond, Max: 120 * time.Millisecond}, 3, 0, Restart{Crashes: 4, Delay: 120 * time.Millisecond}, nil},
		{"custom window", &Backoff{LoopWindow: time.Second}, 5, time.Second, Restart{}, []string{"at least 1s"}},
		{"nil policy is the default", nil, 1, 0, Restart{Crashes: 2, Delay: time.Second}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.b.After(tt.crashes, tt.readyFor)
			if got.Crashes != tt.want.Crashes || got.Delay != tt.want.Delay {
				t.Errorf("After(%d, %s) = {%d, %s}, want {%d, %s}", tt.crashes, tt.readyFor, got.Crashes, got.Delay, tt.want.Crashes, tt.want.Delay)
			}
			if got.Rule == "" {
				t.Errorf("After(%d, %s): no rule named", tt.crashes, tt.readyFor)
			}
			for _, p := range tt.ruleParts {
				if !strings.Contains(got.Rule, p) {
					t.Errorf("After(%d, %s).Rule = %q, want it to contain %q", tt.crashes, tt.readyFor, got.Rule, p)
				}
			}
		})
	}
}

// TestBackoffDelaySequence: at once, then 1 s doubling to the 60 s cap.
func TestBackoffDelaySequence(t *testing.T) {
	want := []time.Duration{0, 1, 2, 4, 8, 16, 32, 60, 60}
	var b Backoff
	for i, w := range want {
		if got := b.Delay(i + 1); got != w*time.Second {
			t.Errorf("Delay(%d) = %s, want %s", i+1, got, w*time.Second)
		}
	}
}
