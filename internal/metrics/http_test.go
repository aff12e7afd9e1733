package metrics

import (
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// blockingCollector blocks every Collect until release is closed,
// reporting each entry on entered.
type blockingCollector struct {
	desc    *prometheus.Desc
	entered chan struct{}
	release chan struct{}
}

func (c *blockingCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *blockingCollector) Collect(ch chan<- prometheus.Metric) {
	c.entered <- struct{}{}
	<-c.release
	ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, 1)
}

// TestMaxScrapes: with MaxScrapes scrapes in progress, another gets 503
// at once instead of gathering a further copy of every series; once they
// finish, scrapes are served again.
func TestMaxScrapes(t *testing.T) {
	c := &blockingCollector{
		desc:    prometheus.NewDesc("test_blocking", "Blocks.", nil, nil),
		entered: make(chan struct{}, MaxScrapes+1),
		release: make(chan struct{}),
	}
	reg, err := NewRegistry(c)
	if err != nil {
		t.Fatal(err)
	}
	s, err := Listen("127.0.0.1:0", nil, nil, reg, func() error { return nil }, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	url := "http://" + s.Addr().String() + "/metrics"
	// Without the limit the extra scrape would block in Collect: fail
	// instead of hanging.
	client := &http.Client{Timeout: 10 * time.Second}
	get := func() (int, error) {
		resp, err := client.Get(url)
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		_, err = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, err
	}
	var wg sync.WaitGroup
	codes := make(chan int, MaxScrapes)
	for range MaxScrapes {
		wg.Go(func() {
			code, err := get()
			if err != nil {
				t.Error(err)
			}
			codes <- code
		})
	}
	for range MaxScrapes {
		<-c.entered
	}
	if code, err := get(); err != nil || code != http.StatusServiceUnavailable {
		t.Errorf("scrape %d of %d at once: %d %v, want 503", MaxScrapes+1, MaxScrapes+1, code, err)
	}
	close(c.release)
	wg.Wait()
	close(codes)
	for code := range codes {
		if code != http.StatusOK {
			t.Errorf("a scrape within the limit: %d, want 200", code)
		}
	}
	if code, err := get(); err != nil || code != http.StatusOK {
		t.Errorf("scrape after the others finished: %d %v, want 200", code, err)
	}
}
