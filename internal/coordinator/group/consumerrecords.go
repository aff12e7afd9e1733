package group

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
)

// This file is the codec of the records of KIP-848 consumer groups in
// __consumer_offsets, in Kafka's schemas (group-coordinator's
// ConsumerGroup*Key/Value.json; franz-go's kmsg has no types for them).
// Keys are not flexible: version int16 (the record type), then int16-length
// strings. Values are version int16 = 0 then a flexible body: compact
// strings and arrays (uvarint length+1, 0 for null), tagged fields
// (uvarint count, each tag, size, bytes) ending every struct.
//
//	key 3 ConsumerGroupMetadataKey            group                value: epoch int32
//	key 4 ConsumerGroupPartitionMetadataKey   group                (read and skipped; not written, as Kafka 4.1+)
//	key 5 ConsumerGroupMemberMetadataKey      group, member id     value: instance id, rack id (nullable),
//	                                                               client id, client host, subscribed topic names [],
//	                                                               subscribed topic regex (nullable), rebalance
//	                                                               timeout int32, server assignor (nullable)
//	key 6 ConsumerGroupTargetAssignmentMetadataKey group           value: assignment epoch int32
//	key 7 ConsumerGroupTargetAssignmentMemberKey group, member id  value: [topic id uuid, partitions []int32]
//	key 8 ConsumerGroupCurrentMemberAssignmentKey group, member id value: member epoch, previous member epoch int32,
//	                                                               state int8, assigned [topic id, partitions],
//	                                                               pending revocation [topic id, partitions]

// Record types (key versions) of consumer groups.
const (
	cgMetadataType         = 3
	cgPartitionMetadata    = 4
	cgMemberMetadataType   = 5
	cgTargetMetadataType   = 6
	cgTargetMemberType     = 7
	cgCurrentAssignmentTyp = 8
)

// topicID is a topic's id (UUID).
type topicID = [16]byte

// assignment is a set of partitions by topic id, each list sorted.
type assignment map[topicID][]int32

// ConsumerRecord is a decoded record of a KIP-848 consumer group. Type is
// the key version; Value is nil for a tombstone, else one of the value
// types below.
type ConsumerRecord struct {
	Type     int16
	Group    string
	MemberID string // types 5, 7, 8
	Value    any    // *cgMetadataValue, *cgMemberValue, *cgTargetMetadataValue, assignment, *cgCurrentValue; nil: tombstone
}

type cgMetadataValue struct{ epoch int32 }

type cgTargetMetadataValue struct{ epoch int32 }

type cgMemberValue struct {
	instanceID, rackID   *string
	clientID, clientHost string
	topics               []string
	regex                *string
	rebalanceTimeoutMs   int32
	assignor             *string
	classic              *classicMeta // tagged field 0, ClassicMemberMetadata
}

type cgCurrentValue struct {
	epoch, prevEpoch int32
	state            int8
	assigned         assignment
	revoking         assignment
}

// cgKey encodes the key of a consumer group record of type typ.
func cgKey(typ int16, group string, memberID ...string) []byte {
	b := binary.BigEndian.AppendUint16(nil, uint16(typ))
	b = appendString(b, group)
	for _, m := range memberID {
		b = appendString(b, m)
	}
	return b
}

func appendString(b []byte, s string) []byte {
	b = binary.BigEndian.AppendUint16(b, uint16(len(s)))
	return append(b, s...)
}

func appendCompactString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s))+1)
	return append(b, s...)
}

func appendCompactNullable(b []byte, s *string) []byte {
	if s == nil {
		return append(b, 0)
	}
	return appendCompactString(b, *s)
}

func appendAssignment(b []byte, a assignment) []byte {
	ids := a.topics()
	b = binary.AppendUvarint(b, uint64(len(ids))+1)
	for _, id := range ids {
		b = append(b, id[:]...)
		ps := a[id]
		b = binary.AppendUvarint(b, uint64(len(ps))+1)
		for _, p := range ps {
			b = binary.BigEndian.AppendUint32(b, uint32(p))
		}
		b = append(b, 0) // no tagged fields
	}
	return b
}

func valueHeader() []byte { return []byte{0, 0} } // value version 0

func cgMetadataRecord(group string, epoch int32) Record {
	v := binary.BigEndian.AppendUint32(valueHeader(), uint32(epoch))
	return Record{Key: cgKey(cgMetadataType, group), Value: append(v, 0)}
}

func cgTargetMetadataRecord(group string, epoch int32) Record {
	v := binary.BigEndian.AppendUint32(valueHeader(), uint32(epoch))
	return Record{Key: cgKey(cgTargetMetadataType, group), Value: append(v, 0)}
}

func cgMemberRecord(group string, m *cmember) Record {
	v := valueHeader()
	v = appendCompactNullable(v, m.instanceID)
	v = appendCompactNullable(v, m.rackID)
	v = appendCompactString(v, m.clientID)
	v = appendCompactString(v, m.clientHost)
	v = binary.AppendUvarint(v, uint64(len(m.topics))+1)
	for _, t := range m.topics {
		v = appendCompactString(v, t)
	}
	v = appendCompactNullable(v, m.regex)
	v = binary.BigEndian.AppendUint32(v, uint32(m.rebalanceTimeoutMs))
	v = appendCompactNullable(v, m.assignor)
	if m.classic == nil {
		return Record{Key: cgKey(cgMemberMetadataType, group, m.id), Value: append(v, 0)}
	}
	// Tagged field 0: ClassicMemberMetadata (session timeout, supported
	// protocols) of a member using the classic protocol. A nullable
	// struct: Kafka's generated code writes a marker byte first (1
	// present; the field is left out when null) and counts it in the
	// tagged field's size.
	cm := binary.BigEndian.AppendUint32(nil, uint32(m.classic.sessionTimeoutMs))
	cm = binary.AppendUvarint(cm, uint64(len(m.classic.protocols))+1)
	for _, p := range m.classic.protocols {
		cm = appendCompactString(cm, p.name)
		cm = binary.AppendUvarint(cm, uint64(len(p.metadata))+1)
		cm = append(cm, p.metadata...)
		cm = append(cm, 0)
	}
	cm = append(cm, 0)
	v = binary.AppendUvarint(v, 1)
	v = binary.AppendUvarint(v, 0)
	v = binary.AppendUvarint(v, uint64(len(cm))+1)
	v = append(v, 1)
	v = append(v, cm...)
	return Record{Key: cgKey(cgMemberMetadataType, group, m.id), Value: v}
}

func cgTargetMemberRecord(group, memberID string, a assignment) Record {
	v := appendAssignment(valueHeader(), a)
	return Record{Key: cgKey(cgTargetMemberType, group, memberID), Value: append(v, 0)}
}

func cgCurrentRecord(group string, m *cmember) Record {
	v := valueHeader()
	v = binary.BigEndian.AppendUint32(v, uint32(m.epoch))
	v = binary.BigEndian.AppendUint32(v, uint32(m.prevEpoch))
	v = append(v, byte(m.state))
	v = appendAssignment(v, m.assigned)
	v = appendAssignment(v, m.revoking)
	return Record{Key: cgKey(cgCurrentAssignmentTyp, group, m.id), Value: append(v, 0)}
}

// cgReader reads the bytes of a record, failing once on a short or
// malformed field; every length is checked against the bytes left before
// allocating.
type cgReader struct {
	b   []byte
	err error
}

var errShort = errors.New("short or malformed field")

func (r *cgReader) fail() {
	if r.err == nil {
		r.err = errShort
	}
	r.b = nil
}

func (r *cgReader) int16() int16 {
	if len(r.b) < 2 {
		r.fail()
		return 0
	}
	v := int16(binary.BigEndian.Uint16(r.b))
	r.b = r.b[2:]
	return v
}

func (r *cgReader) int32() int32 {
	if len(r.b) < 4 {
		r.fail()
		return 0
	}
	v := int32(binary.BigEndian.Uint32(r.b))
	r.b = r.b[4:]
	return v
}

func (r *cgReader) int8() int8 {
	if len(r.b) < 1 {
		r.fail()
		return 0
	}
	v := int8(r.b[0])
	r.b = r.b[1:]
	return v
}

func (r *cgReader) uvarint() uint64 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail()
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *cgReader) bytes(n uint64) []byte {
	if n > uint64(len(r.b)) {
		r.fail()
		return nil
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}

func (r *cgReader) string() string {
	n := r.int16()
	if n < 0 {
		r.fail()
		return ""
	}
	return string(r.bytes(uint64(n)))
}

// compactNullable returns nil for a null string.
func (r *cgReader) compactNullable() *string {
	n := r.uvarint()
	if n == 0 || r.err != nil {
		return nil
	}
	s := string(r.bytes(n - 1))
	return &s
}

func (r *cgReader) compactString() string {
	s := r.compactNullable()
	if s == nil {
		r.fail()
		return ""
	}
	return *s
}

// arrayLen reads a compact array length, at most the bytes left divided
// by min, the smallest encoding of an element; -1 for null.
func (r *cgReader) arrayLen(min int) int {
	n := r.uvarint()
	if r.err != nil {
		return 0
	}
	if n == 0 {
		return -1
	}
	n--
	if n > uint64(len(r.b)/min) {
		r.fail()
		return 0
	}
	return int(n)
}

// tags skips a tagged-fields section.
func (r *cgReader) tags() {
	n := r.uvarint()
	for i := uint64(0); i < n && r.err == nil; i++ {
		r.uvarint()
		r.bytes(r.uvarint())
	}
}

func (r *cgReader) assignment() assignment {
	n := r.arrayLen(16 + 1 + 1)
	a := assignment{}
	for range max(n, 0) {
		var id topicID
		copy(id[:], r.bytes(16))
		np := r.arrayLen(4)
		ps := make([]int32, 0, max(np, 0))
		for range max(np, 0) {
			ps = append(ps, r.int32())
		}
		r.tags()
		if r.err != nil {
			return nil
		}
		slices.Sort(ps)
		a[id] = slices.Compact(append(a[id], ps...))
	}
	return a
}

// readKeyAndVersion reads what the records of KIP-848 consumer groups and
// of share groups (key version typ, 3 to 15) begin with: the key's group id
// and, withMember, member id (strings of int16 length), and the value's
// version, which must be 0. r reads the rest of the value; it is nil for a
// tombstone (a nil value). kind names the group type in errors, which
// wrap ErrCorruptRecord (the key), or ErrUnknownRecord (another value
// version).
func readKeyAndVersion(kind string, typ int16, rec Record, withMember bool) (group, member string, r *cgReader, err error) {
	kr := &cgReader{b: rec.Key[2:]}
	group = kr.string()
	if withMember {
		member = kr.string()
	}
	if kr.err != nil {
		return "", "", nil, fmt.Errorf("%w: %s key %d: %v", ErrCorruptRecord, kind, typ, kr.err)
	}
	if rec.Value == nil {
		return group, member, nil, nil
	}
	r = &cgReader{b: rec.Value}
	if vv := r.int16(); r.err == nil && vv != 0 {
		return "", "", nil, fmt.Errorf("%w: %s value %d version %d", ErrUnknownRecord, kind, typ, vv)
	}
	return group, member, r, nil
}

// decodeConsumer parses a record of a KIP-848 consumer group whose key
// version typ is 3 to 8. Errors wrap ErrCorruptRecord or ErrUnknownRecord
// (a value version other than 0).
func decodeConsumer(typ int16, rec Record) (*ConsumerRecord, error) {
	group, member, r, err := readKeyAndVersion("consumer group", typ, rec, typ == cgMemberMetadataType || typ == cgTargetMemberType || typ == cgCurrentAssignmentTyp)
	if err != nil {
		return nil, err
	}
	cr := &ConsumerRecord{Type: typ, Group: group, MemberID: member}
	if r == nil {
		return cr, nil
	}
	switch typ {
	case cgMetadataType:
		cr.Value = &cgMetadataValue{epoch: r.int32()}
	case cgPartitionMetadata:
		return nil, fmt.Errorf("%w: consumer group partition metadata (not used)", ErrUnknownRecord)
	case cgTargetMetadataType:
		cr.Value = &cgTargetMetadataValue{epoch: r.int32()}
	case cgMemberMetadataType:
		v := &cgMemberValue{}
		v.instanceID = r.compactNullable()
		v.rackID = r.compactNullable()
		v.clientID = r.compactString()
		v.clientHost = r.compactString()
		n := r.arrayLen(1)
		for range max(n, 0) {
			v.topics = append(v.topics, r.compactString())
		}
		v.regex = r.compactNullable()
		v.rebalanceTimeoutMs = r.int32()
		v.assignor = r.compactNullable()
		for n := r.uvarint(); n > 0 && r.err == nil; n-- {
			tag, size := r.uvarint(), r.uvarint()
			body := r.bytes(size)
			if tag == 0 && r.err == nil {
				v.classic = readClassicMeta(body)
			}
		}
		cr.Value = v
	case cgTargetMemberType:
		cr.Value = r.assignment()
	case cgCurrentAssignmentTyp:
		v := &cgCurrentValue{}
		v.epoch = r.int32()
		v.prevEpoch = r.int32()
		v.state = r.int8()
		v.assigned = r.assignment()
		v.revoking = r.assignment()
		cr.Value = v
	}
	if typ != cgMemberMetadataType { // read with its tagged fields above
		r.tags()
	}
	if r.err != nil {
		return nil, fmt.Errorf("%w: consumer group value %d: %v", ErrCorruptRecord, typ, r.err)
	}
	return cr, nil
}

// topics returns a's topic ids, sorted.
func (a assignment) topics() []topicID {
	ids := make([]topicID, 0, len(a))
	for id, ps := range a {
		if len(ps) > 0 {
			ids = append(ids, id)
		}
	}
	slices.SortFunc(ids, func(x, y topicID) int { return slices.Compare(x[:], y[:]) })
	return ids
}

func (a assignment) clone() assignment {
	out := make(assignment, len(a))
	for id, ps := range a {
		if len(ps) > 0 {
			out[id] = slices.Clone(ps)
		}
	}
	return out
}

func (a assignment) equal(b assignment) bool {
	if len(a) == 0 && len(b) == 0 || len(a) == len(b) && sameMap(a, b) {
		return true
	}
	if a.size() != b.size() {
		return false
	}
	for id, ps := range a {
		if !slices.Equal(ps, b[id]) {
			return false
		}
	}
	return true
}

func (a assignment) size() int {
	if len(a) == 0 {
		return 0
	}
	n := 0
	for _, ps := range a {
		n += len(ps)
	}
	return n
}

func (a assignment) has(id topicID, p int32) bool {
	_, ok := slices.BinarySearch(a[id], p)
	return ok
}

func (a assignment) add(id topicID, p int32) {
	ps := a[id]
	i, ok := slices.BinarySearch(ps, p)
	if !ok {
		a[id] = slices.Insert(ps, i, p)
	}
}

// record encodes cr back into a record of __consumer_offsets.
func (cr *ConsumerRecord) record() Record {
	switch v := cr.Value.(type) {
	case *cgMetadataValue:
		return cgMetadataRecord(cr.Group, v.epoch)
	case *cgTargetMetadataValue:
		return cgTargetMetadataRecord(cr.Group, v.epoch)
	case *cgMemberValue:
		return cgMemberRecord(cr.Group, &cmember{id: cr.MemberID, instanceID: v.instanceID, rackID: v.rackID,
			clientID: v.clientID, clientHost: v.clientHost, topics: v.topics, regex: v.regex,
			rebalanceTimeoutMs: v.rebalanceTimeoutMs, assignor: v.assignor, classic: v.classic})
	case assignment:
		return cgTargetMemberRecord(cr.Group, cr.MemberID, v)
	case *cgCurrentValue:
		return cgCurrentRecord(cr.Group, &cmember{id: cr.MemberID, epoch: v.epoch, prevEpoch: v.prevEpoch,
			state: memberState(v.state), assigned: v.assigned, revoking: v.revoking})
	}
	switch cr.Type {
	case cgMemberMetadataType, cgTargetMemberType, cgCurrentAssignmentTyp:
		return Record{Key: cgKey(cr.Type, cr.Group, cr.MemberID)}
	}
	return Record{Key: cgKey(cr.Type, cr.Group)}
}

// readClassicMeta decodes ClassicMemberMetadata, the body of tagged field
// 0 of a member's metadata value: Kafka's nullable struct, a marker byte
// (1 present, -1 null) then the struct; nil if null or malformed. Samsa
// wrote no marker before 2026-12: such a body starts with the session
// timeout's high byte, 0 for any timeout below 2^24 ms (4.6 hours), and is
// read as it was written.
func readClassicMeta(b []byte) *classicMeta {
	switch {
	case len(b) > 0 && b[0] == 1:
		b = b[1:]
	case len(b) > 0 && b[0] == 0xff:
		return nil
	}
	r := &cgReader{b: b}
	cm := &classicMeta{sessionTimeoutMs: r.int32()}
	n := r.arrayLen(3)
	for range max(n, 0) {
		name := r.compactString()
		ml := r.uvarint()
		var md []byte
		if ml > 0 {
			md = slices.Clone(r.bytes(ml - 1))
		}
		r.tags()
		if md == nil {
			md = []byte{}
		}
		cm.protocols = append(cm.protocols, protocol{name: name, metadata: md})
	}
	r.tags()
	if r.err != nil || len(cm.protocols) == 0 {
		return nil
	}
	return cm
}
