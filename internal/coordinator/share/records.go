package share

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kbin"
)

// The records of __share_group_state, in Kafka's schemas (the share
// coordinator's ShareSnapshotKey/Value and ShareUpdateKey/Value, Kafka 4.1+).
//
// Key: int16 record type (0 ShareSnapshot, 1 ShareUpdate), then version 0 of
// the key, not flexible: int16 group length, group bytes (UTF-8), 16-byte
// topic id, int32 partition. Big-endian.
//
// ShareSnapshotValue: int16 version (0), then flexible (KIP-482) fields:
// int32 snapshot epoch, int32 state epoch, int32 leader epoch, int64 start
// offset, int64 create timestamp (ms), int64 write timestamp (ms), compact
// array of state batches (uvarint count+1; each int64 first offset, int64
// last offset, int8 delivery state 0 Available/2 Acknowledged/4 Archived,
// int16 delivery count, uvarint 0 tagged fields), uvarint tagged fields.
//
// ShareUpdateValue: int16 version (0), int32 snapshot epoch, int32 leader
// epoch, int64 start offset (-1: unchanged), the same state batch array,
// tagged fields. An update is merged into the latest state of its key.
//
// A tombstone is a ShareSnapshot key with a nil value. Tagged fields (Kafka
// 4.2's DeliveryCompleteCount, tag 0) are skipped when read and not
// written.
//
// Before this schema, Samsa wrote the same key with a value of its own
// (int16 version 0, int32 state epoch, int32 leader epoch, int64 start
// offset, int32 batch count, 19 bytes per batch, no tagged fields);
// DecodeStateRecord still reads such values.

// RecordKind is the type of a __share_group_state record (the key's first
// int16, Kafka's coordinator record type).
type RecordKind int16

// The record types of __share_group_state.
const (
	KindSnapshot RecordKind = 0 // ShareSnapshotKey/Value: the whole state
	KindUpdate   RecordKind = 1 // ShareUpdateKey/Value: a change merged into it
)

// State is the durable state of one share-partition: Kafka's
// ShareSnapshotValue.
type State struct {
	// SnapshotEpoch counts the snapshots of the key (an update carries
	// the epoch of the snapshot it applies to).
	SnapshotEpoch int32
	// StateEpoch is bumped when the state is initialized anew
	// (InitializeShareGroupState, AlterShareGroupOffsets).
	StateEpoch  int32
	LeaderEpoch int32 // of the share-partition's leader that wrote it
	StartOffset int64 // the share-partition start offset (SPSO)
	// CreateTimestamp and WriteTimestamp are Unix milliseconds: when the
	// snapshot was created and written; zero in updates.
	CreateTimestamp, WriteTimestamp int64
	// Batches are the in-flight records at or past StartOffset, sorted and
	// not overlapping.
	Batches []StateBatch
}

// StateRecord is one decoded record of __share_group_state.
type StateRecord struct {
	Key  StateKey
	Kind RecordKind
	// State is the value: nil for a tombstone. In an update, StartOffset
	// -1 and LeaderEpoch -1 mean unchanged, and StateEpoch and the
	// timestamps are zero.
	State *State
}

// ErrBadStateRecord is wrapped by DecodeStateRecord for bytes that are not
// a share state record.
var ErrBadStateRecord = errors.New("share: malformed __share_group_state record")

// EncodeStateRecord returns the key and value of r (a nil State is a
// tombstone: nil value).
func EncodeStateRecord(r StateRecord) (key, value []byte) {
	key = binary.BigEndian.AppendUint16(make([]byte, 0, 2+2+len(r.Key.Group)+16+4), uint16(r.Kind))
	key = kbin.AppendString(key, r.Key.Group)
	key = kbin.AppendUuid(key, r.Key.TopicID)
	key = kbin.AppendInt32(key, r.Key.Partition)
	s := r.State
	if s == nil {
		return key, nil
	}
	value = make([]byte, 0, 2+40+1+len(s.Batches)*20+1)
	value = kbin.AppendInt16(value, 0)
	value = kbin.AppendInt32(value, s.SnapshotEpoch)
	if r.Kind == KindSnapshot {
		value = kbin.AppendInt32(value, s.StateEpoch)
	}
	value = kbin.AppendInt32(value, s.LeaderEpoch)
	value = kbin.AppendInt64(value, s.StartOffset)
	if r.Kind == KindSnapshot {
		value = kbin.AppendInt64(value, s.CreateTimestamp)
		value = kbin.AppendInt64(value, s.WriteTimestamp)
	}
	value = kbin.AppendCompactArrayLen(value, len(s.Batches))
	for _, b := range s.Batches {
		value = kbin.AppendInt64(value, b.First)
		value = kbin.AppendInt64(value, b.Last)
		value = kbin.AppendInt8(value, DeliveryState(b.State))
		value = kbin.AppendInt16(value, b.DeliveryCount)
		value = append(value, 0) // no tagged fields
	}
	return key, append(value, 0)
}

// DecodeStateRecord parses a record of __share_group_state: Kafka's
// ShareSnapshot and ShareUpdate records, and Samsa's earlier snapshot
// value. Errors wrap ErrBadStateRecord; it never panics and allocates no
// more than the input's length allows. The result does not alias the
// input.
func DecodeStateRecord(key, value []byte) (StateRecord, error) {
	var r StateRecord
	kr := kbin.Reader{Src: key}
	r.Kind = RecordKind(kr.Int16())
	r.Key.Group = kr.String()
	r.Key.TopicID = kr.Uuid()
	r.Key.Partition = kr.Int32()
	if err := kr.Complete(); err != nil || len(kr.Src) != 0 {
		return r, fmt.Errorf("%w: key of %d bytes", ErrBadStateRecord, len(key))
	}
	if r.Kind != KindSnapshot && r.Kind != KindUpdate {
		return r, fmt.Errorf("%w: record type %d", ErrBadStateRecord, r.Kind)
	}
	if value == nil {
		return r, nil
	}
	s, err := decodeValue(r.Kind, value)
	if err != nil && r.Kind == KindSnapshot {
		if old, lerr := decodeLegacyValue(value); lerr == nil {
			s, err = old, nil
		}
	}
	r.State = s
	return r, err
}

func decodeValue(kind RecordKind, value []byte) (*State, error) {
	vr := kbin.Reader{Src: value}
	if v := vr.Int16(); v != 0 {
		return nil, fmt.Errorf("%w: value version %d", ErrBadStateRecord, v)
	}
	s := &State{SnapshotEpoch: vr.Int32()}
	if kind == KindSnapshot {
		s.StateEpoch = vr.Int32()
	}
	s.LeaderEpoch = vr.Int32()
	s.StartOffset = vr.Int64()
	if kind == KindSnapshot {
		s.CreateTimestamp = vr.Int64()
		s.WriteTimestamp = vr.Int64()
	}
	n := vr.CompactArrayLen()
	if n < 0 || int(n) > len(vr.Src)/20 {
		return nil, fmt.Errorf("%w: %d state batches in %d bytes", ErrBadStateRecord, n, len(vr.Src))
	}
	s.Batches = make([]StateBatch, 0, n)
	for range n {
		b := StateBatch{First: vr.Int64(), Last: vr.Int64()}
		id := vr.Int8()
		b.DeliveryCount = vr.Int16()
		st, ok := RecordStateOf(id)
		if !ok && vr.Ok() {
			return nil, fmt.Errorf("%w: delivery state %d", ErrBadStateRecord, id)
		}
		b.State = st
		skipTags(&vr)
		s.Batches = append(s.Batches, b)
	}
	skipTags(&vr)
	if err := vr.Complete(); err != nil || len(vr.Src) != 0 {
		return nil, fmt.Errorf("%w: value of %d bytes", ErrBadStateRecord, len(value))
	}
	return s, nil
}

// skipTags reads past a tagged field section (KIP-482).
func skipTags(r *kbin.Reader) {
	for n := r.Uvarint(); n > 0 && r.Ok(); n-- {
		r.Uvarint()
		r.Span(int(r.Uvarint()))
	}
}

// legacyBatchSize is the size of a state batch in Samsa's earlier value.
const legacyBatchSize = 8 + 8 + 1 + 2

// decodeLegacyValue parses Samsa's earlier snapshot value (see the top of
// this file).
func decodeLegacyValue(value []byte) (*State, error) {
	const head = 2 + 4 + 4 + 8 + 4
	if len(value) < head || binary.BigEndian.Uint16(value) != 0 {
		return nil, fmt.Errorf("%w: value of %d bytes", ErrBadStateRecord, len(value))
	}
	s := &State{
		StateEpoch:  int32(binary.BigEndian.Uint32(value[2:])),
		LeaderEpoch: int32(binary.BigEndian.Uint32(value[6:])),
		StartOffset: int64(binary.BigEndian.Uint64(value[10:])),
	}
	count := binary.BigEndian.Uint32(value[18:])
	rest := value[head:]
	if uint64(count)*legacyBatchSize != uint64(len(rest)) {
		return nil, fmt.Errorf("%w: %d batches in %d bytes", ErrBadStateRecord, count, len(rest))
	}
	s.Batches = make([]StateBatch, count)
	for i := range s.Batches {
		b := rest[i*legacyBatchSize:]
		st, ok := RecordStateOf(int8(b[16]))
		if !ok {
			return nil, fmt.Errorf("%w: delivery state %d", ErrBadStateRecord, int8(b[16]))
		}
		s.Batches[i] = StateBatch{
			First:         int64(binary.BigEndian.Uint64(b)),
			Last:          int64(binary.BigEndian.Uint64(b[8:])),
			State:         st,
			DeliveryCount: int16(binary.BigEndian.Uint16(b[17:])),
		}
	}
	return s, nil
}
