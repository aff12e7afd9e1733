package samsa_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/samsahq/samsa"
)

// TestFetchPaths: both fetch write paths (pread+writev, sendfile) return
// the same records, across segment rolls.
func TestFetchPaths(t *testing.T) {
	for _, sendfile := range []string{"false", "true"} {
		t.Run("sendfile="+sendfile, func(t *testing.T) {
			n := startNode(t, t.TempDir(), map[string]string{"samsa.fetch.sendfile": sendfile, "log.segment.bytes": "100000"})
			// Batches stay below segment.bytes, which rejects larger ones.
			cl := newClient(t, n, kgo.ProducerBatchMaxBytes(50_000))
			createTopic(t, cl, "fp", 3, nil)
			produced := produceN(t, cl, "fp", 20_000)
			checkRoundTrip(t, produced, consumeAll(t, n, "fp", len(produced)))
		})
	}
}

// BenchmarkFetch consumes the same 1 KB records with 1 MiB partition
// fetches through each fetch write path, in one process, so that the two
// figures compare (go test -bench Fetch -run XXX).
func BenchmarkFetch(b *testing.B) {
	const records = 50_000
	value := make([]byte, 1000)
	for _, sendfile := range []string{"false", "true"} {
		b.Run("sendfile="+sendfile, func(b *testing.B) {
			ctx := context.Background()
			n, err := samsa.Start(ctx, samsa.Config{Dir: b.TempDir(), Properties: map[string]string{"samsa.fetch.sendfile": sendfile}})
			if err != nil {
				b.Fatal(err)
			}
			defer n.Close()
			pcl, err := kgo.NewClient(kgo.SeedBrokers(n.Addr()), kgo.ProducerLinger(5*time.Millisecond), kgo.AllowAutoTopicCreation(), kgo.ProducerBatchMaxBytes(1<<20))
			if err != nil {
				b.Fatal(err)
			}
			for i := 0; i < records; i++ {
				pcl.Produce(ctx, &kgo.Record{Topic: "bench", Value: value}, nil)
			}
			if err := pcl.Flush(ctx); err != nil {
				b.Fatal(err)
			}
			pcl.Close()
			b.SetBytes(int64(records * len(value)))
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				cl, err := kgo.NewClient(kgo.SeedBrokers(n.Addr()), kgo.ConsumeTopics("bench"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxPartitionBytes(1<<20), kgo.FetchMaxBytes(1<<20))
				if err != nil {
					b.Fatal(err)
				}
				got := 0
				for got < records {
					fs := cl.PollFetches(ctx)
					if errs := fs.Errors(); len(errs) > 0 {
						b.Fatal(fmt.Sprint(errs))
					}
					got += fs.NumRecords()
				}
				cl.Close()
			}
		})
	}
}
