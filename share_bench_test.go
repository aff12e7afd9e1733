package samsa_test

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsahq/samsa"
)

// BenchmarkQueue measures queue throughput on one node: records/s
// consumed by N consumers of a consumer group (offsets committed by
// autocommit, the baseline) and acknowledged by N share consumers, one by
// one (each acceptance flushed before the next record: ShareAcknowledge per
// record) and in batches (the acceptances of a poll piggy-backed on the
// next ShareFetch). Each iteration consumes the same 20,000 records of 100
// bytes in 4 partitions with a new group.
//
//	go test -run XXX -bench Queue -benchtime 3x
func BenchmarkQueue(b *testing.B) {
	const records, partitions = 20_000, 4
	ctx := context.Background()
	n, err := samsa.Start(ctx, samsa.Config{Dir: b.TempDir(), Properties: groupProps})
	if err != nil {
		b.Fatal(err)
	}
	defer n.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.Addr()), kgo.ProducerLinger(5*time.Millisecond))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, partitions, 1, nil, "queue"); err != nil {
		b.Fatal(err)
	}
	value := make([]byte, 100)
	recs := make([]*kgo.Record, records)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: "queue", Key: []byte(strconv.Itoa(i)), Value: value}
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		b.Fatal(err)
	}
	group := 0
	for _, mode := range []string{"consumer-group", "share-batch", "share-one-by-one"} {
		for _, consumers := range []int{1, 4} {
			b.Run(mode+"/consumers="+strconv.Itoa(consumers), func(b *testing.B) {
				var total time.Duration
				for range b.N {
					group++
					g := "bench-" + strconv.Itoa(group)
					if mode != "consumer-group" {
						setGroupConfigBench(b, cl, g)
					}
					start := time.Now()
					runQueue(b, n.Addr(), mode, g, consumers, records)
					total += time.Since(start)
				}
				b.ReportMetric(float64(records*b.N)/total.Seconds(), "records/s")
			})
		}
	}
}

func setGroupConfigBench(b *testing.B, cl *kgo.Client, group string) {
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	rr := kmsg.NewIncrementalAlterConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
	c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	c.Name, c.Value = "share.auto.offset.reset", kmsg.StringPtr("earliest")
	rr.Configs = append(rr.Configs, c)
	req.Resources = append(req.Resources, rr)
	if resp, err := req.RequestWith(context.Background(), cl); err != nil || resp.Resources[0].ErrorCode != 0 {
		b.Fatalf("group config: %v", err)
	}
}

// runQueue has consumers consume records of "queue" in group, as mode says,
// and returns when all were consumed (acknowledged for share groups).
func runQueue(b *testing.B, addr, mode, group string, consumers, records int) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var got atomic.Int64
	var wg sync.WaitGroup
	done := make(chan struct{})
	var once sync.Once
	for range consumers {
		opts := []kgo.Opt{kgo.SeedBrokers(addr), kgo.ConsumeTopics("queue")}
		if mode == "consumer-group" {
			opts = append(opts, kgo.ConsumerGroup(group), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		} else {
			opts = append(opts, kgo.ShareGroup(group))
		}
		c, err := kgo.NewClient(opts...)
		if err != nil {
			b.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer c.Close()
			for {
				select {
				case <-done:
					return
				default:
				}
				pctx, pcancel := context.WithTimeout(ctx, 200*time.Millisecond)
				fs := c.PollFetches(pctx)
				pcancel()
				if ctx.Err() != nil {
					return
				}
				rs := fs.Records()
				for _, r := range rs {
					switch mode {
					case "share-batch":
						r.Ack(kgo.AckAccept)
					case "share-one-by-one":
						r.Ack(kgo.AckAccept)
						if err := c.FlushAcks(ctx); err != nil {
							b.Error(err)
							return
						}
					}
				}
				if mode == "share-batch" {
					if err := c.FlushAcks(ctx); err != nil {
						b.Error(err)
						return
					}
				}
				if got.Add(int64(len(rs))) >= int64(records) {
					once.Do(func() { close(done) })
				}
			}
		}()
	}
	wg.Wait()
	if n := got.Load(); n < int64(records) {
		b.Fatalf("consumed %d of %d", n, records)
	}
}
