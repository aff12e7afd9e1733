package share

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"
)

var testKey = StateKey{Group: "workers", TopicID: [16]byte{1, 2, 3}, Partition: 7}

func TestStateRecordRoundTrip(t *testing.T) {
	snap := &State{SnapshotEpoch: 3, StateEpoch: 2, LeaderEpoch: 5, StartOffset: 100, CreateTimestamp: 1700000000000, WriteTimestamp: 1700000000001,
		Batches: []StateBatch{
			{First: 100, Last: 104, State: Acknowledged, DeliveryCount: 1},
			{First: 105, Last: 105, State: Available, DeliveryCount: 3},
			{First: 106, Last: 120, State: Archived, DeliveryCount: 5},
		}}
	upd := &State{SnapshotEpoch: 3, LeaderEpoch: -1, StartOffset: -1, Batches: snap.Batches[1:]}
	for _, r := range []StateRecord{
		{Key: testKey, Kind: KindSnapshot, State: snap},
		{Key: testKey, Kind: KindUpdate, State: upd},
		{Key: testKey, Kind: KindSnapshot, State: &State{Batches: []StateBatch{}}},
		{Key: testKey, Kind: KindSnapshot}, // tombstone
	} {
		key, value := EncodeStateRecord(r)
		if (r.State == nil) != (value == nil) {
			t.Fatalf("kind %d: value %x", r.Kind, value)
		}
		got, err := DecodeStateRecord(key, value)
		if err != nil || !reflect.DeepEqual(got, r) {
			t.Fatalf("kind %d: round trip %+v %+v %v", r.Kind, got, got.State, err)
		}
	}
}

// TestStateRecordKafkaLayout checks the bytes against the layout of Kafka's
// ShareSnapshotKey/Value and ShareUpdateKey/Value (share-coordinator's
// JSON schemas, written by Kafka's generated serializers): key version =
// record type, non-flexible key; value version 0, flexible.
func TestStateRecordKafkaLayout(t *testing.T) {
	k := StateKey{Group: "g", TopicID: [16]byte{15: 9}, Partition: 2}
	key, value := EncodeStateRecord(StateRecord{Key: k, Kind: KindSnapshot, State: &State{
		SnapshotEpoch: 1, StateEpoch: 2, LeaderEpoch: 3, StartOffset: 4, CreateTimestamp: 5, WriteTimestamp: 6,
		Batches: []StateBatch{{First: 4, Last: 7, State: Archived, DeliveryCount: 2}},
	}})
	wantKey := "0000" + "0001" + "67" + "00000000000000000000000000000009" + "00000002"
	wantValue := "0000" + "00000001" + "00000002" + "00000003" + "0000000000000004" +
		"0000000000000005" + "0000000000000006" + "02" +
		"0000000000000004" + "0000000000000007" + "04" + "0002" + "00" + "00"
	if hex.EncodeToString(key) != wantKey || hex.EncodeToString(value) != wantValue {
		t.Fatalf("snapshot\nkey   %x\nwant  %s\nvalue %x\nwant  %s", key, wantKey, value, wantValue)
	}
	key, value = EncodeStateRecord(StateRecord{Key: k, Kind: KindUpdate, State: &State{
		SnapshotEpoch: 1, LeaderEpoch: 3, StartOffset: -1,
	}})
	wantKey = "0001" + wantKey[4:]
	wantValue = "0000" + "00000001" + "00000003" + "ffffffffffffffff" + "01" + "00"
	if hex.EncodeToString(key) != wantKey || hex.EncodeToString(value) != wantValue {
		t.Fatalf("update\nkey   %x\nwant  %s\nvalue %x\nwant  %s", key, wantKey, value, wantValue)
	}
	// Kafka 4.2's tagged DeliveryCompleteCount (tag 0) is skipped.
	tagged := append(append([]byte{}, value[:len(value)-1]...), 1, 0, 4, 0, 0, 0, 9)
	r, err := DecodeStateRecord(key, tagged)
	if err != nil || r.State.LeaderEpoch != 3 || r.State.StartOffset != -1 {
		t.Fatalf("tagged field: %+v %v", r.State, err)
	}
}

// TestStateRecordLegacy reads the value Samsa wrote before Kafka's schema.
func TestStateRecordLegacy(t *testing.T) {
	key, _ := EncodeStateRecord(StateRecord{Key: testKey})
	v := binary.BigEndian.AppendUint16(nil, 0)
	v = binary.BigEndian.AppendUint32(v, 2)   // state epoch
	v = binary.BigEndian.AppendUint32(v, 5)   // leader epoch
	v = binary.BigEndian.AppendUint64(v, 100) // start offset
	v = binary.BigEndian.AppendUint32(v, 1)
	v = binary.BigEndian.AppendUint64(v, 100)
	v = binary.BigEndian.AppendUint64(v, 104)
	v = append(v, 2)
	v = binary.BigEndian.AppendUint16(v, 1)
	r, err := DecodeStateRecord(key, v)
	want := &State{StateEpoch: 2, LeaderEpoch: 5, StartOffset: 100, Batches: []StateBatch{{First: 100, Last: 104, State: Acknowledged, DeliveryCount: 1}}}
	if err != nil || r.Kind != KindSnapshot || !reflect.DeepEqual(r.State, want) {
		t.Fatalf("legacy: %+v %v", r.State, err)
	}
}

func TestStateRecordBad(t *testing.T) {
	key, value := EncodeStateRecord(StateRecord{Key: testKey, Kind: KindSnapshot, State: &State{StartOffset: 3,
		Batches: []StateBatch{{First: 3, Last: 9, State: Archived, DeliveryCount: 5}}}})
	for name, bad := range map[string][2][]byte{
		"short key":      {key[:3], value},
		"long key":       {append(append([]byte{}, key...), 0), value},
		"key type":       {append([]byte{0, 2}, key[2:]...), value},
		"short value":    {key, value[:len(value)-1]},
		"value version":  {key, append([]byte{0, 1}, value[2:]...)},
		"batch count":    {key, append(append([]byte{}, value[:38]...), 0x7f)},
		"delivery state": {key, append(append([]byte{}, value[:len(value)-5]...), 9, 0, 5, 0, 0)},
	} {
		if _, err := DecodeStateRecord(bad[0], bad[1]); !errors.Is(err, ErrBadStateRecord) {
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

func TestCombine(t *testing.T) {
	b := func(first, last int64, s RecordState, n int16) StateBatch {
		return StateBatch{First: first, Last: last, State: s, DeliveryCount: n}
	}
	for _, tc := range []struct {
		name  string
		start int64
		lists [][]StateBatch
		want  []StateBatch
	}{
		{"empty", 0, nil, nil},
		{"prune and cut", 10, [][]StateBatch{{b(0, 5, Available, 1), b(8, 12, Available, 1), b(13, 14, Available, 1)}},
			[]StateBatch{b(10, 14, Available, 1)}},
		{"higher count wins", 0, [][]StateBatch{{b(0, 9, Available, 1)}, {b(3, 4, Available, 2)}},
			[]StateBatch{b(0, 2, Available, 1), b(3, 4, Available, 2), b(5, 9, Available, 1)}},
		{"later state wins at equal count", 0, [][]StateBatch{{b(0, 9, Acknowledged, 1)}, {b(0, 9, Available, 1)}},
			[]StateBatch{b(0, 9, Acknowledged, 1)}},
		{"lower count loses", 0, [][]StateBatch{{b(0, 4, Available, 3)}, {b(2, 6, Archived, 1)}},
			[]StateBatch{b(0, 4, Available, 3), b(5, 6, Archived, 1)}},
		{"unsorted, reversed ignored", 0, [][]StateBatch{{b(20, 21, Archived, 1), b(5, 1, Available, 1), b(0, 19, Archived, 1)}},
			[]StateBatch{b(0, 21, Archived, 1)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Combine(tc.start, tc.lists...); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestStorePrepare: a write before the state is initialized is refused
// (INVALID_REQUEST, as Kafka 4.1+); the initialization is a snapshot, then
// updates carry the write's batches, and a snapshot of the merged state
// follows perSnapshot updates; the state replayed from the records equals
// the store's.
func TestStorePrepare(t *testing.T) {
	s := NewStore()
	s.Load(0, NewShard())
	replay := NewShard()
	now := time.UnixMilli(1700000000000)
	var kinds []RecordKind
	write := func(w Write) {
		t.Helper()
		r, err := s.Prepare(0, testKey, w, 2, now)
		if err != nil {
			t.Fatal(err)
		}
		key, value := EncodeStateRecord(r)
		d, err := DecodeStateRecord(key, value)
		if err != nil {
			t.Fatal(err)
		}
		s.Apply(0, r)
		replay.Apply(d)
		kinds = append(kinds, r.Kind)
	}
	first := Write{LeaderEpoch: 1, StartOffset: 0, Batches: []StateBatch{{First: 0, Last: 9, State: Available, DeliveryCount: 1}}}
	if r, err := s.Prepare(0, testKey, first, 2, now); !errors.Is(err, ErrUninitialized) {
		t.Fatalf("write before initialization: %+v, %v", r.State, err)
	}
	write(Write{Initialize: true, LeaderEpoch: -1, StartOffset: 0})
	write(first)
	write(Write{LeaderEpoch: 1, StartOffset: 0, Batches: []StateBatch{{First: 0, Last: 4, State: Acknowledged, DeliveryCount: 1}}})
	write(Write{LeaderEpoch: -1, StartOffset: 5, Batches: []StateBatch{{First: 5, Last: 5, State: Available, DeliveryCount: 2}}})
	write(Write{LeaderEpoch: 2, StartOffset: -1, Batches: []StateBatch{{First: 9, Last: 9, State: Archived, DeliveryCount: 1}}})
	if want := []RecordKind{KindSnapshot, KindUpdate, KindUpdate, KindSnapshot, KindUpdate}; !reflect.DeepEqual(kinds, want) {
		t.Fatalf("kinds %v, want %v", kinds, want)
	}
	got := s.Get(0, testKey)
	want := []StateBatch{{First: 5, Last: 5, State: Available, DeliveryCount: 2}, {First: 6, Last: 8, State: Available, DeliveryCount: 1}, {First: 9, Last: 9, State: Archived, DeliveryCount: 1}}
	if got.StartOffset != 5 || got.LeaderEpoch != 2 || got.SnapshotEpoch != 1 || !reflect.DeepEqual(got.Batches, want) {
		t.Fatalf("state %+v", got)
	}
	if r := replay.m[testKey].state; !reflect.DeepEqual(r, got) {
		t.Fatalf("replayed %+v, stored %+v", r, got)
	}
	if _, _, err := s.Read(0, StateKey{Group: "other"}, 2, 2, now); !errors.Is(err, ErrUninitialized) {
		t.Fatalf("read of a key never initialized: %v", err)
	}
	if _, err := s.Prepare(0, testKey, Write{LeaderEpoch: 1, StartOffset: -1}, 2, now); !errors.Is(err, ErrFencedLeaderEpoch) {
		t.Fatalf("older leader epoch: %v", err)
	}
	r, err := s.Prepare(0, testKey, Write{Initialize: true, StateEpoch: 1, LeaderEpoch: -1, StartOffset: 50}, 2, now)
	if err != nil || r.Kind != KindSnapshot || r.State.StartOffset != 50 || len(r.State.Batches) != 0 || r.State.SnapshotEpoch != 2 || r.State.LeaderEpoch != 2 {
		t.Fatalf("initialize: %+v %v", r.State, err)
	}
	s.Apply(0, r)
	if _, err := s.Prepare(0, testKey, Write{StateEpoch: 0, LeaderEpoch: 3, StartOffset: -1}, 2, now); !errors.Is(err, ErrFencedStateEpoch) {
		t.Fatalf("older state epoch: %v", err)
	}
	if _, err := s.Prepare(1, testKey, Write{}, 2, now); !errors.Is(err, ErrNotLoaded) {
		t.Fatalf("unloaded: %v", err)
	}
	s.Apply(0, StateRecord{Key: testKey, Kind: KindSnapshot})
	if s.Has(0, testKey) {
		t.Fatal("tombstone kept the state")
	}
}

// TestStoreRead: ReadShareGroupState as Kafka's ShareCoordinatorShard
// answers it: the state as it is, an older leader epoch fenced, a newer one
// recorded by a record written before the answer (so that the writes of
// the leader it replaced are fenced), -1 neither checked nor recorded.
func TestStoreRead(t *testing.T) {
	s := NewStore()
	s.Load(0, NewShard())
	now := time.UnixMilli(1700000000000)
	apply := func(w Write) {
		t.Helper()
		r, err := s.Prepare(0, testKey, w, 500, now)
		if err != nil {
			t.Fatal(err)
		}
		s.Apply(0, r)
	}
	apply(Write{Initialize: true, StartOffset: 7})
	apply(Write{LeaderEpoch: 3, StartOffset: 7, Batches: []StateBatch{{First: 7, Last: 8, State: Acknowledged, DeliveryCount: 1}}})
	for _, tc := range []struct {
		epoch  int32
		err    error
		record bool
	}{
		{epoch: 3},
		{epoch: -1},
		{epoch: 2, err: ErrFencedLeaderEpoch},
		{epoch: 4, record: true},
	} {
		st, rec, err := s.Read(0, testKey, tc.epoch, 500, now)
		if !errors.Is(err, tc.err) || (rec != nil) != tc.record {
			t.Fatalf("read at leader epoch %d: record %+v, %v; want record %v, %v", tc.epoch, rec, err, tc.record, tc.err)
		}
		if err == nil && (st.StartOffset != 7 || len(st.Batches) != 1) {
			t.Fatalf("read at leader epoch %d: %+v", tc.epoch, st)
		}
		if rec != nil {
			if rec.Kind != KindUpdate || rec.State.LeaderEpoch != tc.epoch || len(rec.State.Batches) != 0 {
				t.Fatalf("leader epoch record %+v", rec.State)
			}
			s.Apply(0, *rec)
		}
	}
	if _, err := s.Prepare(0, testKey, Write{LeaderEpoch: 3, StartOffset: -1}, 500, now); !errors.Is(err, ErrFencedLeaderEpoch) {
		t.Fatalf("write of the leader a read replaced: %v", err)
	}
	if st := s.Get(0, testKey); st.LeaderEpoch != 4 || st.StartOffset != 7 || len(st.Batches) != 1 {
		t.Fatalf("state after the leader epoch record: %+v", st)
	}
}

func FuzzDecodeStateRecord(f *testing.F) {
	k := StateKey{Group: "g", Partition: 1}
	st := &State{StartOffset: 3, Batches: []StateBatch{{First: 3, Last: 9, State: Archived, DeliveryCount: 5}}}
	for _, kind := range []RecordKind{KindSnapshot, KindUpdate} {
		key, value := EncodeStateRecord(StateRecord{Key: k, Kind: kind, State: st})
		f.Add(key, value)
	}
	key, _ := EncodeStateRecord(StateRecord{Key: k})
	f.Add(key, []byte(nil))
	f.Fuzz(func(t *testing.T, key, value []byte) {
		r, err := DecodeStateRecord(key, value)
		if err != nil {
			return
		}
		k2, v2 := EncodeStateRecord(r)
		r2, err := DecodeStateRecord(k2, v2)
		if err != nil || !reflect.DeepEqual(r, r2) {
			t.Fatalf("re-encoding differs: %+v %+v %v", r, r2, err)
		}
		NewShard().Apply(r)
	})
}

// TestMergeTwo: the one-pass merge of two sorted lists gives what the
// general sweep gives, on random lists with overlaps, gaps and ties.
func TestMergeTwo(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	list := func() []StateBatch {
		var out []StateBatch
		off := int64(rng.IntN(5))
		for range rng.IntN(8) {
			n := int64(1 + rng.IntN(6))
			out = append(out, StateBatch{First: off, Last: off + n - 1, State: []RecordState{Available, Acknowledged, Archived}[rng.IntN(3)], DeliveryCount: int16(rng.IntN(3))})
			off += n + int64(rng.IntN(3))
		}
		return out
	}
	for i := range 5000 {
		a, b := list(), list()
		start := int64(rng.IntN(12))
		var all []StateBatch
		for _, x := range append(slices.Clone(a), b...) {
			if x.Last >= start {
				x.First = max(x.First, start)
				all = append(all, x)
			}
		}
		var want []StateBatch
		if len(all) > 0 {
			want = sweep(all)
		}
		if got := Combine(start, a, b); !slices.Equal(got, want) {
			t.Fatalf("case %d: merge of %+v and %+v from %d: %+v, want %+v", i, a, b, start, got, want)
		}
	}
}
