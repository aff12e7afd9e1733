package parallel

import (
	"sync/atomic"
	"testing"
)

func TestFor(t *testing.T) {
	for _, tc := range []struct{ workers, n int }{{0, 0}, {1, 5}, {4, 1}, {3, 100}, {100, 7}} {
		var calls [100]atomic.Int32
		var running, peak atomic.Int32
		For(tc.workers, tc.n, func(i int) {
			r := running.Add(1)
			for p := peak.Load(); r > p && !peak.CompareAndSwap(p, r); p = peak.Load() {
			}
			calls[i].Add(1)
			running.Add(-1)
		})
		for i := range calls {
			want := int32(0)
			if i < tc.n {
				want = 1
			}
			if got := calls[i].Load(); got != want {
				t.Fatalf("workers %d n %d: fn(%d) ran %d times", tc.workers, tc.n, i, got)
			}
		}
		if p := int(peak.Load()); p > max(1, tc.workers) {
			t.Fatalf("workers %d n %d: %d calls at once", tc.workers, tc.n, p)
		}
	}
}
