package group

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"slices"
)

// This file is the codec of the records of KIP-932 share groups in
// __consumer_offsets, in Kafka 4.1+'s schemas (group-coordinator's
// ShareGroup*Key/Value.json, "coordinator-key" apiKey = the key version
// written first). Keys and values are laid out as the consumer group
// records (consumerrecords.go): keys not flexible, values version 0 and
// flexible.
//
//	key 10 ShareGroupMemberMetadataKey            group, member id  value: rack id (nullable), client id,
//	                                                                client host, subscribed topic names []
//	key 11 ShareGroupMetadataKey                  group             value: epoch int32, metadata hash int64
//	key 12 ShareGroupTargetAssignmentMetadataKey  group             value: assignment epoch int32
//	key 13 ShareGroupTargetAssignmentMemberKey    group, member id  value: [topic id uuid, partitions []int32]
//	key 14 ShareGroupCurrentMemberAssignmentKey   group, member id  value: member epoch, previous member
//	                                                                epoch int32, state int8, assigned
//	                                                                [topic id, partitions []int32]
//	key 15 ShareGroupStatePartitionMetadataKey    group             value: initializing [topic id, topic name,
//	                                                                partitions []int32], initialized (same),
//	                                                                deleting [topic id, topic name]
//
// Key 9 (ShareGroupPartitionMetadata, Kafka 4.0's early access, replaced
// by the metadata hash of key 11 in 4.1) is read as an unknown record and
// skipped, as Kafka 4.1+ skips it.

// Record types (key versions) of share groups.
const (
	ShareMemberMetadataType  = 10
	ShareMetadataType        = 11
	ShareTargetMetadataType  = 12
	ShareTargetMemberType    = 13
	ShareCurrentMemberType   = 14
	ShareStatePartitionsType = 15
	sharePartitionMetadata   = 9 // Kafka 4.0 only
)

// ShareTopic is a topic of a ShareGroupStatePartitionMetadata value:
// its id, name and, for the initializing and initialized topics, the
// partitions (sorted).
type ShareTopic struct {
	ID         [16]byte
	Name       string
	Partitions []int32
}

// ShareRecord is a record of a share group (KIP-932) in __consumer_offsets:
// Type is the key version (10 to 15); Group the group id; MemberID the
// member of types 10, 13 and 14. A tombstone has Tombstone set and no
// value fields. The value fields used by each type:
//
//	10 RackID, ClientID, ClientHost, Topics
//	11 Epoch (group epoch), MetadataHash
//	12 Epoch (assignment epoch)
//	13 Assignment (target)
//	14 Epoch (member epoch), PrevEpoch, State (0: stable), Assignment
//	15 Initializing, Initialized, Deleting
type ShareRecord struct {
	Type      int16
	Group     string
	MemberID  string
	Tombstone bool

	RackID               *string
	ClientID, ClientHost string
	Topics               []string

	Epoch, PrevEpoch int32
	MetadataHash     int64
	State            int8
	Assignment       map[[16]byte][]int32

	Initializing, Initialized, Deleting []ShareTopic
}

func shareHasMember(typ int16) bool {
	return typ == ShareMemberMetadataType || typ == ShareTargetMemberType || typ == ShareCurrentMemberType
}

// Record encodes sr as a record of __consumer_offsets.
func (sr *ShareRecord) Record() Record {
	var key []byte
	if shareHasMember(sr.Type) {
		key = cgKey(sr.Type, sr.Group, sr.MemberID)
	} else {
		key = cgKey(sr.Type, sr.Group)
	}
	if sr.Tombstone {
		return Record{Key: key}
	}
	v := valueHeader()
	switch sr.Type {
	case ShareMemberMetadataType:
		v = appendCompactNullable(v, sr.RackID)
		v = appendCompactString(v, sr.ClientID)
		v = appendCompactString(v, sr.ClientHost)
		v = binary.AppendUvarint(v, uint64(len(sr.Topics))+1)
		for _, t := range sr.Topics {
			v = appendCompactString(v, t)
		}
	case ShareMetadataType:
		v = binary.BigEndian.AppendUint32(v, uint32(sr.Epoch))
		v = binary.BigEndian.AppendUint64(v, uint64(sr.MetadataHash))
	case ShareTargetMetadataType:
		v = binary.BigEndian.AppendUint32(v, uint32(sr.Epoch))
	case ShareTargetMemberType:
		v = appendAssignment(v, sr.Assignment)
	case ShareCurrentMemberType:
		v = binary.BigEndian.AppendUint32(v, uint32(sr.Epoch))
		v = binary.BigEndian.AppendUint32(v, uint32(sr.PrevEpoch))
		v = append(v, byte(sr.State))
		v = appendAssignment(v, sr.Assignment)
	case ShareStatePartitionsType:
		v = appendShareTopics(v, sr.Initializing, true)
		v = appendShareTopics(v, sr.Initialized, true)
		v = appendShareTopics(v, sr.Deleting, false)
	}
	return Record{Key: key, Value: append(v, 0)} // no tagged fields
}

func appendShareTopics(b []byte, ts []ShareTopic, partitions bool) []byte {
	b = binary.AppendUvarint(b, uint64(len(ts))+1)
	for _, t := range ts {
		b = append(b, t.ID[:]...)
		b = appendCompactString(b, t.Name)
		if partitions {
			b = binary.AppendUvarint(b, uint64(len(t.Partitions))+1)
			for _, p := range t.Partitions {
				b = binary.BigEndian.AppendUint32(b, uint32(p))
			}
		}
		b = append(b, 0)
	}
	return b
}

func (r *cgReader) shareTopics(partitions bool) []ShareTopic {
	n := r.arrayLen(16 + 1 + 1)
	var out []ShareTopic
	for range max(n, 0) {
		var t ShareTopic
		copy(t.ID[:], r.bytes(16))
		t.Name = r.compactString()
		if partitions {
			np := r.arrayLen(4)
			for range max(np, 0) {
				t.Partitions = append(t.Partitions, r.int32())
			}
			slices.Sort(t.Partitions)
			t.Partitions = slices.Compact(t.Partitions)
		}
		r.tags()
		if r.err != nil {
			return nil
		}
		out = append(out, t)
	}
	return out
}

// decodeShare parses a record of a share group whose key version typ is 9
// to 15. Errors wrap ErrCorruptRecord, or ErrUnknownRecord for type 9 and
// value versions other than 0.
func decodeShare(typ int16, rec Record) (*ShareRecord, error) {
	if typ == sharePartitionMetadata {
		return nil, fmt.Errorf("%w: share group partition metadata (Kafka 4.0, not used)", ErrUnknownRecord)
	}
	group, member, r, err := readKeyAndVersion("share group", typ, rec, shareHasMember(typ))
	if err != nil {
		return nil, err
	}
	sr := &ShareRecord{Type: typ, Group: group, MemberID: member}
	if r == nil {
		sr.Tombstone = true
		return sr, nil
	}
	switch typ {
	case ShareMemberMetadataType:
		sr.RackID = r.compactNullable()
		sr.ClientID = r.compactString()
		sr.ClientHost = r.compactString()
		n := r.arrayLen(1)
		for range max(n, 0) {
			sr.Topics = append(sr.Topics, r.compactString())
		}
	case ShareMetadataType:
		sr.Epoch = r.int32()
		hi, lo := r.int32(), r.int32()
		sr.MetadataHash = int64(uint64(uint32(hi))<<32 | uint64(uint32(lo)))
	case ShareTargetMetadataType:
		sr.Epoch = r.int32()
	case ShareTargetMemberType:
		sr.Assignment = r.assignment()
	case ShareCurrentMemberType:
		sr.Epoch = r.int32()
		sr.PrevEpoch = r.int32()
		sr.State = r.int8()
		sr.Assignment = r.assignment()
	case ShareStatePartitionsType:
		sr.Initializing = r.shareTopics(true)
		sr.Initialized = r.shareTopics(true)
		sr.Deleting = r.shareTopics(false)
	}
	r.tags()
	if r.err != nil {
		return nil, fmt.Errorf("%w: share group value %d: %v", ErrCorruptRecord, typ, r.err)
	}
	return sr, nil
}

// shareKey identifies a share group record's key within its group in a
// load.
type shareKey struct {
	typ    int16
	member string
}

// applyShare folds a share group record into the load: the latest record
// of each key wins, a tombstone removes it. A share group's metadata
// record wins over the classic or consumer group records of the same id
// written before it, and the other way round (one id names one group).
func (ls *loadState) applyShare(sr *ShareRecord) {
	if ls.share == nil {
		ls.share = map[string]map[shareKey]*ShareRecord{}
	}
	g := ls.share[sr.Group]
	k := shareKey{sr.Type, sr.MemberID}
	if sr.Tombstone {
		delete(g, k)
		if len(g) == 0 {
			delete(ls.share, sr.Group)
		}
		return
	}
	if sr.Type == ShareMetadataType {
		delete(ls.groups, sr.Group)
		delete(ls.consumer, sr.Group)
	}
	if g == nil {
		g = map[shareKey]*ShareRecord{}
		ls.share[sr.Group] = g
	}
	g[k] = sr
}

// dropShare forgets the share group id of the load (a classic or
// consumer group written under its id later).
func (ls *loadState) dropShare(id string) { delete(ls.share, id) }

// shareRecords returns the share group records of the load, by group,
// type and member: what Config.ShareLoaded receives.
func (ls *loadState) shareRecords() []ShareRecord {
	var out []ShareRecord
	for _, g := range ls.share {
		for _, sr := range g {
			out = append(out, *sr)
		}
	}
	slices.SortFunc(out, func(a, b ShareRecord) int {
		switch {
		case a.Group != b.Group:
			return cmp.Compare(a.Group, b.Group)
		case a.Type != b.Type:
			return int(a.Type) - int(b.Type)
		}
		return cmp.Compare(a.MemberID, b.MemberID)
	})
	return out
}
