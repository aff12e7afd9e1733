package quorum

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsahq/samsa/internal/metadata"
	"github.com/samsahq/samsa/internal/record"
)

func TestEntryEncoding(t *testing.T) {
	v := "1"
	recs := []metadata.Record{
		metadata.TopicRecord{Name: "t", ID: metadata.UUID{1}},
		metadata.PartitionRecord{TopicID: metadata.UUID{1}, Partition: 0, Replicas: []int32{1, 2}, ISR: []int32{1, 2}, Leader: 1},
		metadata.ConfigRecord{ResourceType: metadata.ResourceTopic, ResourceName: "t", Name: "retention.ms", Value: &v},
	}
	for _, n := range []int{1, len(recs)} {
		b, err := encodeEntry(recs[:n], 42)
		if err != nil {
			t.Fatal(err)
		}
		h, err := checkEntryData(b)
		if err != nil {
			t.Fatalf("%d records: %v", n, err)
		}
		if h.NumRecords != int32(n) || h.LastOffsetDelta != int32(n-1) {
			t.Fatalf("%d records: header %+v", n, h)
		}
		got, err := decodeBatch(b)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, recs[:n]) {
			t.Fatalf("%d records: decoded %v", n, got)
		}
	}
	// An entry is what Local writes.
	local, err := encodeBatch(recs, 42)
	if err != nil {
		t.Fatal(err)
	}
	entry, _ := encodeEntry(recs, 42)
	if string(local) != string(entry) {
		t.Fatalf("entry and Local batch differ")
	}
	err = record.Records(entry, func(r record.Record) error {
		if string(r.Key) != recs[r.OffsetDelta].Type() {
			t.Fatalf("record %d key %q", r.OffsetDelta, r.Key)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestLeaderChangeBatch(t *testing.T) {
	b, err := leaderChangeBatch(7, 3, 2, []int32{1, 2, 3}, 42)
	if err != nil {
		t.Fatal(err)
	}
	h, err := record.Validate(b)
	if err != nil {
		t.Fatal(err)
	}
	if !h.IsControl() || h.BaseOffset != 7 || h.PartitionLeaderEpoch != 3 || h.LastOffsetDelta != 0 {
		t.Fatalf("header %+v", h)
	}
	if recs, err := decodeBatch(b); recs != nil || err != nil {
		t.Fatalf("decodeBatch of a control batch: %v %v", recs, err)
	}
	if _, err := checkEntryData(b); !errors.Is(err, ErrFormat) {
		t.Fatalf("control batch as entry data: %v", err)
	}
	err = record.Records(b, func(r record.Record) error {
		var m kmsg.LeaderChangeMessage
		if err := m.ReadFrom(r.Value); err != nil {
			return err
		}
		if m.LeaderID != 2 || len(m.Voters) != 3 || m.Voters[2].VoterID != 3 {
			t.Fatalf("message %+v", m)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestCheckEntryData(t *testing.T) {
	good, _ := encodeEntry([]metadata.Record{seqRecord(1), seqRecord(2)}, 0)
	corrupt := append([]byte(nil), good...)
	corrupt[len(corrupt)-1] ^= 1
	gap, err := record.Build(record.Spec{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, []record.Record{{OffsetDelta: 0, Key: []byte("producer_ids"), Value: []byte("{}")}, {OffsetDelta: 2, Key: []byte("producer_ids"), Value: []byte("{}")}})
	if err != nil {
		t.Fatal(err)
	}
	empty, _ := record.Build(record.Spec{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, nil)
	for name, data := range map[string][]byte{
		"crc":        corrupt,
		"truncated":  good[:len(good)-1],
		"trailing":   append(append([]byte(nil), good...), 0),
		"garbage":    []byte("hello"),
		"offset gap": gap,
		"no records": empty,
	} {
		if _, err := checkEntryData(data); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if _, err := checkEntryData(nil); err != nil {
		t.Fatal(err)
	}
	big := strings.Repeat("x", MaxEntryBytes)
	if _, err := encodeEntry([]metadata.Record{metadata.ConfigRecord{Name: "k", Value: &big}}, 0); !errors.Is(err, ErrEntryTooLarge) {
		t.Fatalf("huge entry: %v", err)
	}
}
