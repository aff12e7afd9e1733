package metrics

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestIdleRatio: the idle ratio is one minus the busy time over the
// window's capacity (elapsed time times workers), clamped to [0, 1],
// computed over windows of at least a second: an update sooner returns
// the previous window's value.
func TestIdleRatio(t *testing.T) {
	start := time.Unix(1000, 0)
	var ir idleRatio
	ir.init(start)
	sec := int64(time.Second)
	steps := []struct {
		at       time.Duration // since start
		busy     int64         // cumulative busy nanoseconds
		capacity int
		want     float64
	}{
		{500 * time.Millisecond, sec, 2, 1},         // under a second: initial value
		{2 * time.Second, sec, 2, 0.75},             // 1 s busy of 2 s x 2 workers
		{2500 * time.Millisecond, 9 * sec, 2, 0.75}, // too soon: previous value
		{4 * time.Second, 9 * sec, 4, 0},            // 8 s busy in 2 s x 4: saturated, clamped
		{6 * time.Second, 9 * sec, 4, 1},            // nothing busy
		{7 * time.Second, 9*sec + sec/4, 1, 0.75},
	}
	for _, s := range steps {
		if got := ir.update(start.Add(s.at), s.busy, s.capacity); math.Abs(got-s.want) > 1e-9 {
			t.Errorf("at %v busy %v capacity %d: %v, want %v", s.at, time.Duration(s.busy), s.capacity, got, s.want)
		}
	}
}

// TestRequestsObserve: local time is the handling time less the remote
// time the handler reported, and only local time makes handlers busy.
func TestRequestsObserve(t *testing.T) {
	r := NewRequests()
	var tm Timing
	ctx := WithTiming(context.Background(), &tm)
	t0 := time.Unix(2000, 0)
	tm.Reset()
	AddRemote(ctx, 300*time.Millisecond)
	// Produce (key 0): decoded at t0, started 10 ms later, handled after
	// 400 ms (300 of them waiting for followers), sent 5 ms later.
	r.Observe(0, &tm, time.Millisecond, t0, t0.Add(10*time.Millisecond), t0.Add(410*time.Millisecond), t0.Add(415*time.Millisecond))
	if got, want := time.Duration(r.handlerBusy.Load()), 100*time.Millisecond; got != want {
		t.Errorf("handler busy %v, want %v", got, want)
	}
	if got, want := time.Duration(r.networkBusy.Load()), 6*time.Millisecond; got != want {
		t.Errorf("network busy %v, want %v", got, want)
	}
	a := r.apis[0].Load()
	if a == nil || a.name != "Produce" {
		t.Fatalf("Produce times: %+v", a)
	}
	for i, want := range []time.Duration{10 * time.Millisecond, 100 * time.Millisecond, 300 * time.Millisecond, 5 * time.Millisecond, 415 * time.Millisecond} {
		if got := time.Duration(a.h[i].sum.Load()); got != want {
			t.Errorf("%s: sum %v, want %v", phaseDescs[i], got, want)
		}
	}
	// A new request starts with no remote time.
	tm.Reset()
	r.Observe(0, &tm, 0, t0, t0, t0.Add(time.Millisecond), t0.Add(time.Millisecond))
	if got, want := time.Duration(r.handlerBusy.Load()), 101*time.Millisecond; got != want {
		t.Errorf("handler busy %v, want %v", got, want)
	}
}

// TestLatencyHistogram: a duration lands in the first bucket whose upper
// bound is at least it (Prometheus' le), past the last bound in +Inf, and
// the exposed buckets are cumulative.
func TestLatencyHistogram(t *testing.T) {
	var h latencyHistogram
	for _, d := range []time.Duration{0, 50 * time.Microsecond, 51 * time.Microsecond, time.Millisecond, 11 * time.Second} {
		h.observe(d)
	}
	d := prometheus.NewDesc("x_seconds", "x", []string{"request"}, nil)
	c := collectorFunc(func(ch chan<- prometheus.Metric) { ch <- h.metric(d, "Produce") })
	want := `# HELP x_seconds x
# TYPE x_seconds histogram
x_seconds_bucket{request="Produce",le="5e-05"} 2
x_seconds_bucket{request="Produce",le="0.0001"} 3
x_seconds_bucket{request="Produce",le="0.00025"} 3
x_seconds_bucket{request="Produce",le="0.0005"} 3
x_seconds_bucket{request="Produce",le="0.001"} 4
x_seconds_bucket{request="Produce",le="0.0025"} 4
x_seconds_bucket{request="Produce",le="0.005"} 4
x_seconds_bucket{request="Produce",le="0.01"} 4
x_seconds_bucket{request="Produce",le="0.025"} 4
x_seconds_bucket{request="Produce",le="0.05"} 4
x_seconds_bucket{request="Produce",le="0.1"} 4
x_seconds_bucket{request="Produce",le="0.25"} 4
x_seconds_bucket{request="Produce",le="0.5"} 4
x_seconds_bucket{request="Produce",le="1"} 4
x_seconds_bucket{request="Produce",le="2.5"} 4
x_seconds_bucket{request="Produce",le="5"} 4
x_seconds_bucket{request="Produce",le="10"} 4
x_seconds_bucket{request="Produce",le="+Inf"} 5
x_seconds_sum{request="Produce"} 11.001101
x_seconds_count{request="Produce"} 5
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
}

type collectorFunc func(chan<- prometheus.Metric)

func (f collectorFunc) Describe(ch chan<- *prometheus.Desc) { prometheus.DescribeByCollect(f, ch) }
func (f collectorFunc) Collect(ch chan<- prometheus.Metric) { f(ch) }
