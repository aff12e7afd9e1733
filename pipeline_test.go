package samsa_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestProducePipelinedTxnQuota: acks=all Produce requests pipelined behind
// one another (server.Deferred) on a three-node cluster, RF 3, with
// franz-go's idempotent default of 5 requests in flight and small batches. A transactional
// producer's committed, aborted and committed transactions read back
// read_committed in send order, each record once; EndTxn (another
// connection, to the coordinator) ends each transaction after its
// pipelined produces. With producer_byte_rate set for the client id, the
// deferred responses still carry the throttle (the broker's quotas are
// applied when a Deferred completes), and the idempotent producer's
// records read back in order, once each.
func TestProducePipelinedTxnQuota(t *testing.T) {
	if testing.Short() {
		t.Skip("three nodes")
	}
	c := startCluster(t, 3, txnProps(map[string]string{"default.replication.factor": "3", "min.insync.replicas": "2",
		// Quota samples of 2 × 1 s: a burst of about one window's bytes
		// before the throttle (11 by default).
		"quota.window.num": "2"}))
	seeds := c.Addrs()
	admin, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	adm := kadm.NewClient(admin)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := adm.CreateTopic(ctx, 1, 3, nil, "ptx"); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.CreateTopic(ctx, 1, 3, nil, "pquota"); err != nil {
		t.Fatal(err)
	}
	value := func(prefix string, i int) []byte {
		return fmt.Appendf(nil, "%s-%06d-%0200d", prefix, i, 0)
	}
	small := []kgo.Opt{kgo.SeedBrokers(seeds...), // idempotent: 5 requests in flight

		kgo.ProducerBatchMaxBytes(4 << 10), kgo.ProducerLinger(0), kgo.RequiredAcks(kgo.AllISRAcks()),
		// Uncompressed: the quota counts request bytes.
		kgo.ProducerBatchCompression(kgo.NoCompression())}

	t.Run("txn", func(t *testing.T) {
		p, err := kgo.NewClient(append(small, kgo.TransactionalID("ptx-producer"), kgo.DefaultProduceTopic("ptx"))...)
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		const n = 1500
		var want []string
		for txn, commit := range []bool{true, false, true} {
			if err := p.BeginTransaction(); err != nil {
				t.Fatal(err)
			}
			prefix := fmt.Sprintf("t%d", txn)
			for i := range n {
				p.Produce(ctx, &kgo.Record{Value: value(prefix, i)}, func(_ *kgo.Record, err error) {
					if err != nil {
						t.Errorf("produce: %v", err)
					}
				})
				if commit {
					want = append(want, string(value(prefix, i)))
				}
			}
			if err := p.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			if err := p.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
				t.Fatal(err)
			}
		}
		got := readTopic(t, seeds[0], "ptx", kgo.ReadCommitted(), len(want), 30*time.Second)
		if len(got) != len(want) {
			t.Fatalf("read %d records read_committed, want %d", len(got), len(want))
		}
		for i, r := range got {
			if string(r.Value) != want[i] {
				t.Fatalf("record %d at offset %d is %.9s, want %.9s", i, r.Offset, r.Value, want[i])
			}
		}
	})

	t.Run("quota", func(t *testing.T) {
		client, anonymous := "pipelined-quota", "ANONYMOUS"
		alterQuota(t, adm, kadm.ClientQuotaEntity{{Type: "user", Name: &anonymous}}, "producer_byte_rate", 200<<10)
		hook := new(throttleHook)
		p, err := kgo.NewClient(append(small, kgo.ClientID(client), kgo.DefaultProduceTopic("pquota"), kgo.WithHooks(hook))...)
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		const n = 4000 // about 850 KB: 4 s at the quota, past its burst
		for i := range n {
			p.Produce(ctx, &kgo.Record{Value: value("q", i)}, func(_ *kgo.Record, err error) {
				if err != nil {
					t.Errorf("produce: %v", err)
				}
			})
		}
		if err := p.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		if hook.maxMs.Load() == 0 {
			t.Error("no Produce response carried a throttle past producer_byte_rate")
		}
		got := readTopic(t, seeds[0], "pquota", kgo.ReadUncommitted(), n, 30*time.Second)
		if len(got) != n {
			t.Fatalf("read %d records, want %d", len(got), n)
		}
		for i, r := range got {
			if w := value("q", i); string(r.Value) != string(w) {
				t.Fatalf("record %d at offset %d is %.9s, want %.9s", i, r.Offset, r.Value, w)
			}
		}
	})
}
