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
