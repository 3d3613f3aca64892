package reconciler

import (
	"strconv"
	"testing"
)

// The ring keeps the last eventRingSize events, oldest first, and holds
// no more memory than its events need until it is full.
func TestRingKeepsTheLastEventsInOrder(t *testing.T) {
	for _, n := range []int{0, 1, 3, 4, 5, eventRingSize - 1, eventRingSize, eventRingSize + 1, 3*eventRingSize + 7} {
		t.Run(strconv.Itoa(n), func(t *testing.T) {
			var r ring
			for i := range n {
				r.add(Event{Message: strconv.Itoa(i)})
			}
			got := r.list()
			want := min(n, eventRingSize)
			if len(got) != want {
				t.Fatalf("%d events kept, want %d", len(got), want)
			}
			for i, e := range got {
				if w := strconv.Itoa(n - want + i); e.Message != w {
					t.Fatalf("event %d is %q, want %q", i, e.Message, w)
				}
			}
			if n > 0 && n < eventRingSize && cap(r.buf) > max(4, 2*n) {
				t.Fatalf("%d events hold a buffer of %d", n, cap(r.buf))
			}
		})
	}
}
