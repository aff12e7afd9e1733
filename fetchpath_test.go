package samsa_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

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

// TestFetchMinBytes: a consumer's fetch with min_bytes 3000 and a minute
// of max_wait, sent to an empty partition, is answered once single-record
// produces have made 3000 bytes readable, with at least that much: the
// purgatory counts what appends make readable and wakes it then (a fetch
// never woken would run into the 20 s context).
func TestFetchMinBytes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	n := startNode(t, t.TempDir(), nil)
	cl := newClient(t, n, kgo.DefaultProduceTopic("mb"))
	createTopic(t, cl, "mb", 1, nil)
	br := direct(t, cl)
	type result struct {
		resp *kmsg.FetchResponse
		err  error
	}
	done := make(chan result, 1)
	go func() {
		req := kmsg.NewPtrFetchRequest()
		req.SetVersion(12)
		req.ReplicaID, req.MinBytes, req.MaxWaitMillis, req.MaxBytes = -1, 3000, 60_000, 1<<20
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = "mb"
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.PartitionMaxBytes = 1 << 20
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, br)
		done <- result{resp, err}
	}()
	value := make([]byte, 100)
	for i := 0; ; i++ {
		select {
		case r := <-done:
			if r.err != nil {
				t.Fatalf("fetch after %d produces: %v", i, r.err)
			}
			got := len(r.resp.Topics[0].Partitions[0].RecordBatches)
			if got < 3000 {
				t.Fatalf("fetch answered with %d bytes after %d produces, min_bytes 3000", got, i)
			}
			return
		default:
		}
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: value}).FirstErr(); err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
	}
}

// TestFetchPartitionMaxBytesZero: a consumer's fetch with partition_max_bytes
// 0 or negative still returns the first batch of the first partition with
// records, as every fetch below max_bytes does (KIP-74; Kafka's
// ReplicaManager reads with minOneMessage whatever the partition's limit):
// before, it returned no records however often it was sent, and a consumer
// so configured read nothing.
func TestFetchPartitionMaxBytesZero(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	n := startNode(t, t.TempDir(), nil)
	cl := newClient(t, n, kgo.DefaultProduceTopic("pmb"))
	createTopic(t, cl, "pmb", 1, nil)
	for i := range 3 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: fmt.Appendf(nil, "r%d", i)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	br := direct(t, cl)
	for _, pmb := range []int32{0, -1} {
		for _, maxBytes := range []int32{0, 1 << 20} {
			req := kmsg.NewPtrFetchRequest()
			req.SetVersion(12)
			req.ReplicaID, req.MaxBytes, req.SessionEpoch = -1, maxBytes, -1
			rt := kmsg.NewFetchRequestTopic()
			rt.Topic = "pmb"
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.FetchOffset, rp.PartitionMaxBytes = 1, pmb
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			resp, err := req.RequestWith(ctx, br)
			if err != nil {
				t.Fatal(err)
			}
			sp := resp.Topics[0].Partitions[0]
			if sp.ErrorCode != 0 {
				t.Fatalf("partition_max_bytes %d, max_bytes %d: error %d", pmb, maxBytes, sp.ErrorCode)
			}
			var batch kmsg.RecordBatch
			if err := batch.ReadFrom(sp.RecordBatches); err != nil || batch.FirstOffset != 1 {
				t.Fatalf("partition_max_bytes %d, max_bytes %d: %d bytes of records (%v, first offset %d), want the batch at offset 1",
					pmb, maxBytes, len(sp.RecordBatches), err, batch.FirstOffset)
			}
		}
	}
}

// TestFetchMaxBytesZero: a consumer's fetch with max_bytes 0 or negative
// and no quota returns only the first batch of the first partition with
// records, as Kafka's min(max_bytes, fetch.max.bytes) cap with KIP-74's
// first batch: before, it read as no cap (fetch.max.bytes) and returned
// every batch of both partitions.
func TestFetchMaxBytesZero(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	n := startNode(t, t.TempDir(), nil)
	cl := newClient(t, n, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	createTopic(t, cl, "mbz", 2, nil)
	for i := range 6 {
		// One produce a record: a batch each.
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "mbz", Partition: int32(i % 2), Value: fmt.Appendf(nil, "r%d", i)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	br := direct(t, cl)
	for _, maxBytes := range []int32{0, -1} {
		req := kmsg.NewPtrFetchRequest()
		req.SetVersion(12)
		req.ReplicaID, req.MaxBytes, req.SessionEpoch = -1, maxBytes, -1
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = "mbz"
		for p := range int32(2) {
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.Partition, rp.PartitionMaxBytes = p, 1<<20
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, br)
		if err != nil {
			t.Fatal(err)
		}
		var batches []int
		for _, sp := range resp.Topics[0].Partitions {
			if sp.ErrorCode != 0 {
				t.Fatalf("max_bytes %d: partition %d error %d", maxBytes, sp.Partition, sp.ErrorCode)
			}
			n := 0
			for b := sp.RecordBatches; len(b) > 0; n++ {
				var batch kmsg.RecordBatch
				if err := batch.ReadFrom(b); err != nil {
					t.Fatalf("max_bytes %d: partition %d: %v", maxBytes, sp.Partition, err)
				}
				b = b[12+batch.Length:]
			}
			batches = append(batches, n)
		}
		if !slices.Equal(batches, []int{1, 0}) {
			t.Fatalf("max_bytes %d: batches per partition %v, want [1 0] (the first batch only)", maxBytes, batches)
		}
	}
}
