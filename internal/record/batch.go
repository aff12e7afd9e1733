package record

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// Field offsets and sizes of the batch header (see the package doc).
const (
	// HeaderSize is the size in bytes of a v2 batch header, records excluded.
	HeaderSize = 61
	// LogOverhead is the size of the base offset and batch length fields,
	// which batchLength does not count.
	LogOverhead = 12

	offBaseOffset           = 0
	offBatchLength          = 8
	offPartitionLeaderEpoch = 12
	offMagic                = 16
	offCRC                  = 17
	offAttributes           = 21
	offLastOffsetDelta      = 23
	offBaseTimestamp        = 27
	offMaxTimestamp         = 35
	offProducerID           = 43
	offProducerEpoch        = 51
	offBaseSequence         = 53
	offRecordCount          = 57
)

// Attribute bits (Kafka's RecordBatch attributes).
const (
	CodecMask         = 0x07
	TimestampTypeBit  = 0x08 // 1 = LogAppendTime
	TransactionalBit  = 0x10
	ControlBit        = 0x20
	DeleteHorizonBit  = 0x40 // KIP-534: baseTimestamp holds the delete horizon
	currentMagicValue = 2
)

// Codec is the compression of a batch's records (attribute bits 0-2).
type Codec int8

// Codecs, as numbered by Kafka.
const (
	CodecNone   Codec = 0
	CodecGzip   Codec = 1
	CodecSnappy Codec = 2
	CodecLZ4    Codec = 3
	CodecZstd   Codec = 4
)

func (c Codec) String() string {
	switch c {
	case CodecNone:
		return "none"
	case CodecGzip:
		return "gzip"
	case CodecSnappy:
		return "snappy"
	case CodecLZ4:
		return "lz4"
	case CodecZstd:
		return "zstd"
	}
	return fmt.Sprintf("codec(%d)", int8(c))
}

// Errors returned by Parse, Validate, Batches and NextBatch. Callers map
// them to Kafka error codes: ErrCorrupt and ErrTruncated to
// CORRUPT_MESSAGE, ErrUnsupportedMagic to UNSUPPORTED_FOR_MESSAGE_FORMAT or
// CORRUPT_MESSAGE. (A Produce request's magic 0 and 1 record sets never
// get this far: the broker answers them INVALID_RECORD, see NextBatch.)
var (
	ErrTruncated        = errors.New("record: truncated batch")
	ErrCorrupt          = errors.New("record: corrupt batch")
	ErrUnsupportedMagic = errors.New("record: unsupported magic")
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Header is a decoded v2 batch header.
type Header struct {
	BaseOffset           int64
	BatchLength          int32 // bytes after the BatchLength field
	PartitionLeaderEpoch int32
	Magic                int8
	CRC                  uint32
	Attributes           int16
	LastOffsetDelta      int32
	BaseTimestamp        int64 // milliseconds
	MaxTimestamp         int64 // milliseconds
	ProducerID           int64
	ProducerEpoch        int16
	BaseSequence         int32
	NumRecords           int32
}

// Size is the batch's total size in bytes, header included.
func (h *Header) Size() int { return int(h.BatchLength) + LogOverhead }

// LastOffset is BaseOffset + LastOffsetDelta.
func (h *Header) LastOffset() int64 { return h.BaseOffset + int64(h.LastOffsetDelta) }

// NextOffset is the offset after the batch's last one.
func (h *Header) NextOffset() int64 { return h.LastOffset() + 1 }

// Codec is the compression codec of the records.
func (h *Header) Codec() Codec { return Codec(h.Attributes & CodecMask) }

// IsTransactional reports attribute bit 4 (KIP-98).
func (h *Header) IsTransactional() bool { return h.Attributes&TransactionalBit != 0 }

// IsControl reports attribute bit 5: the batch holds a transaction marker.
func (h *Header) IsControl() bool { return h.Attributes&ControlBit != 0 }

// IsLogAppendTime reports attribute bit 3: timestamps were set by the broker.
func (h *Header) IsLogAppendTime() bool { return h.Attributes&TimestampTypeBit != 0 }

// LastSequence is the sequence number of the batch's last record, or -1 when
// the batch carries no sequence.
func (h *Header) LastSequence() int32 {
	if h.BaseSequence < 0 {
		return -1
	}
	s := int64(h.BaseSequence) + int64(h.LastOffsetDelta)
	if s > 0x7fffffff {
		s -= 0x80000000 // sequences wrap to 0 after MaxInt32
	}
	return int32(s)
}

// ParseHeader decodes the header at the start of b without checking the CRC
// or that the whole batch is present. It returns ErrTruncated when b is
// shorter than HeaderSize and ErrUnsupportedMagic for magic other than 2.
func ParseHeader(b []byte) (Header, error) {
	var h Header
	if len(b) < LogOverhead+5 {
		return h, ErrTruncated
	}
	h.BaseOffset = int64(binary.BigEndian.Uint64(b[offBaseOffset:]))
	h.BatchLength = int32(binary.BigEndian.Uint32(b[offBatchLength:]))
	h.PartitionLeaderEpoch = int32(binary.BigEndian.Uint32(b[offPartitionLeaderEpoch:]))
	h.Magic = int8(b[offMagic])
	if h.Magic != currentMagicValue {
		return h, fmt.Errorf("%w: %d", ErrUnsupportedMagic, h.Magic)
	}
	if len(b) < HeaderSize {
		return h, ErrTruncated
	}
	h.CRC = binary.BigEndian.Uint32(b[offCRC:])
	h.Attributes = int16(binary.BigEndian.Uint16(b[offAttributes:]))
	h.LastOffsetDelta = int32(binary.BigEndian.Uint32(b[offLastOffsetDelta:]))
	h.BaseTimestamp = int64(binary.BigEndian.Uint64(b[offBaseTimestamp:]))
	h.MaxTimestamp = int64(binary.BigEndian.Uint64(b[offMaxTimestamp:]))
	h.ProducerID = int64(binary.BigEndian.Uint64(b[offProducerID:]))
	h.ProducerEpoch = int16(binary.BigEndian.Uint16(b[offProducerEpoch:]))
	h.BaseSequence = int32(binary.BigEndian.Uint32(b[offBaseSequence:]))
	h.NumRecords = int32(binary.BigEndian.Uint32(b[offRecordCount:]))
	return h, nil
}

// CodecOf is the codec of the batch at the start of b (attribute bits
// 0-2), or CodecNone when b is shorter than a header.
func CodecOf(b []byte) Codec {
	if len(b) < HeaderSize {
		return CodecNone
	}
	return Codec(b[offAttributes+1] & CodecMask)
}

// Validate checks that b holds exactly one whole v2 batch: the length field
// matches len(b), magic is 2, the CRC-32C matches, the record count is not
// negative and fits the last offset delta (for uncompressed batches, where
// that is cheap to know, count = lastOffsetDelta+1 is not required since
// compaction can leave gaps, but count ≤ lastOffsetDelta+1 is).
// It does not decompress or decode individual records.
func Validate(b []byte) (Header, error) {
	h, err := ParseHeader(b)
	if err != nil {
		return h, err
	}
	if h.BatchLength < HeaderSize-LogOverhead || int(h.BatchLength)+LogOverhead != len(b) {
		return h, fmt.Errorf("%w: batch length %d for %d bytes", ErrCorrupt, h.BatchLength, len(b))
	}
	if h.NumRecords < 0 || h.LastOffsetDelta < 0 || int64(h.NumRecords) > int64(h.LastOffsetDelta)+1 {
		return h, fmt.Errorf("%w: %d records with last offset delta %d", ErrCorrupt, h.NumRecords, h.LastOffsetDelta)
	}
	if got := crc32.Checksum(b[offAttributes:], castagnoli); got != h.CRC {
		return h, fmt.Errorf("%w: crc %08x, computed %08x", ErrCorrupt, h.CRC, got)
	}
	return h, nil
}

// CRCValid reports whether the CRC of the whole batch b is correct.
func CRCValid(b []byte) bool {
	if len(b) < HeaderSize {
		return false
	}
	return crc32.Checksum(b[offAttributes:], castagnoli) == binary.BigEndian.Uint32(b[offCRC:])
}

// SetBaseOffset stamps the base offset in place; the CRC stays valid.
func SetBaseOffset(b []byte, offset int64) {
	binary.BigEndian.PutUint64(b[offBaseOffset:], uint64(offset))
}

// SetPartitionLeaderEpoch stamps the partition leader epoch in place; the CRC
// stays valid.
func SetPartitionLeaderEpoch(b []byte, epoch int32) {
	binary.BigEndian.PutUint32(b[offPartitionLeaderEpoch:], uint32(epoch))
}

// SetMaxTimestampLogAppendTime sets the timestamp type to LogAppendTime and the
// max timestamp to ts, then recomputes the CRC (message.timestamp.type =
// LogAppendTime).
func SetMaxTimestampLogAppendTime(b []byte, ts int64) {
	attrs := binary.BigEndian.Uint16(b[offAttributes:]) | TimestampTypeBit
	binary.BigEndian.PutUint16(b[offAttributes:], attrs)
	binary.BigEndian.PutUint64(b[offMaxTimestamp:], uint64(ts))
	binary.BigEndian.PutUint32(b[offCRC:], crc32.Checksum(b[offAttributes:], castagnoli))
}

// Batches calls fn for each whole batch in b, a concatenation of batches as a
// Produce request's records field or a segment file holds them. Each slice
// passed to fn aliases b. It stops at the first error from fn. A trailing
// partial batch yields ErrTruncated along with the count of bytes consumed
// so far, so a reader can tell a torn tail from corruption. A header that
// cannot be a batch yields ErrCorrupt or ErrUnsupportedMagic.
func Batches(b []byte, fn func(batch []byte, h Header) error) (consumed int, err error) {
	for consumed < len(b) {
		rest := b[consumed:]
		h, err := ParseHeader(rest)
		if err != nil {
			return consumed, err
		}
		if h.BatchLength < HeaderSize-LogOverhead {
			return consumed, fmt.Errorf("%w: batch length %d", ErrCorrupt, h.BatchLength)
		}
		size := int(h.BatchLength) + LogOverhead
		if size > len(rest) {
			return consumed, ErrTruncated
		}
		if err := fn(rest[:size], h); err != nil {
			return consumed, err
		}
		consumed += size
	}
	return consumed, nil
}

// legacyRecordOverheadV0 is the smallest value of a message set entry's
// size field: a magic 0 message without key or value (CRC 4, magic 1,
// attributes 1, key length 4, value length 4), Kafka's
// LegacyRecord.RECORD_OVERHEAD_V0.
const legacyRecordOverheadV0 = 14

// NextBatch frames the batch at the start of b whatever its magic, as
// Kafka's ByteBufferLogInputStream does: magic 0 and 1 message set
// entries (before KIP-98) and v2 batches share their first 17 bytes,
// offset (8), size (4), CRC or partition leader epoch (4) and magic (1).
// It returns the entry's size in bytes, LogOverhead included, and its
// magic; size is 0 when b holds no whole entry (fewer than 17 bytes, or
// fewer than the size field announces). A size field below 14 or a magic
// outside 0-2 is ErrCorrupt. Nothing past the magic byte is checked.
func NextBatch(b []byte) (size int, magic int8, err error) {
	if len(b) < LogOverhead {
		return 0, 0, nil
	}
	length := int32(binary.BigEndian.Uint32(b[offBatchLength:]))
	if length < legacyRecordOverheadV0 {
		return 0, 0, fmt.Errorf("%w: size %d is less than the minimum record overhead (%d)", ErrCorrupt, length, legacyRecordOverheadV0)
	}
	if len(b) < offMagic+1 {
		return 0, 0, nil
	}
	magic = int8(b[offMagic])
	if magic < 0 || magic > currentMagicValue {
		return 0, 0, fmt.Errorf("%w: invalid magic %d", ErrCorrupt, magic)
	}
	if int64(length)+LogOverhead > int64(len(b)) {
		return 0, 0, nil
	}
	return int(length) + LogOverhead, magic, nil
}
