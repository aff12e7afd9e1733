package storage

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"testing"
	"testing/synctest"
	"time"

	"github.com/samsahq/samsa/internal/record"
)

func TestThrottler(t *testing.T) {
	for _, tc := range []struct {
		name   string
		rate   float64       // bytes per second
		chunk  int64         // bytes a call
		calls  int           // calls
		work   time.Duration // time the work of one chunk takes by itself
		want   time.Duration // total time, at least
		slack  time.Duration // and at most want+slack
		sleeps bool          // whether the throttler slept at all
	}{
		// No time passes but the throttler's: 10,000 bytes at 1,000/s.
		{name: "instant work", rate: 1000, chunk: 100, calls: 100, want: 10 * time.Second, slack: 0, sleeps: true},
		// One big chunk at a time.
		{name: "large chunks", rate: 1000, chunk: 2500, calls: 4, want: 10 * time.Second, sleeps: true},
		// Work at 10,000/s held to 1,000/s.
		{name: "fast work", rate: 1000, chunk: 100, calls: 100, work: 10 * time.Millisecond, want: 9700 * time.Millisecond, slack: 300 * time.Millisecond, sleeps: true},
		// Work at 500/s is slower than asked: never held up.
		{name: "slow work", rate: 1000, chunk: 100, calls: 100, work: 200 * time.Millisecond, want: 20 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				th := newThrottler(tc.rate)
				start := time.Now()
				var slept time.Duration
				for range tc.calls {
					time.Sleep(tc.work)
					before := time.Now()
					if err := th.maybeThrottle(context.Background(), tc.chunk); err != nil {
						t.Fatal(err)
					}
					slept += time.Since(before)
				}
				if got := time.Since(start); got < tc.want || got > tc.want+tc.slack {
					t.Fatalf("took %v, want %v to %v", got, tc.want, tc.want+tc.slack)
				}
				if (slept > 0) != tc.sleeps {
					t.Fatalf("slept %v", slept)
				}
			})
		})
	}
}

func TestThrottlerUnthrottled(t *testing.T) {
	for _, rate := range []float64{0, -1, math.MaxFloat64, math.Inf(1), math.NaN()} {
		if th := newThrottler(rate); th != nil {
			t.Fatalf("rate %v throttles", rate)
		}
	}
	var th *throttler
	if err := th.maybeThrottle(context.Background(), 1<<40); err != nil {
		t.Fatal(err)
	}
}

// TestThrottlerCancel: a cancelled context ends the sleep at once.
func TestThrottlerCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		th := newThrottler(1)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() { done <- th.maybeThrottle(ctx, 3600) }()
		synctest.Wait()
		start := time.Now()
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("got %v, want context.Canceled", err)
		}
		if d := time.Since(start); d != 0 {
			t.Fatalf("returned %v after the cancel", d)
		}
	})
}

// TestCleanThrottled cleans a log with log.cleaner.io.max.bytes.per.second
// set: the cleaning takes as long as its reads and writes at that rate.
func TestCleanThrottled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clock := &fakeClock{t: testEpoch}
		l := compactedLog(t, t.TempDir(), clock, 2000)
		defer l.Close()
		writeDups(t, l, clock, rand.New(rand.NewPCG(11, 11)), 300, 30, record.CodecNone)
		const rate = 5_000
		start := time.Now()
		res, err := l.Clean(context.Background(), CleanOptions{Force: true, throttle: newThrottler(rate)})
		if err != nil {
			t.Fatal(err)
		}
		took := time.Since(start)
		seconds := func(n int64) time.Duration { return time.Duration(float64(n) / rate * float64(time.Second)) }
		// The whole log is read twice (it is all dirty: once for the key
		// map, once to rewrite it) and the cleaned segments written; the
		// last period, shorter than the check interval, is not held.
		high := seconds(2*res.BytesRead + res.BytesWritten)
		low := high - throttleCheckInterval
		if res.BytesRead < 10_000 || took < low || took > high {
			t.Fatalf("cleaning %d bytes read, %d written took %v, want %v to %v", res.BytesRead, res.BytesWritten, took, low, high)
		}
		t.Logf("cleaning %d bytes read, %d written at %d bytes/s took %v", res.BytesRead, res.BytesWritten, rate, took)
	})
}

// TestSetCleanerRate changes log.cleaner.io.max.bytes.per.second of a
// running Manager (a dynamic broker config): from unthrottled to 1,000
// bytes/s, 10,000 bytes take 10 s; back to unthrottled, no time.
func TestSetCleanerRate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := &Manager{throttle: rateThrottler(math.MaxFloat64)}
		work := func() time.Duration {
			start := time.Now()
			for range 100 {
				if err := m.throttle.maybeThrottle(context.Background(), 100); err != nil {
					t.Fatal(err)
				}
			}
			return time.Since(start)
		}
		if d := work(); d != 0 {
			t.Fatalf("unthrottled: %v", d)
		}
		m.SetCleaner(CleanerOptions{IOMaxBytesPerSecond: 1000})
		if d := work(); d != 10*time.Second {
			t.Fatalf("at 1000 bytes/s: %v, want 10s", d)
		}
		m.SetCleaner(CleanerOptions{IOMaxBytesPerSecond: math.MaxFloat64, Backoff: time.Second})
		if d := work(); d != 0 {
			t.Fatalf("unthrottled again: %v", d)
		}
		if b := time.Duration(m.cleanerBackoff.Load()); b != time.Second {
			t.Fatalf("backoff %v", b)
		}
	})
}

// TestSetCleanerDoesNotWaitForSleep: SetCleaner runs while the broker
// applies a metadata image (a dynamic broker config), so it must not wait
// for a cleaning that sleeps in the throttler, which holds its lock for
// the whole sleep (about 99 s here at 1 byte/s). The new rate applies to
// the work counted after it.
func TestSetCleanerDoesNotWaitForSleep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := &Manager{throttle: rateThrottler(1)}
		sleeping := make(chan struct{})
		done := make(chan struct{})
		go func() {
			defer close(done)
			// Past the check interval at 1 byte/s: the first call sleeps.
			close(sleeping)
			if err := m.throttle.maybeThrottle(context.Background(), 100); err != nil {
				t.Error(err)
			}
		}()
		<-sleeping
		synctest.Wait() // the cleaner is asleep, holding the throttler's lock
		start := time.Now()
		m.SetCleaner(CleanerOptions{IOMaxBytesPerSecond: math.MaxFloat64})
		if d := time.Since(start); d != 0 {
			t.Fatalf("SetCleaner waited %v for the sleeping cleaner", d)
		}
		<-done
		if d := time.Since(start); d == 0 {
			t.Fatal("the cleaner did not sleep: the test tests nothing")
		}
		start = time.Now()
		if err := m.throttle.maybeThrottle(context.Background(), 1_000_000); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d != 0 {
			t.Fatalf("after the rate was lifted the cleaner slept %v", d)
		}
	})
}
