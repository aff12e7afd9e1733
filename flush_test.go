package samsa_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsahq/samsa/internal/record"
)

// TestFlushMessagesProduce: a replicated topic with flush.messages=1
// (every produce waits for an fsync on the leader and on each follower
// before the high-watermark passes it) takes concurrent producers with
// acks=all and acks=1, one record a request, and every acknowledged record
// is read back once, in order.
func TestFlushMessagesProduce(t *testing.T) {
	c := startCluster(t, 3, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	admCl, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer admCl.Close()
	adm := kadm.NewClient(admCl)
	resp, err := adm.CreateTopic(ctx, 2, 3, map[string]*string{"flush.messages": kmsg.StringPtr("1")}, "fsynced")
	if err != nil || resp.Err != nil {
		t.Fatalf("create: %v %v", err, resp.Err)
	}
	waitFor(t, 20*time.Second, "full ISRs", func() bool {
		td := describe(t, adm, "fsynced")
		for _, p := range td.Partitions {
			if len(p.ISR) != 3 || p.Leader < 0 {
				return false
			}
		}
		return len(td.Partitions) == 2
	})

	const producers, each = 8, 50
	var (
		mu       sync.Mutex
		produced []*kgo.Record
		wg       sync.WaitGroup
	)
	errs := make(chan error, producers)
	for i := range producers {
		acks := kgo.AllISRAcks()
		opts := []kgo.Opt{kgo.SeedBrokers(c.Addrs()...), kgo.ProducerLinger(0), kgo.MaxBufferedRecords(1)}
		if i%2 == 1 {
			acks = kgo.LeaderAck()
			opts = append(opts, kgo.DisableIdempotentWrite())
		}
		cl, err := kgo.NewClient(append(opts, kgo.RequiredAcks(acks))...)
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range each {
				r := &kgo.Record{Topic: "fsynced", Key: fmt.Appendf(nil, "p%d", i), Value: fmt.Appendf(nil, "p%d-%d", i, j)}
				if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
					errs <- fmt.Errorf("producer %d record %d: %w", i, j, err)
					return
				}
				mu.Lock()
				produced = append(produced, r)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	got := consumeAll(t, c.Node(c.Brokers()[0]), "fsynced", producers*each)
	checkRoundTrip(t, produced, got)
}

// TestFlushMessagesMultiPartitionProduce: one Produce request to 8
// partitions of a topic with flush.messages=1 (appended on several
// goroutines that wait for their fsyncs together) gets one success per
// partition with consecutive base offsets per partition, and every record
// reads back, at acks=1 and acks=all.
func TestFlushMessagesMultiPartitionProduce(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	cl := newClient(t, n)
	const parts = 8
	createTopic(t, cl, "fsynced8", parts, map[string]*string{"flush.messages": kmsg.StringPtr("1")})
	conn := dial(t, n.Addr())
	corr := int32(0)
	const rounds = 5
	for round := range rounds {
		req := kmsg.NewPtrProduceRequest()
		req.SetVersion(9)
		req.Acks, req.TimeoutMillis = 1, 10000
		if round%2 == 1 {
			req.Acks = -1
		}
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = "fsynced8"
		for p := range int32(parts) {
			rp := kmsg.NewProduceRequestTopicPartition()
			rp.Partition = p
			rp.Records = plainBatch(t, record.CodecNone, fmt.Sprintf("p%d-r%d-a", p, round), fmt.Sprintf("p%d-r%d-b", p, round))
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
		corr++
		resp := roundTrip(t, conn, req, corr).(*kmsg.ProduceResponse)
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != parts {
			t.Fatalf("round %d: response %+v", round, resp.Topics)
		}
		for i, sp := range resp.Topics[0].Partitions {
			if sp.Partition != int32(i) || sp.ErrorCode != 0 || sp.BaseOffset != int64(2*round) {
				t.Fatalf("round %d: partition entry %d = partition %d error %d base offset %d, want partition %d error 0 base offset %d",
					round, i, sp.Partition, sp.ErrorCode, sp.BaseOffset, i, 2*round)
			}
		}
	}
	got := consumeAll(t, n, "fsynced8", parts*rounds*2)
	seen := map[string]bool{}
	for _, r := range got {
		seen[string(r.Value)] = true
	}
	for p := range parts {
		for round := range rounds {
			for _, s := range []string{"a", "b"} {
				if v := fmt.Sprintf("p%d-r%d-%s", p, round, s); !seen[v] {
					t.Errorf("record %s not read back", v)
				}
			}
		}
	}
}
