package samsa_test

import (
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/samsahq/samsa"
)

// BenchmarkProduceMetrics produces 1 KB records (acks=all, 6 partitions)
// to a node without an http.listener and to one whose /metrics is scraped
// every second, in one process, so that the two figures compare
// (go test -run XXX -bench ProduceMetrics -count 6: the sub-benchmarks
// alternate).
func BenchmarkProduceMetrics(b *testing.B) {
	const records = 20_000
	value := make([]byte, 1000)
	for _, metrics := range []string{"off", "on"} {
		b.Run("metrics="+metrics, func(b *testing.B) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			cfg := samsa.Config{Dir: b.TempDir(), Properties: map[string]string{"num.partitions": "6"}}
			if metrics == "on" {
				cfg.HTTPListener = "127.0.0.1:0"
			}
			n, err := samsa.Start(ctx, cfg)
			if err != nil {
				b.Fatal(err)
			}
			defer n.Close()
			done := make(chan struct{})
			if metrics == "on" {
				go func() {
					defer close(done)
					tick := time.NewTicker(time.Second)
					defer tick.Stop()
					for {
						select {
						case <-ctx.Done():
							return
						case <-tick.C:
						}
						if resp, err := http.Get("http://" + n.HTTPAddr() + "/metrics"); err == nil {
							io.Copy(io.Discard, resp.Body)
							resp.Body.Close()
						}
					}
				}()
			} else {
				close(done)
			}
			defer func() { cancel(); <-done }()
			cl, err := kgo.NewClient(kgo.SeedBrokers(n.Addr()), kgo.AllowAutoTopicCreation(), kgo.ProducerLinger(5*time.Millisecond))
			if err != nil {
				b.Fatal(err)
			}
			defer cl.Close()
			b.SetBytes(records * int64(len(value)))
			b.ResetTimer()
			for range b.N {
				for range records {
					cl.Produce(ctx, &kgo.Record{Topic: "bench", Value: value}, nil)
				}
				if err := cl.Flush(ctx); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*records)/b.Elapsed().Seconds(), "records/s")
		})
	}
}
