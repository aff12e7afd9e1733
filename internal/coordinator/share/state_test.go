package share

import (
	"errors"
	"reflect"
	"testing"
)

func TestStateRecordRoundTrip(t *testing.T) {
	k := StateKey{Group: "workers", TopicID: [16]byte{1, 2, 3}, Partition: 7}
	s := &State{StateEpoch: 2, LeaderEpoch: 5, StartOffset: 100, Batches: []StateBatch{
		{First: 100, Last: 104, State: Acknowledged, DeliveryCount: 1},
		{First: 105, Last: 105, State: Available, DeliveryCount: 3},
		{First: 106, Last: 120, State: Archived, DeliveryCount: 5},
	}}
	key, value := EncodeStateRecord(k, s)
	gk, gs, err := DecodeStateRecord(key, value)
	if err != nil || gk != k || !reflect.DeepEqual(gs, s) {
		t.Fatalf("round trip: %+v %+v %v", gk, gs, err)
	}
	_, tomb := EncodeStateRecord(k, nil)
	if _, gs, err := DecodeStateRecord(key, tomb); err != nil || gs != nil {
		t.Fatalf("tombstone: %+v %v", gs, err)
	}
	for name, bad := range map[string][2][]byte{
		"short key":      {key[:3], value},
		"key type":       {append([]byte{0, 1}, key[2:]...), value},
		"batch count":    {key, append(append([]byte{}, value[:18]...), 0, 0, 0, 9)},
		"delivery state": {key, append(append([]byte{}, value[:len(value)-3]...), 9, 0, 1)},
	} {
		if _, _, err := DecodeStateRecord(bad[0], bad[1]); !errors.Is(err, ErrBadStateRecord) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestStatePartition(t *testing.T) {
	k := StateKey{Group: "g", TopicID: [16]byte{0xff}, Partition: 3}
	p := StatePartition(k, 50)
	if p < 0 || p >= 50 || StatePartition(k, 50) != p {
		t.Fatalf("partition %d", p)
	}
	if got := kafkaUUID([16]byte{}); got != "AAAAAAAAAAAAAAAAAAAAAA" {
		t.Fatalf("uuid %q", got)
	}
}

func FuzzDecodeStateRecord(f *testing.F) {
	key, value := EncodeStateRecord(StateKey{Group: "g", Partition: 1}, &State{StartOffset: 3, Batches: []StateBatch{{First: 3, Last: 9, State: Archived, DeliveryCount: 5}}})
	f.Add(key, value)
	f.Add(key, []byte(nil))
	f.Fuzz(func(t *testing.T, key, value []byte) {
		k, s, err := DecodeStateRecord(key, value)
		if err != nil {
			return
		}
		k2, v2 := EncodeStateRecord(k, s)
		if string(k2) != string(key) || s != nil && string(v2) != string(value) {
			t.Fatalf("re-encoding differs")
		}
	})
}
