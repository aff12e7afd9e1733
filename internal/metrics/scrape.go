package metrics

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
)

// ScrapeTimeout is how long a /metrics request may take, waiting for the
// gather included: past it the scraper gets 503 (promhttp's
// HandlerOpts.Timeout). The gather it waited for goes on for the others.
const ScrapeTimeout = 30 * time.Second

// errGatherClosed: the Server closed; no new gather starts.
var errGatherClosed = errors.New("metrics: the http listener is closing")

// sharedGather runs one Gather of a registry at a time and gives its
// result to every scrape that asked while it ran. A scrape joins the
// gather in progress rather than waiting for one started after it
// arrived: values are then read at most one gather's duration before the
// request (a gather reads its collectors over that long anyway), and a
// scrape never waits for two gathers, which on a slow node would take it
// past Prometheus's scrape_timeout. Safe for concurrent use.
type sharedGather struct {
	g  prometheus.Gatherer
	wg sync.WaitGroup // the goroutine of the gather in progress

	mu      sync.Mutex // guards the fields below
	running *gathering // nil when no gather runs
	closed  bool
}

// gathering is one Gather; mfs and err are set before done is closed and
// never change after, so the scrapes sharing them only read them.
type gathering struct {
	done chan struct{}
	mfs  []*dto.MetricFamily
	err  error
}

// gather returns the result of the gather in progress, starting one when
// none runs. ctx ends the wait only: the gather goes on, for the other
// scrapes waiting and for the next to arrive, and its result is
// dropped when nobody waits. It returns ctx.Err() then, and
// errGatherClosed after close.
func (s *sharedGather) gather(ctx context.Context) ([]*dto.MetricFamily, error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, errGatherClosed
	}
	g := s.running
	if g == nil {
		g = &gathering{done: make(chan struct{})}
		s.running = g
		s.wg.Go(func() { s.run(g) })
	}
	s.mu.Unlock()
	select {
	case <-g.done:
		return g.mfs, g.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// run gathers into g. A collector that panics in this goroutine fails
// the scrapes waiting (500) instead of the process, as a panic in an HTTP
// handler would.
func (s *sharedGather) run(g *gathering) {
	defer func() {
		if r := recover(); r != nil {
			g.mfs, g.err = nil, fmt.Errorf("metrics: gathering panicked: %v", r)
		}
		s.mu.Lock()
		s.running = nil
		s.mu.Unlock()
		close(g.done)
	}()
	g.mfs, g.err = s.g.Gather()
}

// close refuses new gathers and waits for the one in progress.
func (s *sharedGather) close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.wg.Wait()
}

// gathered is a result already gathered, handed to promhttp to encode.
type gathered struct {
	mfs []*dto.MetricFamily
	err error
}

func (g gathered) Gather() ([]*dto.MetricFamily, error) { return g.mfs, g.err }

// scrapeHandler serves /metrics from s: promhttp negotiates the format
// (text or OpenMetrics) and compression and encodes; at most MaxScrapes
// encode at once, the others wait for one to finish. A request whose
// client goes away (its context ends) stops waiting at once; one not
// answered within timeout (zero or negative: no limit) gets 503.
func scrapeHandler(s *sharedGather, timeout time.Duration, logger *slog.Logger) http.Handler {
	opts := promhttp.HandlerOpts{
		EnableOpenMetrics: true,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
		ErrorHandling:     promhttp.ContinueOnError,
	}
	encoding := make(chan struct{}, MaxScrapes)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		mfs, err := s.gather(ctx)
		if ctx.Err() != nil {
			return // the client left, or http.TimeoutHandler answered 503
		}
		if errors.Is(err, errGatherClosed) {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		select {
		case encoding <- struct{}{}:
			defer func() { <-encoding }()
		case <-ctx.Done():
			return
		}
		promhttp.HandlerFor(gathered{mfs, err}, opts).ServeHTTP(w, r)
	})
	if timeout <= 0 {
		return h
	}
	// The message promhttp's own Timeout gives.
	return http.TimeoutHandler(h, timeout, fmt.Sprintf("Exceeded configured timeout of %v.\n", timeout))
}
