package metadata

import (
	"fmt"
	"slices"
	"testing"
)

// manyPartitions returns an image of topics of 100 partitions each, n
// partitions in all, replicated on brokers 1-3, and the topic ids.
func manyPartitions(tb testing.TB, n int) (*Image, []UUID) {
	tb.Helper()
	var recs []Record
	var ids []UUID
	for t := 0; t < n/100; t++ {
		id := UUID{byte(t >> 16), byte(t >> 8), byte(t), 1}
		ids = append(ids, id)
		recs = append(recs, TopicRecord{Name: fmt.Sprintf("t%d", t), ID: id})
		for p := range int32(100) {
			rs := []int32{1 + p%3, 1 + (p+1)%3, 1 + (p+2)%3}
			recs = append(recs, PartitionRecord{TopicID: id, Partition: p, Replicas: rs, ISR: rs, Leader: rs[0]})
		}
	}
	return Empty("c").Apply(0, recs), ids
}

// TestDelta checks what Apply reports it changed, and the replica counts
// it keeps.
func TestDelta(t *testing.T) {
	im, ids := manyPartitions(t, 1000)
	if d := im.Delta(); len(d.Partitions) != 10 || len(d.Partitions[ids[3]]) != 100 || d.From != -1 {
		t.Fatalf("creation delta: %d topics, %d partitions of one", len(d.Partitions), len(d.Partitions[ids[3]]))
	}
	for b := int32(1); b <= 3; b++ {
		if got := im.ReplicaCount(b); got != 1000 {
			t.Fatalf("broker %d: %d replicas, want 1000", b, got)
		}
	}
	v := "1"
	next := im.Apply(im.Offset+1, []Record{
		PartitionRecord{TopicID: ids[2], Partition: 7, Replicas: []int32{1, 2, 4}, ISR: []int32{1}, Leader: 1, LeaderEpoch: 1},
		ConfigRecord{ResourceType: ResourceTopic, ResourceName: "t5", Name: "retention.ms", Value: &v},
		RegisterBrokerRecord{BrokerID: 4, Epoch: 9},
		RemoveTopicRecord{ID: ids[9]},
	})
	d := next.Delta()
	if d.From != im.Offset || !slices.Equal(d.Partitions[ids[2]], []int32{7}) || len(d.Partitions) != 1 ||
		!d.Configs[ids[5]] || len(d.Configs) != 1 || !d.Brokers || d.BrokerConfigs ||
		len(d.Removed) != 1 || d.Removed[0].ID != ids[9] {
		t.Fatalf("delta %+v", d)
	}
	// Untouched topics are shared, touched ones copied.
	if next.TopicByID(ids[0]) != im.TopicByID(ids[0]) || next.TopicByID(ids[2]) == im.TopicByID(ids[2]) {
		t.Fatal("topics not shared, or changed in place")
	}
	if im.TopicByID(ids[2]).Partitions[7].Leader != 2 || next.TopicByID(ids[2]).Partitions[7].LeaderEpoch != 1 {
		t.Fatal("partition record not applied, or applied to the old image")
	}
	if next.Topic("t9") != nil || next.TopicCount() != 9 || im.Topic("t9") == nil {
		t.Fatal("remove topic")
	}
	// Partition 7 of t2 moved from broker 3 to 4; t9's 300 replicas left.
	want := map[int32]int{1: 900, 2: 900, 3: 899, 4: 1}
	for b, n := range want {
		if got := next.ReplicaCount(b); got != n {
			t.Fatalf("broker %d: %d replicas, want %d", b, got, n)
		}
	}
}

// BenchmarkApplyPartitionRecord is the cost of applying one
// PartitionRecord (an AlterPartition's ISR change) to an image of 1,000
// and of 100,000 partitions (topics of 100): with the persistent tries
// the two should cost about the same.
func BenchmarkApplyPartitionRecord(b *testing.B) {
	for _, n := range []int{1000, 100000} {
		im, ids := manyPartitions(b, n)
		b.Run(fmt.Sprintf("partitions=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				id := ids[i%len(ids)]
				p := int32(i % 100)
				rs := []int32{1 + p%3, 1 + (p+1)%3, 1 + (p+2)%3}
				_ = im.Apply(im.Offset+1, []Record{PartitionRecord{TopicID: id, Partition: p, Replicas: rs, ISR: rs[:2], Leader: rs[0], PartitionEpoch: int32(i)}})
				i++
			}
		})
	}
}
