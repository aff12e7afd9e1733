package samsa_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/samsahq/samsa"
)

// BenchmarkFirstProduceNewPartitions: the first Produce to each partition
// of a new topic of 1,000 partitions whose logs exist (one record each,
// one acks=all ProduceSync); the topic's creation and its logs' making
// are outside the timer. Each first append wrote the log's
// leader-epoch-checkpoint in the Produce handler (five system calls per
// partition) until the epoch was assigned when the partition becomes
// leader, its file written by the replica manager's creators.
func BenchmarkFirstProduceNewPartitions(b *testing.B) {
	const partitions = 1000
	ctx := context.Background()
	n, err := samsa.Start(ctx, samsa.Config{Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	defer n.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.Addr()), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.MaxBufferedRecords(2*partitions))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	value := make([]byte, 100)
	recs := make([]*kgo.Record, partitions)
	i := 0
	for b.Loop() {
		b.StopTimer()
		topic := fmt.Sprintf("first-%d", i)
		i++
		if r, err := adm.CreateTopic(ctx, partitions, 1, nil, topic); err != nil || r.Err != nil {
			b.Fatalf("create: %v %v", err, r.Err)
		}
		// Every log made: a ListOffsets answers for every partition
		// (it waits for the logs being made).
		for deadline := time.Now().Add(time.Minute); ; {
			listed, err := adm.ListEndOffsets(ctx, topic)
			ok := err == nil && len(listed[topic]) == partitions
			listed.Each(func(o kadm.ListedOffset) { ok = ok && o.Err == nil })
			if ok {
				break
			}
			if time.Now().After(deadline) {
				b.Fatalf("logs of %s not made after a minute: %v", topic, err)
			}
		}
		for p := range recs {
			recs[p] = &kgo.Record{Topic: topic, Partition: int32(p), Value: value}
		}
		b.StartTimer()
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*partitions), "µs/partition")
}
