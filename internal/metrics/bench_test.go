package metrics

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
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

// partitionSeries serves, for each of n partitions (100 a topic), the 17
// series a broker serves per partition it leads (broker/metrics.go's
// collectPartitions: kafka_log_log_*, kafka_cluster_partition_*,
// kafka_topic_partition_*): the shape of a broker's /metrics at n
// partitions.
type partitionSeries struct {
	n      int
	descs  [17]*prometheus.Desc
	topics []string
}

func newPartitionSeries(n int) *partitionSeries {
	p := &partitionSeries{n: n}
	for i := range p.descs {
		p.descs[i] = prometheus.NewDesc(fmt.Sprintf("bench_partition_series_%d", i), "A per-partition series.", []string{"topic", "partition"}, nil)
	}
	for i := range (n + 99) / 100 {
		p.topics = append(p.topics, fmt.Sprintf("topic-%d", i))
	}
	return p
}

func (p *partitionSeries) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range p.descs {
		ch <- d
	}
}

func (p *partitionSeries) Collect(ch chan<- prometheus.Metric) {
	for i := range p.n {
		topic, part := p.topics[i/100], strconv.Itoa(i%100)
		for j, d := range p.descs {
			ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(i+j), topic, part)
		}
	}
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkScrape gathers a registry of the broker's per-partition series
// at 10,000 and 100,000 partitions (gather), and serves N concurrent
// scrapes of it (gzip, as Prometheus asks) by the Server's handler, whose
// scrapes share a gather (shared), and by promhttp's handler as Listen
// built it before, which gathers per request (unshared; main also refused
// more than MaxScrapes at once, 16 are all served here). Neither has
// ScrapeTimeout, so that a loaded machine measures CPU instead of 503s.
// cpu-ms/op is the process's CPU time (server and clients) per round of
// N scrapes: compare shared with unshared in the same run
// (go test -run XXX -bench 'Scrape/partitions=10000/' -benchtime 3x ./internal/metrics).
func BenchmarkScrape(b *testing.B) {
	for _, partitions := range []int{10_000, 100_000} {
		reg, err := NewRegistry(newPartitionSeries(partitions))
		if err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("partitions=%d/gather", partitions), func(b *testing.B) {
			start := cpuTime(b)
			for b.Loop() {
				if _, err := reg.Gather(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64((cpuTime(b)-start).Milliseconds())/float64(b.N), "cpu-ms/op")
		})
		scrapes := []int{4, 16}
		if partitions > 10_000 {
			scrapes = scrapes[:1] // 16 unshared gathers of 1.7M series would take ~10 GB
		}
		for _, n := range scrapes {
			b.Run(fmt.Sprintf("partitions=%d/scrapes=%d/unshared", partitions, n), func(b *testing.B) {
				srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{EnableOpenMetrics: true, ErrorHandling: promhttp.ContinueOnError}))
				defer srv.Close()
				benchScrapes(b, srv.URL+"/metrics", n)
			})
			b.Run(fmt.Sprintf("partitions=%d/scrapes=%d/shared", partitions, n), func(b *testing.B) {
				sg := &sharedGather{g: reg}
				defer sg.close()
				srv := httptest.NewServer(scrapeHandler(sg, 0, slog.New(slog.DiscardHandler)))
				defer srv.Close()
				benchScrapes(b, srv.URL+"/metrics", n)
			})
		}
	}
}

// benchScrapes makes n concurrent scrapes of url per iteration.
func benchScrapes(b *testing.B, url string, n int) {
	b.Helper()
	tr := &http.Transport{MaxIdleConnsPerHost: n}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	start := cpuTime(b)
	for b.Loop() {
		var wg sync.WaitGroup
		for range n {
			wg.Go(func() {
				resp, err := client.Get(url)
				if err != nil {
					b.Error(err)
					return
				}
				defer resp.Body.Close()
				if _, err := io.Copy(io.Discard, resp.Body); err != nil || resp.StatusCode != http.StatusOK {
					b.Errorf("scrape: %d %v", resp.StatusCode, err)
				}
			})
		}
		wg.Wait()
	}
	b.ReportMetric(float64((cpuTime(b)-start).Milliseconds())/float64(b.N), "cpu-ms/op")
}
