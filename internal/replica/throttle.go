package replica

import (
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Throttle is a byte-rate quota for replication traffic
// (leader.replication.throttled.rate, follower.replication.throttled.rate):
// a one-second window of bytes. Safe for concurrent use; a nil or
// unlimited Throttle never throttles.
type Throttle struct {
	rate atomic.Int64 // bytes per second; <= 0 means unlimited

	mu     sync.Mutex // guards the window
	start  time.Time
	filled int64
}

// NewThrottle returns a quota of rate bytes per second (<= 0 or
// Long.MAX_VALUE: unlimited).
func NewThrottle(rate int64) *Throttle {
	t := &Throttle{}
	t.SetRate(rate)
	return t
}

// SetRate changes the quota at once (the rate updated as a dynamic broker
// config); <= 0 or Long.MAX_VALUE is unlimited.
func (t *Throttle) SetRate(rate int64) {
	if rate == 1<<63-1 {
		rate = 0
	}
	t.rate.Store(rate)
}

// Exceeded reports whether the current window is used up.
func (t *Throttle) Exceeded(now time.Time) bool {
	rate := t.Rate()
	if rate <= 0 {
		return false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.rollLocked(now, rate)
	return t.filled >= rate
}

// Record counts n bytes sent or received.
func (t *Throttle) Record(n int64, now time.Time) {
	rate := t.Rate()
	if rate <= 0 {
		return
	}
	t.mu.Lock()
	t.rollLocked(now, rate)
	t.filled += n
	t.mu.Unlock()
}

// Wait returns how long until the window reopens (0 when open).
func (t *Throttle) Wait(now time.Time) time.Duration {
	if !t.Exceeded(now) {
		return 0
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return time.Second - now.Sub(t.start)
}

// Rate is the quota in bytes per second, 0 when unlimited (or t nil).
func (t *Throttle) Rate() int64 {
	if t == nil {
		return 0
	}
	return t.rate.Load()
}

func (t *Throttle) rollLocked(now time.Time, rate int64) {
	if now.Sub(t.start) >= time.Second {
		// Carry what a large batch overdrew, so the average holds.
		t.filled = max(0, t.filled-rate)
		t.start = now
	}
}

// ThrottledReplicas is a leader.replication.throttled.replicas or
// follower.replication.throttled.replicas value: "*" or a list of
// partition:broker pairs.
type ThrottledReplicas string

// Has reports whether the replica of partition on broker is throttled.
func (v ThrottledReplicas) Has(partition, broker int32) bool {
	s := strings.TrimSpace(string(v))
	if s == "" {
		return false
	}
	if s == "*" {
		return true
	}
	want := strconv.Itoa(int(partition)) + ":" + strconv.Itoa(int(broker))
	for _, e := range strings.Split(s, ",") {
		if strings.TrimSpace(e) == want {
			return true
		}
	}
	return false
}
