package group

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Versions of the __consumer_offsets schemas written, Kafka's current ones.
const (
	offsetKeyVersion        = 1 // OffsetCommitKey; 0 and 1 are the same schema
	groupKeyVersion         = 2 // GroupMetadataKey
	offsetValueVersion      = 3 // OffsetCommitValue with leader epoch (KIP-320)
	offsetValueVersionExpir = 1 // OffsetCommitValue with an explicit expire timestamp
	groupValueVersion       = 3 // GroupMetadataValue with instance ids (KIP-345)
	maxOffsetValueVersion   = 4 // highest OffsetCommitValue version decoded
	maxGroupValueVersion    = 4 // highest GroupMetadataValue version decoded
)

// Errors of Decode.
var (
	// ErrCorruptRecord: a key or value that does not parse in its schema.
	ErrCorruptRecord = errors.New("group: corrupt __consumer_offsets record")
	// ErrUnknownRecord: a key version other than offset commit (0, 1),
	// group metadata (2), KIP-848 consumer groups (3, 5 to 8) and KIP-932
	// share groups (10 to 15), such as the consumer and share group
	// partition metadata (4, 9) that Kafka no longer uses, or streams
	// groups' (16+), or a value version newer than this package knows.
	// Loading skips these records.
	ErrUnknownRecord = errors.New("group: unknown __consumer_offsets record type")
)

// Decoded is one decoded record of __consumer_offsets: exactly one of
// OffsetKey and GroupKey is set; the matching value is nil for a tombstone.
type Decoded struct {
	OffsetKey   *kmsg.OffsetCommitKey
	OffsetValue *kmsg.OffsetCommitValue
	GroupKey    *kmsg.GroupMetadataKey
	GroupValue  *kmsg.GroupMetadataValue
	// Consumer is set instead for the records of KIP-848 consumer groups
	// (key versions 3 to 8).
	Consumer *ConsumerRecord
	// Share is set instead for the records of KIP-932 share groups (key
	// versions 10 to 15).
	Share *ShareRecord
}

// Decode parses a record of __consumer_offsets. Errors wrap
// ErrCorruptRecord or ErrUnknownRecord. The result does not alias rec.
// Decode never panics; lengths are checked against the bytes left before
// any allocation (franz-go's kbin does so).
func Decode(rec Record) (Decoded, error) {
	var d Decoded
	if len(rec.Key) < 2 {
		return d, fmt.Errorf("%w: key of %d bytes", ErrCorruptRecord, len(rec.Key))
	}
	switch kv := int16(binary.BigEndian.Uint16(rec.Key)); kv {
	case 0, 1:
		k := new(kmsg.OffsetCommitKey)
		if err := k.ReadFrom(rec.Key); err != nil {
			return d, fmt.Errorf("%w: offset commit key: %v", ErrCorruptRecord, err)
		}
		d.OffsetKey = k
		if rec.Value == nil {
			return d, nil
		}
		if len(rec.Value) < 2 {
			return d, fmt.Errorf("%w: offset commit value of %d bytes", ErrCorruptRecord, len(rec.Value))
		}
		if vv := int16(binary.BigEndian.Uint16(rec.Value)); vv < 0 || vv > maxOffsetValueVersion {
			return d, fmt.Errorf("%w: offset commit value version %d", ErrUnknownRecord, vv)
		}
		v := new(kmsg.OffsetCommitValue)
		if err := v.ReadFrom(rec.Value); err != nil {
			return d, fmt.Errorf("%w: offset commit value: %v", ErrCorruptRecord, err)
		}
		d.OffsetValue = v
		return d, nil
	case 2:
		k := new(kmsg.GroupMetadataKey)
		if err := k.ReadFrom(rec.Key); err != nil {
			return d, fmt.Errorf("%w: group metadata key: %v", ErrCorruptRecord, err)
		}
		d.GroupKey = k
		if rec.Value == nil {
			return d, nil
		}
		if len(rec.Value) < 2 {
			return d, fmt.Errorf("%w: group metadata value of %d bytes", ErrCorruptRecord, len(rec.Value))
		}
		if vv := int16(binary.BigEndian.Uint16(rec.Value)); vv < 0 || vv > maxGroupValueVersion {
			return d, fmt.Errorf("%w: group metadata value version %d", ErrUnknownRecord, vv)
		}
		v := new(kmsg.GroupMetadataValue)
		if err := v.ReadFrom(rec.Value); err != nil {
			return d, fmt.Errorf("%w: group metadata value: %v", ErrCorruptRecord, err)
		}
		d.GroupValue = v
		return d, nil
	case cgMetadataType, cgPartitionMetadata, cgMemberMetadataType, cgTargetMetadataType, cgTargetMemberType, cgCurrentAssignmentTyp:
		cr, err := decodeConsumer(kv, rec)
		if err != nil {
			return d, err
		}
		d.Consumer = cr
		return d, nil
	case sharePartitionMetadata, ShareMemberMetadataType, ShareMetadataType, ShareTargetMetadataType,
		ShareTargetMemberType, ShareCurrentMemberType, ShareStatePartitionsType:
		sr, err := decodeShare(kv, rec)
		if err != nil {
			return d, err
		}
		d.Share = sr
		return d, nil
	default:
		return d, fmt.Errorf("%w: key version %d", ErrUnknownRecord, kv)
	}
}

// offsetKey encodes the key of a committed offset.
func offsetKey(group, topic string, partition int32) []byte {
	k := kmsg.OffsetCommitKey{Version: offsetKeyVersion, Group: group, Topic: topic, Partition: partition}
	return k.AppendTo(make([]byte, 0, 2+2+len(group)+2+len(topic)+4))
}

// offsetValue encodes a committed offset: version 3, or version 1 when the
// commit carries an explicit expire timestamp (OffsetCommit v2-v4 with a
// retention time), as Kafka writes them.
func offsetValue(o offsetEntry) []byte {
	v := kmsg.OffsetCommitValue{
		Version:         offsetValueVersion,
		Offset:          o.offset,
		LeaderEpoch:     o.leaderEpoch,
		Metadata:        o.metadata,
		CommitTimestamp: o.commitTimestamp,
	}
	if o.expireTimestamp >= 0 {
		v.Version = offsetValueVersionExpir
		v.ExpireTimestamp = o.expireTimestamp
	}
	return v.AppendTo(make([]byte, 0, 2+8+4+2+len(o.metadata)+8+8))
}

// groupKey encodes the key of a group's metadata.
func groupKey(group string) []byte {
	k := kmsg.GroupMetadataKey{Version: groupKeyVersion, Group: group}
	return k.AppendTo(make([]byte, 0, 2+2+len(group)))
}

// offsetEntryFrom converts a decoded value.
func offsetEntryFrom(v *kmsg.OffsetCommitValue) offsetEntry {
	o := offsetEntry{
		offset:          v.Offset,
		leaderEpoch:     -1,
		metadata:        v.Metadata,
		commitTimestamp: v.CommitTimestamp,
		expireTimestamp: -1,
	}
	if v.Version >= 3 {
		o.leaderEpoch = v.LeaderEpoch
	}
	if v.Version == 1 {
		o.expireTimestamp = v.ExpireTimestamp
	}
	return o
}
