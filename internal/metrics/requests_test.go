package metrics

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
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
	for name, want := range map[string]float64{"queue": 0.010, "local": 0.100, "remote": 0.300, "send": 0.005, "total": 0.415} {
		vec := map[string]*prometheus.HistogramVec{"queue": r.queue, "local": r.local, "remote": r.remote, "send": r.send, "total": r.total}[name]
		var m dto.Metric
		if err := vec.WithLabelValues("Produce").(prometheus.Histogram).Write(&m); err != nil {
			t.Fatal(err)
		}
		if got := m.GetHistogram().GetSampleSum(); math.Abs(got-want) > 1e-9 || m.GetHistogram().GetSampleCount() != 1 {
			t.Errorf("%s: sum %v count %d, want %v 1", name, got, m.GetHistogram().GetSampleCount(), want)
		}
	}
	// A new request starts with no remote time.
	tm.Reset()
	r.Observe(0, &tm, 0, t0, t0, t0.Add(time.Millisecond), t0.Add(time.Millisecond))
	if got, want := time.Duration(r.handlerBusy.Load()), 101*time.Millisecond; got != want {
		t.Errorf("handler busy %v, want %v", got, want)
	}
}
