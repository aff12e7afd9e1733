package metrics

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// BenchmarkRequestPath is what the metrics add to one Produce request of
// one partition on the broker's hot path: the request's timing
// (Requests.Observe: five histogram observations and two busy counters)
// and its topic's counters (Topic.Produced). The parallel run shares the
// handles across goroutines, as connections do.
func BenchmarkRequestPath(b *testing.B) {
	r := NewRequests()
	ts := NewTopics()
	topic := ts.Acquire("bench")
	t0 := time.Now()
	run := func(tm *Timing) {
		tm.Reset()
		topic.Produced(1<<20, 1000, false)
		r.Observe(0, tm, time.Microsecond, t0, t0.Add(time.Microsecond), t0.Add(50*time.Microsecond), t0.Add(60*time.Microsecond))
	}
	b.Run("serial", func(b *testing.B) {
		var tm Timing
		for b.Loop() {
			run(&tm)
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.RunParallel(func(pb *testing.PB) {
			var tm Timing
			for pb.Next() {
				run(&tm)
			}
		})
	})
	// The same five observations with client_golang's Histogram, for
	// comparison in the same run.
	b.Run("client_golang_histograms", func(b *testing.B) {
		var hs [phases]prometheus.Histogram
		for i := range hs {
			hs[i] = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "x", Buckets: prometheus.ExponentialBuckets(0.00005, 2, 17)})
		}
		for b.Loop() {
			for _, h := range hs {
				h.Observe(0.00005)
			}
		}
	})
	b.Run("latencyHistograms", func(b *testing.B) {
		var hs [phases]latencyHistogram
		for b.Loop() {
			for i := range hs {
				hs[i].observe(50 * time.Microsecond)
			}
		}
	})
	b.Run("addRemote", func(b *testing.B) {
		var tm Timing
		ctx := WithTiming(context.Background(), &tm)
		for b.Loop() {
			AddRemote(ctx, time.Millisecond)
		}
	})
}
