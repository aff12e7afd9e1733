package broker

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsahq/samsa/internal/config"
	"github.com/samsahq/samsa/internal/record"
	"github.com/samsahq/samsa/internal/replica"
	"github.com/samsahq/samsa/internal/wire"
)

// TestFetchReadBudget: once a fetch's read budget is spent and it read
// records, the partitions left answer with their offsets and no records,
// so that a fetch of 100,000 partitions answers before the client's
// request timeout; the next fetch, from the offsets the client moved,
// reads the next partition. With the budget already spent when the read
// starts, each fetch of three partitions of one record gets exactly one.
// Without the budget the first fetch returns all three.
func TestFetchReadBudget(t *testing.T) {
	m := newReplicas(t)
	const parts = 3
	for i := range int32(parts) {
		rp, err := m.Apply(replica.TopicPartition{Topic: "t", Partition: i}, [16]byte{1},
			replica.State{Leader: 1, LeaderEpoch: 1, Replicas: []int32{1}, ISR: []int32{1}}, replica.LogConfig{})
		if err != nil {
			t.Fatal(err)
		}
		batch, err := record.Build(record.Spec{ProducerID: record.NoProducerID, ProducerEpoch: record.NoProducerEpoch, BaseSequence: record.NoSequence},
			[]record.Record{{Value: fmt.Appendf(nil, "r%d", i)}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := rp.AppendInternal(batch); err != nil {
			t.Fatal(err)
		}
		if hw := rp.HighWatermark(); hw != 1 {
			t.Fatalf("partition %d: high-watermark %d, want 1", i, hw)
		}
	}
	b := &Broker{node: &config.Node{FetchMaxBytes: 1 << 20}, replicas: m}
	offsets := make([]int64, parts)
	fetch := func(readUntil time.Time) (withRecords []int32) {
		t.Helper()
		req := kmsg.NewPtrFetchRequest()
		req.Version, req.ReplicaID, req.MaxBytes = 12, -1, 1<<20
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = "t"
		for i := range int32(parts) {
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch = i, offsets[i], 1<<20, -1
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
		resp := &wire.FetchResponse{FetchResponse: req.ResponseKind().(*kmsg.FetchResponse)}
		defer resp.Release()
		var acct fetchAcct
		if _, failed := b.fetchOnce(req, resp, &acct, nil, readUntil, nil); failed {
			t.Fatalf("fetch failed: %+v", resp.Topics)
		}
		for _, sp := range resp.Topics[0].Partitions {
			if sp.ErrorCode != 0 || sp.HighWatermark != 1 || sp.LogStartOffset != 0 {
				t.Fatalf("partition %d: error %d, high-watermark %d, log start %d; want 0, 1, 0",
					sp.Partition, sp.ErrorCode, sp.HighWatermark, sp.LogStartOffset)
			}
			if len(sp.RecordBatches) > 0 {
				withRecords = append(withRecords, sp.Partition)
				offsets[sp.Partition] = 1
			}
		}
		return withRecords
	}
	spent := time.Now() // a budget spent before the read starts
	for want := range int32(parts) {
		if got := fetch(spent); len(got) != 1 || got[0] != want {
			t.Fatalf("fetch %d with its budget spent: records from partitions %v, want [%d]", want, got, want)
		}
	}
	if got := fetch(spent); len(got) != 0 {
		t.Fatalf("fetch at the high-watermarks: records from %v", got)
	}
	clear(offsets)
	if got := fetch(time.Time{}); len(got) != parts {
		t.Fatalf("fetch without a budget: records from partitions %v, want all %d", got, parts)
	}
}
