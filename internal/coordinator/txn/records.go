package txn

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"unicode/utf16"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Versions of the __transaction_state schemas.
const (
	keyVersion      = 0 // TxnMetadataKey: the only key type
	valueVersion    = 0 // TxnMetadataValue written for transaction version 1 transactions
	valueVersionTV2 = 1 // written for transaction version 2 ones (flexible, with the tagged fields below)
	maxValueVersion = 1 // highest TxnMetadataValue version decoded (flexible, KIP-915)
)

// Errors of Decode.
var (
	// ErrCorruptRecord: a key or value that does not parse in its schema.
	ErrCorruptRecord = errors.New("txn: corrupt __transaction_state record")
	// ErrUnknownRecord: a key or value version this package does not know;
	// loading skips such records.
	ErrUnknownRecord = errors.New("txn: unknown __transaction_state record type")
)

// Record is one record of __transaction_state: a key and a value in
// Kafka's schemas (see the package documentation). A nil Value is a
// tombstone: the transactional id was removed.
type Record struct {
	Key, Value []byte
}

// Decoded is a decoded record; Value is nil for a tombstone.
type Decoded struct {
	Key   kmsg.TxnMetadataKey
	Value *kmsg.TxnMetadataValue
}

// Decode parses a record of __transaction_state. Errors wrap
// ErrCorruptRecord or ErrUnknownRecord. The result does not alias rec.
// Decode never panics; franz-go's decoders check lengths against the bytes
// left before allocating.
func Decode(rec Record) (Decoded, error) {
	var d Decoded
	if len(rec.Key) < 2 {
		return d, fmt.Errorf("%w: key of %d bytes", ErrCorruptRecord, len(rec.Key))
	}
	if kv := int16(binary.BigEndian.Uint16(rec.Key)); kv != keyVersion {
		return d, fmt.Errorf("%w: key version %d", ErrUnknownRecord, kv)
	}
	if err := d.Key.ReadFrom(rec.Key); err != nil {
		return d, fmt.Errorf("%w: key: %v", ErrCorruptRecord, err)
	}
	if rec.Value == nil {
		return d, nil
	}
	if len(rec.Value) < 2 {
		return d, fmt.Errorf("%w: value of %d bytes", ErrCorruptRecord, len(rec.Value))
	}
	if vv := int16(binary.BigEndian.Uint16(rec.Value)); vv < 0 || vv > maxValueVersion {
		return d, fmt.Errorf("%w: value version %d", ErrUnknownRecord, vv)
	}
	v := new(kmsg.TxnMetadataValue)
	if err := v.ReadFrom(rec.Value); err != nil {
		return d, fmt.Errorf("%w: value: %v", ErrCorruptRecord, err)
	}
	if v.State < stateEmpty || v.State > statePrepareEpochFence {
		return d, fmt.Errorf("%w: state %d", ErrCorruptRecord, v.State)
	}
	d.Value = v
	return d, nil
}

// keyOf encodes the key of transactional id id.
func keyOf(id string) []byte {
	k := kmsg.TxnMetadataKey{Version: keyVersion, TransactionalID: id}
	return k.AppendTo(make([]byte, 0, 4+len(id)))
}

// valueOf encodes a transaction's metadata as Kafka's TransactionLog does:
// partitions null in state Empty, grouped by topic in sorted order.
func valueOf(s snapshot) []byte {
	v := kmsg.TxnMetadataValue{
		Version:             valueVersion,
		ProducerID:          s.producerID,
		ProducerEpoch:       s.epoch,
		TimeoutMillis:       s.timeoutMs,
		State:               s.state,
		LastUpdateTimestamp: s.updateMs,
		StartTimestamp:      s.startMs,
	}
	v.Default()
	v.Version = valueVersion
	if s.tv2 {
		// Kafka's TransactionLog for transaction.version 2: the tagged
		// fields carry the producer id rotation and the client's version.
		v.Version = valueVersionTV2
		v.PreviousProducerID = s.lastProducerID
		v.NextProducerID = s.nextProducerID
		v.ClientTransactionVersion = 2
	}
	if s.state != stateEmpty {
		v.Topics = []kmsg.TxnMetadataValueTopic{}
		for _, tp := range s.partitions {
			if n := len(v.Topics); n == 0 || v.Topics[n-1].Topic != tp.Topic {
				v.Topics = append(v.Topics, kmsg.TxnMetadataValueTopic{Topic: tp.Topic})
			}
			t := &v.Topics[len(v.Topics)-1]
			t.Partitions = append(t.Partitions, tp.Partition)
		}
	}
	return v.AppendTo(nil)
}

// PartitionFor returns the partition of __transaction_state whose leader
// coordinates transactionalID: Kafka's
// Utils.abs(transactionalId.hashCode) % transaction.state.log.num.partitions
// (Java's String.hashCode over UTF-16 code units; Utils.abs maps
// math.MinInt32 to 0). The same function places groups in
// __consumer_offsets. numPartitions must be positive; 0 otherwise.
func PartitionFor(transactionalID string, numPartitions int32) int32 {
	if numPartitions <= 0 {
		return 0
	}
	var h int32
	for _, r := range transactionalID {
		if r >= 0x10000 {
			hi, lo := utf16.EncodeRune(r)
			h = 31*h + int32(hi)
			h = 31*h + int32(lo)
			continue
		}
		h = 31*h + int32(r)
	}
	if h == math.MinInt32 {
		return 0
	}
	if h < 0 {
		h = -h
	}
	return h % numPartitions
}
