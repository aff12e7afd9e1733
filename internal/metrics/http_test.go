package metrics

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// blockingCollector counts its gathers and blocks each Collect until
// release is closed.
type blockingCollector struct {
	desc    *prometheus.Desc
	gathers atomic.Int64
	release chan struct{}
}

func newBlockingCollector() *blockingCollector {
	return &blockingCollector{desc: prometheus.NewDesc("test_blocking", "Blocks.", nil, nil), release: make(chan struct{})}
}

func (c *blockingCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *blockingCollector) Collect(ch chan<- prometheus.Metric) {
	c.gathers.Add(1)
	<-c.release
	ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, 1)
}

// memListener hands the server the far ends of net.Pipe connections, so
// that a Server runs in a synctest bubble (sockets would keep its clock
// from moving and synctest.Wait from seeing the handlers blocked).
type memListener struct {
	accept chan net.Conn
	stop   chan struct{}
	once   sync.Once
}

func (l *memListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.accept:
		return c, nil
	case <-l.stop:
		return nil, net.ErrClosed
	}
}

func (l *memListener) Close() error { l.once.Do(func() { close(l.stop) }); return nil }
func (l *memListener) Addr() net.Addr {
	return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 9644}
}

// scrapeServer serves reg on a memListener and returns a function that
// scrapes it (accept "" asks for the text format) until ctx ends. The
// client asks for gzip and decompresses, as Prometheus does.
func scrapeServer(t *testing.T, reg *prometheus.Registry) func(ctx context.Context, accept string) (int, string, error) {
	t.Helper()
	ln := &memListener{accept: make(chan net.Conn), stop: make(chan struct{})}
	s, err := Listen("", ln, nil, reg, func() error { return nil }, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		c, srv := net.Pipe()
		select {
		case ln.accept <- srv:
			return c, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}}
	t.Cleanup(func() {
		tr.CloseIdleConnections()
		s.Close()
	})
	return func(ctx context.Context, accept string) (int, string, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://samsa/metrics", nil)
		if err != nil {
			return 0, "", err
		}
		if accept != "" {
			req.Header.Set("Accept", accept)
		}
		resp, err := tr.RoundTrip(req)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), err
	}
}

// scrapeHandlers counts the goroutines in a /metrics handler, main's
// (promhttp's, which gathered in the request) or this package's.
func scrapeHandlers() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	count := 0
	for g := range strings.SplitSeq(string(buf), "\n\n") {
		if strings.Contains(g, "promhttp.HandlerForTransactional") || strings.Contains(g, "metrics.scrapeHandler.func") {
			count++
		}
	}
	return count
}

const openMetrics = "application/openmetrics-text;version=1.0.0"

// direct is what promhttp serves for reg by itself, in the format accept
// asks for: what a scrape served from a shared gather must equal.
func direct(t *testing.T, reg prometheus.Gatherer, accept string) string {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	rec := httptest.NewRecorder()
	promhttp.HandlerFor(reg, promhttp.HandlerOpts{EnableOpenMetrics: true}).ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		t.Fatalf("promhttp: %d %s", rec.Code, rec.Body)
	}
	return rec.Body.String()
}

// TestScrapesShareGather: scrapes that arrive while a gather runs wait
// for it instead of gathering again; a scrape whose client leaves (a
// Prometheus scrape_timeout) stops waiting at once and holds nothing, so
// the scrapes after it are not refused (before: each ran its own gather
// to the end and held one of MaxScrapes slots, and the others got 503);
// every scrape gets the bytes promhttp alone would serve, in the text
// format and OpenMetrics.
func TestScrapesShareGather(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newBlockingCollector()
		topics := NewTopics()
		topics.Acquire("a").Produced(100, 4, false)
		topics.Acquire("b").Fetched(7, false, false)
		reg := prometheus.NewRegistry()
		reg.MustRegister(c, topics)
		scrape := scrapeServer(t, reg)

		ctx, cancel := context.WithCancel(t.Context())
		var abandoned sync.WaitGroup
		for range MaxScrapes {
			abandoned.Go(func() {
				if _, _, err := scrape(ctx, ""); err == nil {
					t.Error("an abandoned scrape got a response")
				}
			})
		}
		synctest.Wait()
		cancel()
		abandoned.Wait()
		synctest.Wait()
		if n := scrapeHandlers(); n != 0 {
			t.Errorf("%d /metrics handlers still run after their clients left, want 0", n)
		}

		const n = 16
		type result struct {
			accept string
			code   int
			body   string
			err    error
		}
		results := make(chan result, n)
		var wg sync.WaitGroup
		for i := range n {
			accept := []string{"", openMetrics}[i%2]
			wg.Go(func() {
				code, body, err := scrape(t.Context(), accept)
				results <- result{accept, code, body, err}
			})
		}
		synctest.Wait()
		if got := c.gathers.Load(); got != 1 {
			t.Errorf("%d scrapes abandoned, then %d waiting, during one gather: %d gathers ran, want 1", MaxScrapes, n, got)
		}
		close(c.release)
		wg.Wait()
		close(results)
		if got := c.gathers.Load(); got != 1 {
			t.Errorf("after the scrapes: %d gathers, want 1", got)
		}
		want := map[string]string{"": direct(t, reg, ""), openMetrics: direct(t, reg, openMetrics)}
		for r := range results {
			if r.err != nil || r.code != http.StatusOK {
				t.Errorf("scrape (Accept %q): %d %v, want 200", r.accept, r.code, r.err)
				continue
			}
			if r.body != want[r.accept] {
				t.Errorf("scrape (Accept %q) served\n%s\nwant what promhttp serves:\n%s", r.accept, r.body, want[r.accept])
			}
		}
	})
}

// TestScrapeTimeout: a scrape still waiting after 30 s gets promhttp's
// 503, and the gather it waited for goes on for a scrape that arrived
// later and is served from it.
func TestScrapeTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newBlockingCollector()
		reg := prometheus.NewRegistry()
		reg.MustRegister(c)
		scrape := scrapeServer(t, reg)

		start := time.Now()
		type result struct {
			code int
			body string
			at   time.Duration
		}
		first, second := make(chan result, 1), make(chan result, 1)
		go func() {
			code, body, _ := scrape(t.Context(), "")
			first <- result{code, body, time.Since(start)}
		}()
		time.Sleep(20 * time.Second) // bubble time: the second scrape arrives 20 s into the gather
		go func() {
			code, body, _ := scrape(t.Context(), "")
			second <- result{code, body, time.Since(start)}
		}()
		r := <-first
		const timeout = 30 * time.Second // ScrapeTimeout, as promhttp's HandlerOpts.Timeout was
		if r.code != http.StatusServiceUnavailable || r.at != timeout || !strings.Contains(r.body, "Exceeded configured timeout of 30s") {
			t.Errorf("first scrape: %d %q after %v, want 503 after %v", r.code, r.body, r.at, timeout)
		}
		time.Sleep(5 * time.Second) // bubble time: the gather goes on past the first scrape's timeout
		synctest.Wait()
		if got := c.gathers.Load(); got != 1 {
			t.Errorf("second scrape arrived during the first's gather: %d gathers, want 1", got)
		}
		close(c.release)
		r = <-second
		if r.code != http.StatusOK || r.at != 35*time.Second || !strings.Contains(r.body, "test_blocking 1") {
			t.Errorf("second scrape: %d %q after %v, want 200 when the gather ended, at 35s", r.code, r.body, r.at)
		}
	})
}
