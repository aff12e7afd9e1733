package metadata

import (
	"encoding/json"
	"testing"
)

// BenchmarkDecodePartition decodes a PartitionRecord of 3 replicas as the
// metadata log stores it: the record that dominates creating and moving
// partitions (issue 13).
func BenchmarkDecodePartition(b *testing.B) {
	k, v, err := Encode(PartitionRecord{TopicID: UUID{0x8f, 0x12, 0xa3, 0x44, 0x05, 0x66, 0x47, 0x98, 0x89, 0x1a, 0xbb, 0x0c, 0xdd, 0xee, 0xff, 0x10},
		Partition: 4711, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}, Leader: 2, LeaderEpoch: 7, PartitionEpoch: 12})
	if err != nil {
		b.Fatal(err)
	}
	b.Run("Decode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := Decode(k, v); err != nil {
				b.Fatal(err)
			}
		}
	})
	// What Decode cost before it read partition records itself.
	b.Run("encoding_json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var r PartitionRecord
			if err := json.Unmarshal(v, &r); err != nil {
				b.Fatal(err)
			}
		}
	})
}
