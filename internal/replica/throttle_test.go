package replica

import (
	"testing"
	"time"
)

func TestThrottle(t *testing.T) {
	now := time.Unix(1000, 0)
	th := NewThrottle(1000)
	if th.Exceeded(now) {
		t.Fatal("fresh window exceeded")
	}
	th.Record(600, now)
	if th.Exceeded(now) {
		t.Fatal("600 of 1000 exceeded")
	}
	th.Record(600, now.Add(100*time.Millisecond))
	if !th.Exceeded(now.Add(200 * time.Millisecond)) {
		t.Fatal("1200 of 1000 not exceeded")
	}
	if w := th.Wait(now.Add(200 * time.Millisecond)); w != 800*time.Millisecond {
		t.Fatalf("wait %v", w)
	}
	// The next window starts with the 200 bytes overdrawn.
	if th.Exceeded(now.Add(time.Second)) {
		t.Fatal("new window exceeded")
	}
	th.Record(800, now.Add(time.Second))
	if !th.Exceeded(now.Add(time.Second)) {
		t.Fatal("overdraft not carried")
	}
	if NewThrottle(1<<63-1).Exceeded(now) || (*Throttle)(nil).Exceeded(now) {
		t.Fatal("unlimited throttled")
	}
}

func TestThrottledReplicas(t *testing.T) {
	for _, tc := range []struct {
		v    ThrottledReplicas
		p, b int32
		want bool
	}{
		{"", 0, 1, false}, {"*", 3, 2, true}, {"0:1,1:2", 1, 2, true}, {"0:1, 1:2", 1, 2, true}, {"0:1,1:2", 1, 1, false}, {"10:1", 1, 1, false},
	} {
		if got := tc.v.Has(tc.p, tc.b); got != tc.want {
			t.Errorf("%q.Has(%d, %d) = %v", tc.v, tc.p, tc.b, got)
		}
	}
}

// SetRate (a dynamic broker config update) applies at once, both ways.
func TestThrottleSetRate(t *testing.T) {
	now := time.Unix(1000, 0)
	th := NewThrottle(1<<63 - 1)
	th.Record(5000, now)
	if th.Exceeded(now) {
		t.Fatal("unlimited throttle exceeded")
	}
	th.SetRate(1000)
	th.Record(1500, now)
	if !th.Exceeded(now) || th.Rate() != 1000 {
		t.Fatalf("1500 bytes at 1000/s not exceeded (rate %d)", th.Rate())
	}
	th.SetRate(0)
	if th.Exceeded(now) || th.Rate() != 0 {
		t.Fatal("a throttle set back to unlimited still throttles")
	}
}
