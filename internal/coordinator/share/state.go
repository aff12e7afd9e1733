package share

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"unicode/utf16"
)

// StateTopic is the internal topic of durable share-partition state
// (KIP-932's share coordinator).
const StateTopic = "__share_group_state"

// Defaults of the share coordinator's topic (Kafka's
// share.coordinator.state.topic.num.partitions and
// share.coordinator.state.topic.replication.factor).
const (
	StateTopicPartitions        = 50
	StateTopicReplicationFactor = 3
)

// The DeliveryState values of ReadShareGroupState/WriteShareGroupState
// state batches (Kafka's RecordState ids).
const (
	deliveryAvailable    int8 = 0
	deliveryAcknowledged int8 = 2
	deliveryArchived     int8 = 4
)

// DeliveryState returns the wire id of a record state in a state batch
// (Acquired is written as Available: a lock does not survive a failover).
func DeliveryState(s RecordState) int8 {
	switch s {
	case Acknowledged:
		return deliveryAcknowledged
	case Archived:
		return deliveryArchived
	}
	return deliveryAvailable
}

// RecordStateOf is the inverse of DeliveryState; ok false for an id it does
// not know.
func RecordStateOf(id int8) (RecordState, bool) {
	switch id {
	case deliveryAvailable:
		return Available, true
	case deliveryAcknowledged:
		return Acknowledged, true
	case deliveryArchived:
		return Archived, true
	}
	return 0, false
}

// StateKey names the durable state of one share-partition.
type StateKey struct {
	Group     string
	TopicID   [16]byte
	Partition int32
}

// StatePartition returns the partition of __share_group_state holding k's
// state: abs(hash("group:topicId:partition")) % partitions, the string hash
// being Java's String.hashCode as Kafka's SharePartitionKey uses (the topic
// id in Kafka's base64 form).
func StatePartition(k StateKey, partitions int32) int32 {
	s := fmt.Sprintf("%s:%s:%d", k.Group, kafkaUUID(k.TopicID), k.Partition)
	var h int32
	for _, u := range utf16.Encode([]rune(s)) {
		h = 31*h + int32(u)
	}
	if h == -1<<31 {
		h = 0
	}
	if h < 0 {
		h = -h
	}
	return h % partitions
}

func kafkaUUID(id [16]byte) string {
	const enc = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	// URL-safe base64 without padding, as Kafka's Uuid.toString.
	out := make([]byte, 0, 22)
	var buf uint32
	bits := 0
	for _, b := range id {
		buf = buf<<8 | uint32(b)
		bits += 8
		for bits >= 6 {
			bits -= 6
			out = append(out, enc[(buf>>uint(bits))&0x3f])
		}
	}
	if bits > 0 {
		out = append(out, enc[(buf<<uint(6-bits))&0x3f])
	}
	return string(out)
}

// State is the durable state of one share-partition: Kafka's ShareSnapshot
// (state epoch, start offset, the in-flight state batches).
type State struct {
	StateEpoch  int32
	LeaderEpoch int32
	StartOffset int64
	Batches     []StateBatch
}

// ErrBadStateRecord is wrapped by DecodeStateRecord for bytes that are not
// a share state record.
var ErrBadStateRecord = errors.New("share: malformed __share_group_state record")

// stateKeyVersion is the first field of a record key of __share_group_state:
// Kafka's ShareSnapshotKey type (0).
const stateKeyVersion int16 = 0

// EncodeStateRecord returns the key and value of the __share_group_state
// record holding s for k; a nil s is a tombstone (nil value).
//
// Key:   int16 type (0, ShareSnapshot), int16 group length, group bytes,
// 16-byte topic id, int32 partition.
// Value: int16 version (0), int32 state epoch, int32 leader epoch, int64
// start offset, int32 batch count, then per batch int64 first offset, int64
// last offset, int8 delivery state, int16 delivery count. Big-endian
// throughout. This is Samsa's schema, not Kafka's flexible-versions
// ShareSnapshotValue.
func EncodeStateRecord(k StateKey, s *State) (key, value []byte) {
	key = binary.BigEndian.AppendUint16(nil, uint16(stateKeyVersion))
	key = binary.BigEndian.AppendUint16(key, uint16(len(k.Group)))
	key = append(key, k.Group...)
	key = append(key, k.TopicID[:]...)
	key = binary.BigEndian.AppendUint32(key, uint32(k.Partition))
	if s == nil {
		return key, nil
	}
	value = binary.BigEndian.AppendUint16(nil, 0)
	value = binary.BigEndian.AppendUint32(value, uint32(s.StateEpoch))
	value = binary.BigEndian.AppendUint32(value, uint32(s.LeaderEpoch))
	value = binary.BigEndian.AppendUint64(value, uint64(s.StartOffset))
	value = binary.BigEndian.AppendUint32(value, uint32(len(s.Batches)))
	for _, b := range s.Batches {
		value = binary.BigEndian.AppendUint64(value, uint64(b.First))
		value = binary.BigEndian.AppendUint64(value, uint64(b.Last))
		value = append(value, byte(DeliveryState(b.State)))
		value = binary.BigEndian.AppendUint16(value, uint16(b.DeliveryCount))
	}
	return key, value
}

// stateBatchSize is the encoded size of one state batch.
const stateBatchSize = 8 + 8 + 1 + 2

// DecodeStateRecord parses a __share_group_state record; a nil value is a
// tombstone (nil State). Errors wrap ErrBadStateRecord; it never panics
// and allocates no more than the input's length allows.
func DecodeStateRecord(key, value []byte) (StateKey, *State, error) {
	var k StateKey
	if len(key) < 4 {
		return k, nil, fmt.Errorf("%w: key of %d bytes", ErrBadStateRecord, len(key))
	}
	if v := int16(binary.BigEndian.Uint16(key)); v != stateKeyVersion {
		return k, nil, fmt.Errorf("%w: key type %d", ErrBadStateRecord, v)
	}
	n := int(binary.BigEndian.Uint16(key[2:]))
	if len(key) != 4+n+16+4 {
		return k, nil, fmt.Errorf("%w: key of %d bytes for a group of %d", ErrBadStateRecord, len(key), n)
	}
	k.Group = string(key[4 : 4+n])
	copy(k.TopicID[:], key[4+n:])
	k.Partition = int32(binary.BigEndian.Uint32(key[4+n+16:]))
	if value == nil {
		return k, nil, nil
	}
	const head = 2 + 4 + 4 + 8 + 4
	if len(value) < head {
		return k, nil, fmt.Errorf("%w: value of %d bytes", ErrBadStateRecord, len(value))
	}
	if v := binary.BigEndian.Uint16(value); v != 0 {
		return k, nil, fmt.Errorf("%w: value version %d", ErrBadStateRecord, v)
	}
	s := &State{
		StateEpoch:  int32(binary.BigEndian.Uint32(value[2:])),
		LeaderEpoch: int32(binary.BigEndian.Uint32(value[6:])),
		StartOffset: int64(binary.BigEndian.Uint64(value[10:])),
	}
	count := binary.BigEndian.Uint32(value[18:])
	rest := value[head:]
	if uint64(count)*stateBatchSize != uint64(len(rest)) {
		return k, nil, fmt.Errorf("%w: %d batches in %d bytes", ErrBadStateRecord, count, len(rest))
	}
	s.Batches = make([]StateBatch, count)
	for i := range s.Batches {
		b := rest[i*stateBatchSize:]
		st, ok := RecordStateOf(int8(b[16]))
		if !ok {
			return k, nil, fmt.Errorf("%w: delivery state %d", ErrBadStateRecord, int8(b[16]))
		}
		s.Batches[i] = StateBatch{
			First:         int64(binary.BigEndian.Uint64(b)),
			Last:          int64(binary.BigEndian.Uint64(b[8:])),
			State:         st,
			DeliveryCount: int16(binary.BigEndian.Uint16(b[17:])),
		}
	}
	return k, s, nil
}

// Store is the share coordinator's view of the partitions of
// __share_group_state this broker leads: the latest state of every
// share-partition in them. Safe for concurrent use.
type Store struct {
	mu     sync.Mutex // guards states and groups
	states map[int32]map[StateKey]*State
	groups groupIndex // the keys of states by group (storegroups.go)
}

// NewStore returns an empty store.
func NewStore() *Store { return &Store{states: map[int32]map[StateKey]*State{}, groups: groupIndex{}} }

// Load replaces the states of partition p (a partition loaded).
func (s *Store) Load(p int32, states map[StateKey]*State) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.groups.drop(p, s.states[p])
	s.states[p] = states
	s.groups.add(p, states)
}

// Unload forgets partition p (leadership lost).
func (s *Store) Unload(p int32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.groups.drop(p, s.states[p])
	delete(s.states, p)
}

// Loaded reports whether partition p is loaded.
func (s *Store) Loaded(p int32) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.states[p]
	return ok
}

// Get returns the state of k kept in partition p; nil when none.
func (s *Store) Get(p int32, k StateKey) *State {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.states[p][k]
}

// Has reports whether partition p holds a state for k.
func (s *Store) Has(p int32, k StateKey) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.states[p][k]
	return ok
}

// Put records a state written to partition p (nil deletes).
func (s *Store) Put(p int32, k StateKey, st *State) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.states[p]
	if m == nil {
		return
	}
	if st == nil {
		delete(m, k)
		s.groups.remove(k)
	} else {
		m[k] = st
		s.groups.put(p, k)
	}
}
