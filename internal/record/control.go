package record

import (
	"encoding/binary"
	"fmt"
)

// ControlType is the type of a control record, the int16 after the version
// in its key (Kafka's ControlRecordType).
type ControlType int16

// Control record types.
const (
	ControlAbort          ControlType = 0 // transaction marker (KIP-98)
	ControlCommit         ControlType = 1 // transaction marker (KIP-98)
	ControlLeaderChange   ControlType = 2 // KRaft (KIP-595)
	ControlSnapshotHeader ControlType = 3 // KRaft (KIP-630)
	ControlSnapshotFooter ControlType = 4 // KRaft (KIP-630)
	ControlKRaftVersion   ControlType = 5 // KRaft (KIP-853)
	ControlKRaftVoters    ControlType = 6 // KRaft (KIP-853)
)

func (t ControlType) String() string {
	switch t {
	case ControlAbort:
		return "ABORT"
	case ControlCommit:
		return "COMMIT"
	case ControlLeaderChange:
		return "LEADER_CHANGE"
	case ControlSnapshotHeader:
		return "SNAPSHOT_HEADER"
	case ControlSnapshotFooter:
		return "SNAPSHOT_FOOTER"
	case ControlKRaftVersion:
		return "KRAFT_VERSION"
	case ControlKRaftVoters:
		return "KRAFT_VOTERS"
	}
	return fmt.Sprintf("UNKNOWN(%d)", int16(t))
}

// ParseControlKey decodes a control record's key: int16 version (0),
// int16 type. Errors: ErrCorrupt (wrapped) for a key shorter than 4 bytes
// or a negative version.
func ParseControlKey(key []byte) (ControlType, error) {
	if len(key) < 4 {
		return 0, fmt.Errorf("%w: control key of %d bytes", ErrCorrupt, len(key))
	}
	if v := int16(binary.BigEndian.Uint16(key)); v < 0 {
		return 0, fmt.Errorf("%w: control key version %d", ErrCorrupt, v)
	}
	return ControlType(binary.BigEndian.Uint16(key[2:])), nil
}

// EndTxnMarker is the value of an ABORT or COMMIT control record:
// int16 version (0), int32 coordinator epoch.
type EndTxnMarker struct {
	Commit           bool
	CoordinatorEpoch int32
}

// ParseEndTxnMarker decodes a transaction marker record. Errors:
// ErrCorrupt (wrapped) when the key is not ABORT or COMMIT or the value is
// shorter than 6 bytes.
func ParseEndTxnMarker(key, value []byte) (EndTxnMarker, error) {
	t, err := ParseControlKey(key)
	if err != nil {
		return EndTxnMarker{}, err
	}
	if t != ControlAbort && t != ControlCommit {
		return EndTxnMarker{}, fmt.Errorf("%w: control type %v is not a transaction marker", ErrCorrupt, t)
	}
	if len(value) < 6 {
		return EndTxnMarker{}, fmt.Errorf("%w: transaction marker value of %d bytes", ErrCorrupt, len(value))
	}
	return EndTxnMarker{Commit: t == ControlCommit, CoordinatorEpoch: int32(binary.BigEndian.Uint32(value[2:]))}, nil
}

// ControlKey returns the key of a control record of type t.
func ControlKey(t ControlType) []byte {
	return binary.BigEndian.AppendUint16([]byte{0, 0}, uint16(t))
}

// BuildEndTxnMarker returns a control batch holding one COMMIT or ABORT
// marker for the producer (WriteTxnMarkers), transactional, at base offset
// 0 (Append stamps it), timestamp in milliseconds.
func BuildEndTxnMarker(producerID int64, producerEpoch int16, coordinatorEpoch int32, commit bool, timestamp int64) ([]byte, error) {
	t := ControlAbort
	if commit {
		t = ControlCommit
	}
	value := binary.BigEndian.AppendUint32([]byte{0, 0}, uint32(coordinatorEpoch))
	return Build(Spec{
		Transactional: true,
		Control:       true,
		BaseTimestamp: timestamp,
		ProducerID:    producerID,
		ProducerEpoch: producerEpoch,
		BaseSequence:  NoSequence,
	}, []Record{{Key: ControlKey(t), Value: value}})
}
