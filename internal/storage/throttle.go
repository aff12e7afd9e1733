package storage

import (
	"context"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// throttleCheckInterval is how much time, or work at the desired rate, a
// throttler lets pass between two checks of the rate (Kafka's cleaner
// checks every 300 ms).
const throttleCheckInterval = 300 * time.Millisecond

// throttler holds some work (the log cleaner's reads and writes, in bytes)
// to a rate per second, as Kafka's Throttler does for
// log.cleaner.io.max.bytes.per.second: the work is counted over periods,
// and when a period's average rate is above the desired rate the caller
// sleeps for as long as brings it back down. A period ends when
// throttleCheckInterval has passed since it began, as in Kafka, or when
// the work counted would take that long at the desired rate (so that a
// burst faster than the clock moves, or a clock that only moves while
// sleeping, as in a testing/synctest bubble, is throttled too). The
// throttler is shared by every cleaning of a Manager, and is safe for
// concurrent use: callers sleep in turn, under its lock, as Kafka's
// cleaner threads do; setRate never waits for them (it runs while the
// broker applies a metadata image). A nil *throttler never throttles.
type throttler struct {
	// rateBits is math.Float64bits of the desired rate in units per
	// second; unthrottled when not in (0, math.MaxFloat64). Written by
	// setRate without mu.
	rateBits atomic.Uint64

	mu          sync.Mutex // guards the fields below; held while sleeping
	periodRate  float64    // the rate the current period is held to
	periodStart time.Time
	observed    float64 // units since periodStart
}

// rate is the desired rate.
func (t *throttler) rate() float64 { return math.Float64frombits(t.rateBits.Load()) }

// newThrottler returns a throttler to rate units per second, or nil (no
// throttling) when rate is not positive, is infinite or NaN, or is
// math.MaxFloat64 (Kafka's default Double.MAX_VALUE).
func newThrottler(rate float64) *throttler {
	if !(rate > 0) || rate >= math.MaxFloat64 {
		return nil
	}
	return rateThrottler(rate)
}

// rateThrottler returns a throttler to rate units per second, not nil
// whatever the rate (a Manager's, whose rate setRate changes later).
func rateThrottler(rate float64) *throttler {
	t := &throttler{periodRate: rate, periodStart: time.Now()}
	t.rateBits.Store(math.Float64bits(rate))
	return t
}

// setRate changes the desired rate (log.cleaner.io.max.bytes.per.second
// updated dynamically) from the next unit of work counted, which starts a
// new period; a rate newThrottler maps to nil stops throttling. It does
// not wait for a caller sleeping in maybeThrottle.
func (t *throttler) setRate(rate float64) {
	t.rateBits.Store(math.Float64bits(rate))
}

// maybeThrottle counts n units of work done and sleeps when the rate is
// above the desired one. It returns ctx's error if ctx ends the sleep.
func (t *throttler) maybeThrottle(ctx context.Context, n int64) error {
	if t == nil || n <= 0 {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	rate := t.rate()
	if rate != t.periodRate {
		t.periodRate, t.periodStart, t.observed = rate, time.Now(), 0
	}
	if !(rate > 0) || rate >= math.MaxFloat64 {
		return nil // unthrottled since setRate
	}
	t.observed += float64(n)
	elapsed := time.Since(t.periodStart)
	// The time the work counted should take at the desired rate.
	wantF := t.observed / rate * float64(time.Second)
	want := time.Duration(math.MaxInt64)
	if wantF < float64(math.MaxInt64) {
		want = time.Duration(wantF)
	}
	if elapsed <= throttleCheckInterval && want <= throttleCheckInterval {
		return nil
	}
	if sleep := want - elapsed; sleep > 0 {
		timer := time.NewTimer(sleep)
		select {
		case <-timer.C:
		case <-ctx.Done():
			timer.Stop()
			return ctx.Err()
		}
	}
	t.periodStart = time.Now()
	t.observed = 0
	return nil
}
