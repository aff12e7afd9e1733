package record

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
)

// Record is one record of a v2 batch.
//
//	length          varint  bytes after this field
//	attributes      int8    unused, 0
//	timestampDelta  varlong from the batch's baseTimestamp, milliseconds
//	offsetDelta     varint  from the batch's baseOffset
//	keyLength       varint  -1 for a null key
//	key             bytes
//	valueLength     varint  -1 for a null value
//	value           bytes
//	headerCount     varint
//	headers         headerKeyLength varint, headerKey, headerValueLength
//	                varint (-1 for null), headerValue
//
// Varints are zigzag-encoded (Protocol Buffers' sint32/sint64).
type Record struct {
	Attributes     int8
	TimestampDelta int64 // milliseconds
	OffsetDelta    int32
	Key            []byte // nil is a null key
	Value          []byte // nil is a null value (a tombstone)
	Headers        []RecordHeader

	// Offset (baseOffset + OffsetDelta) and Timestamp (milliseconds: the
	// batch's max timestamp under LogAppendTime, else baseTimestamp +
	// TimestampDelta) are set by Records; Build ignores them.
	Offset    int64
	Timestamp int64
}

// RecordHeader is one record header (KIP-82). Value nil is null.
type RecordHeader struct {
	Key   string
	Value []byte
}

// Records calls fn for each record of batch, one whole v2 batch (checked
// with Validate or not: Records checks every length it reads but not the
// CRC), decompressing at most DefaultMaxDecompressedBytes. Key, Value and
// header values alias batch or the decompressed buffer: copy them to keep
// them past fn. It stops at the first error of fn and returns it. Errors:
// ErrTruncated, ErrCorrupt (wrapped) for malformed records, a record count
// that does not match, or trailing bytes; ErrTooLarge; ErrUnsupportedMagic.
func Records(batch []byte, fn func(Record) error) error {
	return RecordsMax(batch, DefaultMaxDecompressedBytes, fn)
}

// RecordsMax is Records with the decompressed size bounded by maxBytes
// (zero or negative means DefaultMaxDecompressedBytes).
func RecordsMax(batch []byte, maxBytes int, fn func(Record) error) error {
	h, err := ParseHeader(batch)
	if err != nil {
		return err
	}
	if h.BatchLength < HeaderSize-LogOverhead || h.Size() > len(batch) {
		return fmt.Errorf("%w: batch length %d for %d bytes", ErrTruncated, h.BatchLength, len(batch))
	}
	if h.NumRecords < 0 {
		return fmt.Errorf("%w: record count %d", ErrCorrupt, h.NumRecords)
	}
	data, err := Decompress(h.Codec(), batch[HeaderSize:h.Size()], maxBytes)
	if err != nil {
		return err
	}
	d := recordDecoder{b: data}
	for i := int32(0); i < h.NumRecords; i++ {
		r, err := d.record()
		if err != nil {
			return fmt.Errorf("%w: record %d of %d: %w", ErrCorrupt, i, h.NumRecords, err)
		}
		r.Offset = h.BaseOffset + int64(r.OffsetDelta)
		if h.IsLogAppendTime() {
			r.Timestamp = h.MaxTimestamp
		} else {
			r.Timestamp = h.BaseTimestamp + r.TimestampDelta
		}
		if err := fn(r); err != nil {
			return err
		}
	}
	if len(d.b) != 0 {
		return fmt.Errorf("%w: %d bytes after %d records", ErrCorrupt, len(d.b), h.NumRecords)
	}
	return nil
}

var errShort = errors.New("short record")

// recordDecoder consumes records from b.
type recordDecoder struct{ b []byte }

func (d *recordDecoder) varlong() (int64, error) {
	v, n := binary.Varint(d.b)
	if n <= 0 {
		if n == 0 {
			return 0, errShort
		}
		return 0, errors.New("varint overflows 64 bits")
	}
	d.b = d.b[n:]
	return v, nil
}

func (d *recordDecoder) varint() (int32, error) {
	v, err := d.varlong()
	if err != nil {
		return 0, err
	}
	if v < math.MinInt32 || v > math.MaxInt32 {
		return 0, fmt.Errorf("varint %d overflows 32 bits", v)
	}
	return int32(v), nil
}

// bytes reads a varint length and that many bytes; -1 gives nil.
func (d *recordDecoder) bytes(nullable bool) ([]byte, error) {
	n, err := d.varint()
	if err != nil {
		return nil, err
	}
	if n == -1 && nullable {
		return nil, nil
	}
	if n < 0 || int(n) > len(d.b) {
		return nil, fmt.Errorf("length %d with %d bytes left", n, len(d.b))
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v, nil
}

func (d *recordDecoder) record() (Record, error) {
	var r Record
	length, err := d.varint()
	if err != nil {
		return r, err
	}
	if length < 0 || int(length) > len(d.b) {
		return r, fmt.Errorf("record length %d with %d bytes left", length, len(d.b))
	}
	rd := recordDecoder{b: d.b[:length]}
	d.b = d.b[length:]
	if len(rd.b) == 0 {
		return r, errShort
	}
	r.Attributes = int8(rd.b[0])
	rd.b = rd.b[1:]
	if r.TimestampDelta, err = rd.varlong(); err != nil {
		return r, err
	}
	if r.OffsetDelta, err = rd.varint(); err != nil {
		return r, err
	}
	if r.Key, err = rd.bytes(true); err != nil {
		return r, err
	}
	if r.Value, err = rd.bytes(true); err != nil {
		return r, err
	}
	count, err := rd.varint()
	if err != nil {
		return r, err
	}
	// Each header takes at least two bytes.
	if count < 0 || int(count) > len(rd.b)/2 {
		return r, fmt.Errorf("header count %d with %d bytes left", count, len(rd.b))
	}
	if count > 0 {
		r.Headers = make([]RecordHeader, count)
		for i := range r.Headers {
			k, err := rd.bytes(false)
			if err != nil {
				return r, fmt.Errorf("header key: %w", err)
			}
			v, err := rd.bytes(true)
			if err != nil {
				return r, fmt.Errorf("header value: %w", err)
			}
			r.Headers[i] = RecordHeader{Key: string(k), Value: v}
		}
	}
	if len(rd.b) != 0 {
		return r, fmt.Errorf("%d bytes left in record", len(rd.b))
	}
	return r, nil
}

// Producer fields of a batch that carries no producer (Kafka's
// RecordBatch.NO_PRODUCER_ID, NO_PRODUCER_EPOCH, NO_SEQUENCE).
const (
	NoProducerID    int64 = -1
	NoProducerEpoch int16 = -1
	NoSequence      int32 = -1
)

// Spec is the header of a batch for Build. Zero ProducerID is a real
// producer id: use NoProducerID, NoProducerEpoch and NoSequence for
// batches that have none.
type Spec struct {
	BaseOffset           int64
	PartitionLeaderEpoch int32
	Codec                Codec
	LogAppendTime        bool
	Transactional        bool
	Control              bool
	// BaseTimestamp is the timestamp the records' deltas are relative to,
	// milliseconds. The batch's max timestamp is BaseTimestamp plus the
	// largest TimestampDelta, or MaxTimestamp under LogAppendTime.
	BaseTimestamp int64
	MaxTimestamp  int64
	ProducerID    int64
	ProducerEpoch int16
	BaseSequence  int32
	// LastOffsetDelta, when larger than every record's OffsetDelta, is the
	// batch's last offset delta: a batch the log cleaner rebuilt keeps its
	// original last offset though its last records are gone (and an
	// emptied batch keeps its whole offset range).
	LastOffsetDelta int32
	// DeleteHorizon sets attribute bit 6 (KIP-534): BaseTimestamp is then
	// the time, in milliseconds, after which the cleaner may remove the
	// batch's tombstones and transaction markers; records' timestamp
	// deltas stay relative to it.
	DeleteHorizon bool
}

// Build returns a v2 batch holding records (their OffsetDelta and
// TimestampDelta, Key, Value and Headers; Offset and Timestamp are
// ignored), compressed with spec.Codec, CRC computed. The last offset delta
// is the largest OffsetDelta (0 without records), or spec.LastOffsetDelta
// when larger.
func Build(spec Spec, records []Record) ([]byte, error) {
	return AppendBatch(nil, spec, records)
}

// AppendBatch is Build appending to dst.
func AppendBatch(dst []byte, spec Spec, records []Record) ([]byte, error) {
	if len(records) > math.MaxInt32 {
		return nil, fmt.Errorf("record: %d records in one batch", len(records))
	}
	size := 0
	for i := range records {
		n := recordBodySize(&records[i])
		size += varintSize(int64(n)) + n
	}
	body := make([]byte, 0, size)
	lastDelta := max(spec.LastOffsetDelta, 0)
	var maxTsDelta int64
	for i := range records {
		r := &records[i]
		body = appendRecord(body, r)
		lastDelta = max(lastDelta, r.OffsetDelta)
		if i == 0 || r.TimestampDelta > maxTsDelta {
			maxTsDelta = r.TimestampDelta
		}
	}
	maxTs := spec.BaseTimestamp + maxTsDelta
	attrs := int16(spec.Codec) & CodecMask
	if spec.LogAppendTime {
		attrs |= TimestampTypeBit
		maxTs = spec.MaxTimestamp
	}
	if spec.Transactional {
		attrs |= TransactionalBit
	}
	if spec.Control {
		attrs |= ControlBit
	}
	if spec.DeleteHorizon {
		attrs |= DeleteHorizonBit
	}
	start := len(dst)
	dst = append(dst, make([]byte, HeaderSize)...)
	var err error
	if dst, err = Compress(dst, spec.Codec, body); err != nil {
		return nil, err
	}
	b := dst[start:]
	if len(b)-LogOverhead > math.MaxInt32 {
		return nil, fmt.Errorf("record: batch of %d bytes", len(b))
	}
	binary.BigEndian.PutUint64(b[offBaseOffset:], uint64(spec.BaseOffset))
	binary.BigEndian.PutUint32(b[offBatchLength:], uint32(len(b)-LogOverhead))
	binary.BigEndian.PutUint32(b[offPartitionLeaderEpoch:], uint32(spec.PartitionLeaderEpoch))
	b[offMagic] = currentMagicValue
	binary.BigEndian.PutUint16(b[offAttributes:], uint16(attrs))
	binary.BigEndian.PutUint32(b[offLastOffsetDelta:], uint32(lastDelta))
	binary.BigEndian.PutUint64(b[offBaseTimestamp:], uint64(spec.BaseTimestamp))
	binary.BigEndian.PutUint64(b[offMaxTimestamp:], uint64(maxTs))
	binary.BigEndian.PutUint64(b[offProducerID:], uint64(spec.ProducerID))
	binary.BigEndian.PutUint16(b[offProducerEpoch:], uint16(spec.ProducerEpoch))
	binary.BigEndian.PutUint32(b[offBaseSequence:], uint32(spec.BaseSequence))
	binary.BigEndian.PutUint32(b[offRecordCount:], uint32(len(records)))
	binary.BigEndian.PutUint32(b[offCRC:], crc32.Checksum(b[offAttributes:], castagnoli))
	return dst, nil
}

func appendBytes(dst, v []byte, nullable bool) []byte {
	if v == nil && nullable {
		return binary.AppendVarint(dst, -1)
	}
	dst = binary.AppendVarint(dst, int64(len(v)))
	return append(dst, v...)
}

// appendRecord appends r's wire form, length prefix included, without a
// buffer of its own: the length is computed first.
func appendRecord(dst []byte, r *Record) []byte {
	dst = binary.AppendVarint(dst, int64(recordBodySize(r)))
	dst = append(dst, byte(r.Attributes))
	dst = binary.AppendVarint(dst, r.TimestampDelta)
	dst = binary.AppendVarint(dst, int64(r.OffsetDelta))
	dst = appendBytes(dst, r.Key, true)
	dst = appendBytes(dst, r.Value, true)
	dst = binary.AppendVarint(dst, int64(len(r.Headers)))
	for _, h := range r.Headers {
		dst = binary.AppendVarint(dst, int64(len(h.Key)))
		dst = append(dst, h.Key...)
		dst = appendBytes(dst, h.Value, true)
	}
	return dst
}

// recordBodySize is the size of r's wire form after its length prefix.
func recordBodySize(r *Record) int {
	n := 1 + varintSize(r.TimestampDelta) + varintSize(int64(r.OffsetDelta)) +
		bytesSize(r.Key) + bytesSize(r.Value) + varintSize(int64(len(r.Headers)))
	for _, h := range r.Headers {
		n += varintSize(int64(len(h.Key))) + len(h.Key) + bytesSize(h.Value)
	}
	return n
}

// bytesSize is the size of a nullable bytes field: varint length, bytes.
func bytesSize(v []byte) int {
	if v == nil {
		return 1 // varint -1
	}
	return varintSize(int64(len(v))) + len(v)
}

// varintSize is the size of v zigzag-encoded as a varint.
func varintSize(v int64) int {
	u := uint64(v<<1) ^ uint64(v>>63)
	n := 1
	for u >= 0x80 {
		u >>= 7
		n++
	}
	return n
}
