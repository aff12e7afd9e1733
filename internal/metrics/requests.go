package metrics

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Requests times requests as Kafka's RequestMetrics do, per API: the time a
// decoded request waited for the connection's handler (queue), the
// handler's own work (local), what the handler spent waiting for other
// brokers or for data (remote: acks=all replication, a Fetch's max wait,
// Kafka's purgatory), and writing the response (send). From the same
// figures it derives the idle ratios Kafka reports for its request handler
// and network threads. Safe for concurrent use; the methods do nothing on
// a nil *Requests.
type Requests struct {
	apis [maxKey + 1]atomic.Pointer[apiTimes]
	mu   sync.Mutex // guards creating apiTimes

	handlerBusy atomic.Int64 // nanoseconds of local time, all requests
	networkBusy atomic.Int64 // nanoseconds decoding requests and writing responses

	handlerIdle, networkIdle idleRatio
}

// maxKey bounds the API keys timed; requests with larger keys are not.
const maxKey = 127

// apiTimes are the histograms of one API: queue, local, remote, send and
// total time.
type apiTimes struct {
	name string
	h    [phases]latencyHistogram
}

const phases = 5

// The request time histograms, in apiTimes.h order.
var phaseDescs = [phases]*prometheus.Desc{
	prometheus.NewDesc("samsa_request_queue_time_seconds", "Time a decoded request waited for its connection's handler (Kafka's RequestQueueTimeMs).", []string{"request"}, nil),
	prometheus.NewDesc("samsa_request_local_time_seconds", "Time the handler worked on a request, remote time excluded (LocalTimeMs).", []string{"request"}, nil),
	prometheus.NewDesc("samsa_request_remote_time_seconds", "Time a request waited for followers (acks=all) or for data (a Fetch's max wait) (RemoteTimeMs, Kafka's purgatory).", []string{"request"}, nil),
	prometheus.NewDesc("samsa_request_response_send_time_seconds", "Time writing the response to the socket (ResponseSendTimeMs).", []string{"request"}, nil),
	prometheus.NewDesc("samsa_request_total_time_seconds", "Time from a request decoded to its response written (TotalTimeMs).", []string{"request"}, nil),
}

// latencyBounds are the histograms' upper bounds, 50 µs to 10 s.
var latencyBounds = [...]time.Duration{
	50 * time.Microsecond, 100 * time.Microsecond, 250 * time.Microsecond, 500 * time.Microsecond,
	time.Millisecond, 2500 * time.Microsecond, 5 * time.Millisecond, 10 * time.Millisecond,
	25 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond, 250 * time.Millisecond,
	500 * time.Millisecond, time.Second, 2500 * time.Millisecond, 5 * time.Second, 10 * time.Second,
}

// latencyHistogram counts durations in latencyBounds' buckets (the last
// one past them) with two atomic additions an observation: client_golang's
// Histogram costs several times that, and a request makes five.
type latencyHistogram struct {
	buckets [len(latencyBounds) + 1]atomic.Int64
	sum     atomic.Int64 // nanoseconds
}

func (h *latencyHistogram) observe(d time.Duration) {
	i := 0
	for i < len(latencyBounds) && d > latencyBounds[i] {
		i++
	}
	h.buckets[i].Add(1)
	h.sum.Add(int64(d))
}

// metric is h as a Prometheus histogram; its count is the sum of the
// buckets read, so the two agree.
func (h *latencyHistogram) metric(d *prometheus.Desc, label string) prometheus.Metric {
	cum := make(map[float64]uint64, len(latencyBounds))
	var n uint64
	for i, b := range latencyBounds {
		n += uint64(h.buckets[i].Load())
		cum[b.Seconds()] = n
	}
	n += uint64(h.buckets[len(latencyBounds)].Load())
	return prometheus.MustNewConstHistogram(d, n, time.Duration(h.sum.Load()).Seconds(), cum, label)
}

// NewRequests returns a Requests whose idle ratios count from now.
func NewRequests() *Requests {
	r := &Requests{}
	now := time.Now()
	r.handlerIdle.init(now)
	r.networkIdle.init(now)
	return r
}

func (r *Requests) api(key int16) *apiTimes {
	if key < 0 || key > maxKey {
		return nil
	}
	if a := r.apis[key].Load(); a != nil {
		return a
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if a := r.apis[key].Load(); a != nil {
		return a
	}
	name := kmsg.NameForKey(key)
	if name == "" {
		name = "Unknown"
	}
	a := &apiTimes{name: name}
	r.apis[key].Store(a)
	return a
}

// Timing follows the request a connection handles: the server resets it
// for each request and the handler adds the time it waited remotely
// (AddRemote). One per connection, used by one goroutine at a time.
type Timing struct {
	remote time.Duration
}

type timingKey struct{}

// WithTiming returns ctx carrying t for the handlers of one connection.
func WithTiming(ctx context.Context, t *Timing) context.Context {
	return context.WithValue(ctx, timingKey{}, t)
}

// AddRemote adds d to the remote time of the request ctx belongs to (a
// handler waiting for followers or for data); nothing when ctx carries no
// Timing.
func AddRemote(ctx context.Context, d time.Duration) {
	if t, ok := ctx.Value(timingKey{}).(*Timing); ok {
		t.remote += d
	}
}

// Reset starts timing a new request.
func (t *Timing) Reset() { t.remote = 0 }

// Observe records one answered request of API key: decoded at decoded,
// handed to the handler at started, handled by handled, its response
// written by sent (equal to handled when nothing was sent), with t's remote
// time. parse is the time decoding it took.
func (r *Requests) Observe(key int16, t *Timing, parse time.Duration, decoded, started, handled, sent time.Time) {
	if r == nil {
		return
	}
	handle := handled.Sub(started)
	remote := min(t.remote, handle)
	local := handle - remote
	send := sent.Sub(handled)
	r.handlerBusy.Add(int64(local))
	r.networkBusy.Add(int64(parse + send))
	a := r.api(key)
	if a == nil {
		return
	}
	a.h[0].observe(started.Sub(decoded))
	a.h[1].observe(local)
	a.h[2].observe(remote)
	a.h[3].observe(send)
	a.h[4].observe(sent.Sub(decoded))
}

// Describe implements prometheus.Collector.
func (r *Requests) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range phaseDescs {
		ch <- d
	}
	ch <- handlerIdleDesc
	ch <- networkIdleDesc
}

var (
	handlerIdleDesc = prometheus.NewDesc("kafka_server_kafkarequesthandlerpool_requesthandleravgidle_percent",
		"Fraction (0-1) of the request handling capacity (GOMAXPROCS handlers) not spent in handlers' local time since the previous scrape, at least one second back (Kafka's RequestHandlerAvgIdlePercent).", nil, nil)
	networkIdleDesc = prometheus.NewDesc("kafka_network_socketserver_networkprocessoravgidle_percent",
		"Fraction (0-1) of GOMAXPROCS not spent decoding requests and writing responses since the previous scrape, at least one second back (Kafka's NetworkProcessorAvgIdlePercent).", nil, nil)
)

// Collect implements prometheus.Collector.
func (r *Requests) Collect(ch chan<- prometheus.Metric) {
	for i := range r.apis {
		if a := r.apis[i].Load(); a != nil {
			for j := range a.h {
				ch <- a.h[j].metric(phaseDescs[j], a.name)
			}
		}
	}
	now := time.Now()
	procs := runtime.GOMAXPROCS(0)
	ch <- prometheus.MustNewConstMetric(handlerIdleDesc, prometheus.GaugeValue, r.handlerIdle.update(now, r.handlerBusy.Load(), procs))
	ch <- prometheus.MustNewConstMetric(networkIdleDesc, prometheus.GaugeValue, r.networkIdle.update(now, r.networkBusy.Load(), procs))
}

// idleRatio turns a growing count of busy nanoseconds into the fraction of
// capacity left idle over a window of at least minIdleWindow that ends at
// the latest update.
type idleRatio struct {
	mu    sync.Mutex // guards the fields below
	at    time.Time  // start of the current window
	busy  int64      // busy nanoseconds at at
	value float64    // ratio of the last complete window
}

// minIdleWindow is the shortest window an idle ratio is computed over;
// scrapes closer together see the previous window's value.
const minIdleWindow = time.Second

func (ir *idleRatio) init(now time.Time) {
	ir.at, ir.value = now, 1
}

// update returns the idle ratio at now given busy, the busy nanoseconds
// counted so far, and the capacity in parallel workers.
func (ir *idleRatio) update(now time.Time, busy int64, capacity int) float64 {
	ir.mu.Lock()
	defer ir.mu.Unlock()
	elapsed := now.Sub(ir.at)
	if elapsed < minIdleWindow {
		return ir.value
	}
	used := float64(busy-ir.busy) / (float64(elapsed) * float64(max(capacity, 1)))
	ir.value = min(max(1-used, 0), 1)
	ir.at, ir.busy = now, busy
	return ir.value
}

// Rate turns a growing count into a rate per second over a window of at
// least a second ending at the latest update, for gauges Kafka reports as
// rates (raft-metrics append-records-rate). Safe for concurrent use.
type Rate struct {
	mu    sync.Mutex // guards the fields below
	at    time.Time
	n     int64
	value float64
}

// Update returns the rate at now given n, the count so far.
func (r *Rate) Update(now time.Time, n int64) float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.at.IsZero() {
		r.at, r.n = now, n
		return 0
	}
	elapsed := now.Sub(r.at)
	if elapsed < minIdleWindow {
		return r.value
	}
	r.value = float64(n-r.n) / elapsed.Seconds()
	r.at, r.n = now, n
	return r.value
}
