package broker

import "testing"

// TestPartitionHealth: Kafka's definitions (Partition.isUnderReplicated,
// isUnderMinIsr, isAtMinIsr) for a led partition: under-replicated is the
// ISR against the replica set, whatever min.insync.replicas says; under
// min ISR and at min ISR compare the ISR with min.insync.replicas only.
func TestPartitionHealth(t *testing.T) {
	for _, tc := range []struct {
		isr, replicas, minISR int
		want                  PartitionHealth
	}{
		{3, 3, 2, PartitionHealth{}},
		{2, 3, 2, PartitionHealth{UnderReplicated: true, AtMinISR: true}},
		{1, 3, 2, PartitionHealth{UnderReplicated: true, UnderMinISR: true}},
		{1, 1, 1, PartitionHealth{AtMinISR: true}},
		// min.insync.replicas above the replication factor: every
		// acks=all produce fails although all replicas are in sync.
		{2, 2, 3, PartitionHealth{UnderMinISR: true}},
		// During a reassignment the replica set holds the adding
		// replicas too: not yet in the ISR, the partition is
		// under-replicated.
		{3, 5, 2, PartitionHealth{UnderReplicated: true}},
	} {
		if got := partitionHealth(tc.isr, tc.replicas, tc.minISR); got != tc.want {
			t.Errorf("isr %d of %d, min %d: %+v, want %+v", tc.isr, tc.replicas, tc.minISR, got, tc.want)
		}
	}
}
