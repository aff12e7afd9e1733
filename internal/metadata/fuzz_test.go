package metadata

import (
	"encoding/json"
	"math"
	"reflect"
	"testing"
)

// FuzzDecode decodes arbitrary metadata records (keys and values as the
// metadata log holds them), seeded with the SCRAM credential records, and
// bootstrap files: no panic, and a decoded record encodes back to one that
// decodes equal.
func FuzzDecode(f *testing.F) {
	for _, r := range []Record{
		UserScramCredentialRecord{Name: "alice", Mechanism: 2, Salt: []byte{1, 2}, StoredKey: []byte{3}, ServerKey: []byte{4}, Iterations: 4096},
		RemoveUserScramCredentialRecord{Name: "alice", Mechanism: 1},
		BootstrapRecord{},
		TopicRecord{Name: "t"},
		FeatureLevelRecord{Name: FeatureTransactionVersion, FeatureLevel: 2},
	} {
		k, v, err := Encode(r)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(k, v)
	}
	f.Add([]byte("user_scram_credential"), []byte(`{"name":1}`))
	f.Add([]byte("bootstrap"), []byte(`[{"type":"bootstrap","value":{}}]`))
	f.Fuzz(func(t *testing.T, key, value []byte) {
		_, _ = DecodeBootstrap(value, "fuzz")
		r, err := Decode(key, value)
		if err != nil {
			return
		}
		k2, v2, err := Encode(r)
		if err != nil {
			t.Fatalf("%T: %v", r, err)
		}
		r2, err := Decode(k2, v2)
		if err != nil || !reflect.DeepEqual(r, r2) {
			t.Fatalf("%#v re-decoded as %#v, %v", r, r2, err)
		}
	})
}

// FuzzDecodePartition: the partition record's own decoder
// (decodePartitionFast) accepts only what encoding/json reads the same
// way: whatever it decodes, encoding/json decodes without error to an
// equal record. Seeded with Encode's layout and its near misses.
func FuzzDecodePartition(f *testing.F) {
	for _, r := range []PartitionRecord{
		{TopicID: UUID{1, 255, 3}, Partition: 7, Replicas: []int32{1, 2, 3}, ISR: []int32{2}, Leader: 2, LeaderEpoch: 3, PartitionEpoch: 4},
		{Partition: -1, Replicas: []int32{}, ISR: []int32{}, Leader: -1, AddingReplicas: []int32{4}, RemovingReplicas: []int32{1}},
		{Partition: 3, Replicas: []int32{1, 2}, ISR: []int32{2}, Leader: -1, LostReplicas: []int32{1}},
		{Partition: math.MaxInt32, LeaderEpoch: math.MinInt32},
	} {
		_, v, err := Encode(r)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(v)
	}
	for _, v := range []string{
		`{}`, ` { "partition" : 1 , "isr" : [ 1 , 2 ] } `, `{"partition":1,"partition":2}`, `{"Partition":1}`,
		`{"partition":01}`, `{"partition":-0}`, `{"partition":1.0}`, `{"partition":1e2}`, `{"partition":2147483648}`,
		`{"replicas":null}`, `{"topic_id":[1,2]}`, `{"topic_id":[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17]}`,
		`{"topic_id":[256,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0]}`, `{"p\u0061rtition":1}`, `{"partition":1}x`, `{"partition":1,}`,
	} {
		f.Add([]byte(v))
	}
	f.Fuzz(func(t *testing.T, value []byte) {
		fast, ok := decodePartitionFast(value)
		if !ok {
			return
		}
		var slow PartitionRecord
		if err := json.Unmarshal(value, &slow); err != nil {
			t.Fatalf("%q: decoded %+v, encoding/json: %v", value, fast, err)
		}
		if !reflect.DeepEqual(fast, slow) {
			t.Fatalf("%q: decoded %+v, encoding/json %+v", value, fast, slow)
		}
	})
}
