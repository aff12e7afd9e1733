package record

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"strings"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// Errors of Check besides ErrCorrupt (the batch's framing or CRC: the bytes
// may have been damaged on the way) and ErrTooLarge (records that
// decompress past the bound). Callers map them to Kafka codes:
// ErrInvalidRecord to INVALID_RECORD, ErrInvalidTimestamp to
// INVALID_TIMESTAMP, ErrTooLarge to RECORD_LIST_TOO_LARGE.
var (
	// ErrInvalidRecord: a batch whose CRC is right but whose content is not
	// what the format or the topic allows (Kafka's InvalidRecordException).
	// Sending it again can never succeed.
	ErrInvalidRecord = errors.New("record: invalid record")
	// ErrInvalidTimestamp: a record's timestamp outside
	// message.timestamp.before.max.ms/after.max.ms (KIP-937), or a client
	// batch marked LogAppendTime on a LogAppendTime topic.
	ErrInvalidTimestamp = errors.New("record: invalid timestamp")
)

// MaxCheckDecompressedBytes is Check's default bound on the decompressed
// size of a batch's records: librdkafka's receive.message.max.bytes
// default (100,000,000), past which librdkafka (kcat, confluent-kafka)
// cannot decode a zstd batch and stops at it.
const MaxCheckDecompressedBytes = 100_000_000

// NoTimestampBound is the value of Policy.TimestampBeforeMaxMs and
// TimestampAfterMaxMs that bounds nothing (Kafka's Long.MAX_VALUE).
const NoTimestampBound = math.MaxInt64

// Policy is what Check applies to a client's batch besides the format: the
// topic's configs and the time.
type Policy struct {
	// MaxDecompressedBytes bounds the decompressed size of a compressed
	// batch's records; zero or negative means MaxCheckDecompressedBytes,
	// below DefaultMaxDecompressedBytes, the bound every reader of the
	// log (Records, the cleaner, dump-log) applies, so that whatever is
	// accepted can be read back.
	MaxDecompressedBytes int
	// Compacted is cleanup.policy containing compact: every record needs
	// a key.
	Compacted bool
	// LogAppendTime is message.timestamp.type=LogAppendTime: the broker
	// stamps the time, and a client batch must not claim to have.
	LogAppendTime bool
	// NowMillis is the broker's time, milliseconds since the epoch, for the
	// timestamp bounds.
	NowMillis int64
	// TimestampBeforeMaxMs and TimestampAfterMaxMs are
	// message.timestamp.before.max.ms and message.timestamp.after.max.ms
	// (KIP-937): under CreateTime, a record more than that many
	// milliseconds before or after NowMillis is refused. Zero means zero;
	// NoTimestampBound bounds nothing.
	TimestampBeforeMaxMs int64
	TimestampAfterMaxMs  int64
}

// RecordError is one record's fault: its index in the batch (counting from
// 0) and what is wrong (Produce v8+ record_errors, KIP-467).
type RecordError struct {
	BatchIndex int32
	Message    string
}

// ValidationError is why Check refused a batch. Err is ErrCorrupt,
// ErrInvalidRecord, ErrInvalidTimestamp or ErrTooLarge (errors.Is sees it);
// Message is the text for the Produce response's error_message; Records
// lists the records at fault, when the fault is in records.
type ValidationError struct {
	Err     error
	Message string
	Records []RecordError
}

func (e *ValidationError) Error() string { return e.Message }
func (e *ValidationError) Unwrap() error { return e.Err }

// Batch is one whole v2 batch that Check accepted, with its parsed header:
// what the produce path hands to the partition and the log, so that no one
// parses it again.
type Batch struct {
	// Bytes is the batch as the producer sent it (Check never rewrites
	// it).
	Bytes  []byte
	Header Header
	// checked is set by Check only.
	checked bool
}

// Checked reports whether Check accepted the batch (a Batch built by hand
// was not).
func (b *Batch) Checked() bool { return b.checked }

// Check validates b, one whole v2 batch from a client, as Kafka's
// LogValidator and DefaultRecordBatch do before an append, plus what
// passthrough storage needs (offset deltas 0..n-1 in order, since the
// batch is stored as sent):
//
//   - framing: the length field matches len(b) (else ErrCorrupt), the
//     CRC-32C matches (else ErrCorrupt);
//   - the header: a known codec (0-4), not a control batch (only the
//     transaction coordinator writes those), a record count above zero
//     and equal to lastOffsetDelta+1, a producer id with a base sequence
//     of 0 or more, a transactional batch with a producer id; under
//     LogAppendTime, not already marked LogAppendTime (ErrInvalidTimestamp);
//   - every record, decompressed in streaming fashion for compressed
//     batches (at most pol.MaxDecompressedBytes, else ErrTooLarge): its
//     length, varints that fit their type, offset delta equal to its
//     index, key, value and header lengths of -1 (null; header keys may
//     not be null) or within the record, a header count that fits, no
//     bytes left in a record, no bytes left after the last;
//   - the topic's rules: a key on every record of a compacted topic
//     (ErrInvalidRecord), timestamps within the KIP-937 bounds under
//     CreateTime (ErrInvalidTimestamp), then the header's max timestamp
//     within them too (it is stored as sent).
//
// Every other fault is ErrInvalidRecord. The error is a *ValidationError.
// Check reads b and never writes it; it allocates nothing per record
// (decompressors and buffers are pooled) and nothing at all for an
// uncompressed batch it accepts. Safe for concurrent use.
func Check(b []byte, pol *Policy) (Batch, error) {
	h, err := checkHeader(b, pol)
	if err != nil {
		return Batch{}, err
	}
	w := walker{pol: pol, h: h}
	if h.Codec() == CodecNone {
		s := src{b: b[HeaderSize:]}
		err = w.walk(&s)
	} else {
		err = w.walkCompressed(h.Codec(), b[HeaderSize:])
	}
	if err != nil {
		return Batch{}, err
	}
	if len(w.errs) > 0 {
		return Batch{}, recordErrors(w.errs, w.badTimestamp)
	}
	// The header's max timestamp is stored as sent (Kafka's broker
	// recomputes it from the records): it sets the segment's largest
	// timestamp, which time retention, log rolling and the time index
	// read, so it is held to the records' bounds. One claiming a time
	// years ahead would keep its segment from ever being deleted.
	if !pol.LogAppendTime && h.MaxTimestamp != -1 && outOfBounds(pol, h.MaxTimestamp) {
		return Batch{}, invalid(ErrInvalidTimestamp, "Batch max timestamp %d is out of range. The timestamp should be within [%d, %d]",
			h.MaxTimestamp, satAdd(pol.NowMillis, -pol.TimestampBeforeMaxMs), satAdd(pol.NowMillis, pol.TimestampAfterMaxMs))
	}
	return Batch{Bytes: b, Header: h, checked: true}, nil
}

func invalid(sentinel error, format string, args ...any) *ValidationError {
	return &ValidationError{Err: sentinel, Message: fmt.Sprintf(format, args...)}
}

// checkHeader checks the framing, the CRC and Kafka's batch rules.
func checkHeader(b []byte, pol *Policy) (Header, error) {
	h, err := ParseHeader(b)
	if err != nil {
		return h, invalid(ErrCorrupt, "%v", err)
	}
	if h.BatchLength < HeaderSize-LogOverhead || int64(h.BatchLength)+LogOverhead != int64(len(b)) {
		return h, invalid(ErrCorrupt, "batch length %d for %d bytes", h.BatchLength, len(b))
	}
	if got := crc32.Checksum(b[offAttributes:], castagnoli); got != h.CRC {
		return h, invalid(ErrCorrupt, "Record is corrupt (stored crc = %d, computed crc = %d)", h.CRC, got)
	}
	if c := h.Codec(); c > CodecZstd {
		return h, invalid(ErrInvalidRecord, "Unknown compression type id: %d", c)
	}
	// Kafka's LogValidator.validateBatch for client appends.
	if h.LastOffsetDelta < 0 {
		return h, invalid(ErrInvalidRecord, "Batch has an invalid offset range: [0, %d]", h.LastOffsetDelta)
	}
	if h.NumRecords <= 0 {
		return h, invalid(ErrInvalidRecord, "Invalid reported count for record batch: %d", h.NumRecords)
	}
	if int64(h.LastOffsetDelta)+1 != int64(h.NumRecords) {
		return h, invalid(ErrInvalidRecord, "Inconsistent batch offset range [0, %d] and count of records %d", h.LastOffsetDelta, h.NumRecords)
	}
	if h.IsControl() {
		return h, invalid(ErrInvalidRecord, "Clients are not allowed to write control records")
	}
	if h.ProducerID >= 0 && h.BaseSequence < 0 {
		return h, invalid(ErrInvalidRecord, "Invalid sequence number %d in record batch with producerId %d", h.BaseSequence, h.ProducerID)
	}
	if h.IsTransactional() && h.ProducerID < 0 {
		return h, invalid(ErrInvalidRecord, "Transactional record batch without a producer id (%d)", h.ProducerID)
	}
	// The delete horizon (KIP-534) is the cleaner's to set: one from a
	// client would make the cleaner drop the batch's tombstones at its
	// first pass. Kafka keeps the bit as sent; no client sets it.
	if h.Attributes&DeleteHorizonBit != 0 {
		return h, invalid(ErrInvalidRecord, "Clients are not allowed to set the delete horizon flag of a record batch")
	}
	// LogAppendTime is the broker's to set, on either kind of topic:
	// Kafka rewrites the bit to the topic's type, and since Samsa stores
	// the producer's bytes it refuses it, or readers of a CreateTime topic
	// would see every record at the batch's max timestamp.
	if h.IsLogAppendTime() {
		return h, &ValidationError{Err: ErrInvalidTimestamp,
			Message: "Invalid timestamp type in record batch. Producer should not set timestamp type to LogAppendTime.",
			Records: []RecordError{{BatchIndex: 0, Message: "Producer should not set timestamp type to LogAppendTime."}}}
	}
	return h, nil
}

// maxRecordErrors bounds the record errors one refusal lists.
const maxRecordErrors = 100

// walker checks the records of one batch.
type walker struct {
	pol *Policy
	h   Header
	// errs are the record errors of the topic's rules (keys, timestamps),
	// which Kafka collects for the whole batch; badTimestamp tells whether
	// one of them is a timestamp's.
	errs         []RecordError
	badTimestamp bool
}

// recordErrors is the refusal of a batch with record errors errs, as
// Kafka's LogValidator.processRecordErrors words it.
func recordErrors(errs []RecordError, badTimestamp bool) *ValidationError {
	e := &ValidationError{Err: ErrInvalidRecord, Records: errs}
	if badTimestamp {
		e.Err = ErrInvalidTimestamp
		e.Message = "One or more records have been rejected due to invalid timestamp"
		return e
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "One or more records have been rejected due to %d record errors in total, and only showing the first three errors at most: [", len(errs))
	for i, re := range errs[:min(3, len(errs))] {
		if i > 0 {
			sb.WriteString(", ")
		}
		fmt.Fprintf(&sb, "RecordError(batchIndex=%d, message='%s')", re.BatchIndex, re.Message)
	}
	sb.WriteString("]")
	e.Message = sb.String()
	return e
}

func (w *walker) ruleError(i int32, timestamp bool, format string, args ...any) {
	w.badTimestamp = w.badTimestamp || timestamp
	if len(w.errs) < maxRecordErrors {
		w.errs = append(w.errs, RecordError{BatchIndex: i, Message: fmt.Sprintf(format, args...)})
	}
}

// walk checks h.NumRecords records in s and that nothing follows them.
func (w *walker) walk(s *src) error {
	for i := range w.h.NumRecords {
		if err := w.record(s, i); err != nil {
			return err
		}
	}
	if err := s.atEnd(); err != nil {
		if errors.Is(err, errTrailing) {
			return invalid(ErrInvalidRecord, "Incorrect declared batch size, records still remaining in file (after %d records)", w.h.NumRecords)
		}
		return w.streamError(w.h.NumRecords, err)
	}
	return nil
}

// streamError turns an error of the source into the batch's.
func (w *walker) streamError(i int32, err error) error {
	if errors.Is(err, ErrTooLarge) {
		return &ValidationError{Err: ErrTooLarge, Message: fmt.Sprintf("Records of the %v batch decompress to more than %d bytes", w.h.Codec(), w.pol.maxDecompressed())}
	}
	return &ValidationError{Err: ErrInvalidRecord,
		Message: fmt.Sprintf("Corrupt %v data in record batch at record %d: %v", w.h.Codec(), i, err),
		Records: []RecordError{{BatchIndex: i, Message: err.Error()}}}
}

func (p *Policy) maxDecompressed() int {
	if p.MaxDecompressedBytes <= 0 {
		return MaxCheckDecompressedBytes
	}
	return p.MaxDecompressedBytes
}

// fail is the refusal of record i for a fault of its structure.
func (w *walker) fail(i int32, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	return &ValidationError{Err: ErrInvalidRecord,
		Message: fmt.Sprintf("Found invalid record structure at record %d of %d: %s", i, w.h.NumRecords, msg),
		Records: []RecordError{{BatchIndex: i, Message: msg}}}
}

// record checks record i of the batch (see Record for the layout).
func (w *walker) record(s *src, i int32) error {
	size, err := s.varint32()
	if err != nil {
		if s.r != nil && !errors.Is(err, errShort) && !errors.Is(err, errVarint) {
			return w.streamError(i, err)
		}
		return w.fail(i, "record length: %v", err)
	}
	if size <= 0 {
		return w.fail(i, "invalid record size %d", size)
	}
	if s.r != nil && int(size) <= s.r.Size() {
		// The record fits the read buffer: walk it in place, as an
		// uncompressed one, then step over it.
		body, err := s.r.Peek(int(size))
		if err != nil {
			if errors.Is(err, io.EOF) {
				return w.fail(i, "Invalid record size: expected %d bytes in record payload, but only %d remain", size, len(body))
			}
			return w.streamError(i, err)
		}
		in := src{b: body}
		if err := w.body(&in, i, size, int64(size)); err != nil {
			return err
		}
		d, err := s.r.Discard(int(size))
		s.n += int64(d)
		return err
	}
	if err := s.fits(int64(size)); err != nil {
		return w.fail(i, "Invalid record size: expected %d bytes in record payload, but %v", size, err)
	}
	return w.body(s, i, size, s.n+int64(size))
}

// body checks the fields of record i, size bytes, which end at s's
// position end.
func (w *walker) body(s *src, i, size int32, end int64) error {
	fail := func(format string, args ...any) error { return w.fail(i, format, args...) }
	// In-record reads are bounded by end: a short stream is corrupt data.
	field := func(name string, err error) error {
		if s.r != nil && !errors.Is(err, errShort) && !errors.Is(err, errVarint) && !errors.Is(err, errPastRecord) {
			return w.streamError(i, err)
		}
		return fail("%s: %v", name, err)
	}
	if err := s.skip(1, end); err != nil { // attributes: unused
		return field("attributes", err)
	}
	tsDelta, err := s.varlong(end)
	if err != nil {
		return field("timestamp delta", err)
	}
	offDelta, err := s.varint32In(end)
	if err != nil {
		return field("offset delta", err)
	}
	if offDelta != i {
		return fail("offset delta %d, expected %d (offset deltas must be 0 to %d in order)", offDelta, i, w.h.NumRecords-1)
	}
	keyLen, err := s.varint32In(end)
	if err != nil {
		return field("key length", err)
	}
	if err := s.skipBytes(keyLen, true, end); err != nil {
		return field("key", err)
	}
	valLen, err := s.varint32In(end)
	if err != nil {
		return field("value length", err)
	}
	if err := s.skipBytes(valLen, true, end); err != nil {
		return field("value", err)
	}
	count, err := s.varint32In(end)
	if err != nil {
		return field("header count", err)
	}
	// Each header takes at least two bytes.
	if count < 0 || int64(count) > (end-s.n)/2 {
		return fail("Found invalid number of record headers %d", count)
	}
	for range count {
		n, err := s.varint32In(end)
		if err != nil {
			return field("header key length", err)
		}
		if err := s.skipBytes(n, false, end); err != nil {
			return field("header key", err)
		}
		if n, err = s.varint32In(end); err != nil {
			return field("header value length", err)
		}
		if err := s.skipBytes(n, true, end); err != nil {
			return field("header value", err)
		}
	}
	if s.n != end {
		return fail("Invalid record size: expected to read %d bytes in record payload, but instead read %d", size, int64(size)-(end-s.n))
	}
	// The topic's rules, collected for the whole batch as Kafka does.
	if w.pol.Compacted && keyLen < 0 {
		w.ruleError(i, false, "Compacted topic cannot accept message without key")
	}
	if !w.pol.LogAppendTime {
		w.checkTimestamp(i, w.h.BaseTimestamp+tsDelta)
	}
	return nil
}

// checkTimestamp applies message.timestamp.before/after.max.ms (KIP-937)
// to record i's timestamp ts; -1 is no timestamp.
func (w *walker) checkTimestamp(i int32, ts int64) {
	p := w.pol
	if ts == -1 || (p.TimestampBeforeMaxMs == NoTimestampBound && p.TimestampAfterMaxMs == NoTimestampBound) {
		return
	}
	if outOfBounds(p, ts) {
		w.ruleError(i, true, "Timestamp %d of message with offset %d is out of range. The timestamp should be within [%d, %d]",
			ts, i, satAdd(p.NowMillis, -p.TimestampBeforeMaxMs), satAdd(p.NowMillis, p.TimestampAfterMaxMs))
	}
}

// outOfBounds reports whether timestamp ts is more than
// TimestampBeforeMaxMs before or TimestampAfterMaxMs after NowMillis.
func outOfBounds(p *Policy, ts int64) bool {
	// Differences as uint64: exact for any two int64s.
	late := ts < p.NowMillis && uint64(p.NowMillis)-uint64(ts) > uint64(p.TimestampBeforeMaxMs)
	early := ts > p.NowMillis && uint64(ts)-uint64(p.NowMillis) > uint64(p.TimestampAfterMaxMs)
	return late || early
}

// satAdd is a+b saturated to the int64 range.
func satAdd(a, b int64) int64 {
	s := a + b
	if (b > 0 && s < a) || (b < 0 && s > a) {
		if b > 0 {
			return math.MaxInt64
		}
		return math.MinInt64
	}
	return s
}

// Errors of src.
var (
	errVarint     = errors.New("varint overflows its type")
	errPastRecord = errors.New("field runs past the end of the record")
	errTrailing   = errors.New("bytes after the last record")
)

// src is the records of a batch: in memory (b, r nil), or decompressed in
// streaming fashion (r). n counts the bytes consumed.
type src struct {
	b []byte
	r *bufio.Reader
	n int64
}

// readByte reads one byte: errShort at the end.
func (s *src) readByte() (byte, error) {
	if s.r == nil {
		if len(s.b) == 0 {
			return 0, errShort
		}
		c := s.b[0]
		s.b = s.b[1:]
		s.n++
		return c, nil
	}
	c, err := s.r.ReadByte()
	if err != nil {
		if err == io.EOF {
			return 0, errShort
		}
		return 0, err
	}
	s.n++
	return c, nil
}

// varlong reads a zigzag varint of at most 10 bytes, not past end (zero
// for no bound).
func (s *src) varlong(end int64) (int64, error) {
	if s.r == nil {
		win, past := s.b, false
		if end > 0 && end-s.n < int64(len(win)) {
			win, past = win[:end-s.n], true
		}
		v, n := binary.Varint(win)
		switch {
		case n > 0:
			s.b = s.b[n:]
			s.n += int64(n)
			return v, nil
		case n < 0:
			return 0, errVarint
		case past:
			return 0, errPastRecord
		}
		return 0, errShort
	}
	var ux uint64
	for shift := uint(0); ; shift += 7 {
		if end > 0 && s.n >= end {
			return 0, errPastRecord
		}
		c, err := s.readByte()
		if err != nil {
			return 0, err
		}
		if shift == 63 && c > 1 {
			return 0, errVarint
		}
		ux |= uint64(c&0x7f) << shift
		if c < 0x80 {
			break
		}
	}
	return int64(ux>>1) ^ -int64(ux&1), nil
}

func (s *src) varint32() (int32, error) { return s.varint32In(0) }

// varint32In reads a zigzag varint that must fit 32 bits.
func (s *src) varint32In(end int64) (int32, error) {
	v, err := s.varlong(end)
	if err != nil {
		return 0, err
	}
	if v < math.MinInt32 || v > math.MaxInt32 {
		return 0, fmt.Errorf("%w: %d", errVarint, v)
	}
	return int32(v), nil
}

// fits checks that n more bytes can follow. A stream's length is not
// known ahead: its reads fail at its end.
func (s *src) fits(n int64) error {
	if s.r == nil && n > int64(len(s.b)) {
		return fmt.Errorf("only %d bytes remain", len(s.b))
	}
	return nil
}

// skip consumes n bytes, not past end.
func (s *src) skip(n int, end int64) error {
	if int64(n) > end-s.n {
		return errPastRecord
	}
	if s.r == nil {
		if n > len(s.b) {
			return errShort
		}
		s.b = s.b[n:]
		s.n += int64(n)
		return nil
	}
	d, err := s.r.Discard(n)
	s.n += int64(d)
	if err != nil {
		if err == io.EOF {
			return errShort
		}
		return err
	}
	return nil
}

// skipBytes consumes a field of length n: -1 is null, when nullable.
func (s *src) skipBytes(n int32, nullable bool, end int64) error {
	if n == -1 && nullable {
		return nil
	}
	if n < 0 {
		return fmt.Errorf("invalid length %d", n)
	}
	return s.skip(int(n), end)
}

// atEnd checks that nothing follows: errTrailing, or the stream's error
// (reading to its end lets the codec check its own checksums).
func (s *src) atEnd() error {
	if s.r == nil {
		if len(s.b) != 0 {
			return errTrailing
		}
		return nil
	}
	if _, err := s.r.ReadByte(); err != io.EOF {
		if err == nil {
			return errTrailing
		}
		return err
	}
	return nil
}

// stream is the pooled state of a compressed batch's check: the
// decompressors, each made on first use, and the buffers.
type stream struct {
	in   bytes.Reader
	lim  limitReader
	buf  *bufio.Reader
	gz   *gzip.Reader
	lz   *lz4.Reader
	zs   *zstd.Decoder
	snap []byte // snappy's decoded block(s)
}

// streamBufSize is the read buffer between the decompressor and the
// record walk.
const streamBufSize = 32 << 10

// streams keeps the states of compressed batch checks for reuse: a free
// list, not a sync.Pool, because a pool is emptied by every other garbage
// collection, and a busy broker collects often: remaking zstd decoders
// and lz4 readers, whose buffers are large, then cost more than the
// decompression. It holds at most maxIdleStreams states.
var streams = make(chan *stream, maxIdleStreams)

// maxIdleStreams bounds the idle states kept: as many as produce requests
// checked at once on a busy broker, about its cores.
const maxIdleStreams = 16

func getStream() *stream {
	select {
	case st := <-streams:
		return st
	default:
		return &stream{buf: bufio.NewReaderSize(nil, streamBufSize)}
	}
}

func putStream(st *stream) {
	select {
	case streams <- st:
	default:
	}
}

// limitReader fails with ErrTooLarge once more than max bytes were read.
type limitReader struct {
	r    io.Reader
	left int64
}

func (l *limitReader) Read(p []byte) (int, error) {
	if l.left <= 0 {
		// One byte more tells a stream at its bound from one past it.
		var one [1]byte
		n, err := l.r.Read(one[:])
		if n > 0 {
			return 0, ErrTooLarge
		}
		return 0, err
	}
	if int64(len(p)) > l.left {
		p = p[:l.left]
	}
	n, err := l.r.Read(p)
	l.left -= int64(n)
	return n, err
}

// walkCompressed decompresses data with codec as it walks the records.
func (w *walker) walkCompressed(codec Codec, data []byte) (err error) {
	st := getStream()
	defer putStream(st)
	limit := int64(w.pol.maxDecompressed())
	st.in.Reset(data)
	var r io.Reader
	switch codec {
	case CodecGzip:
		if st.gz == nil {
			st.gz, err = gzip.NewReader(&st.in)
		} else {
			err = st.gz.Reset(&st.in)
		}
		if err != nil {
			return w.streamError(0, err)
		}
		// One member, as librdkafka reads it: it stops after the first
		// one, and would skip records the next members hold.
		st.gz.Multistream(false)
		r = st.gz
		defer func() {
			if err == nil && st.in.Len() > 0 {
				err = w.streamError(w.h.NumRecords, fmt.Errorf("%d bytes after the gzip member", st.in.Len()))
			}
		}()
	case CodecLZ4:
		if err := checkLZ4Frame(data); err != nil {
			return w.streamError(0, err)
		}
		if st.lz == nil {
			st.lz = lz4.NewReader(nil)
		}
		st.lz.Reset(&st.in)
		defer st.lz.Reset(nil)
		r = st.lz
	case CodecZstd:
		if st.zs == nil {
			d, err := zstd.NewReader(nil,
				zstd.WithDecoderConcurrency(1),
				zstd.WithDecoderLowmem(true),
				zstd.WithDecoderMaxWindow(zstdMaxWindow),
				zstd.WithDecoderMaxMemory(uint64(DefaultMaxDecompressedBytes)))
			if err != nil {
				return fmt.Errorf("record: zstd decoder: %w", err)
			}
			st.zs = d
		}
		if err := st.zs.Reset(&st.in); err != nil {
			return w.streamError(0, err)
		}
		defer st.zs.Reset(nil) //nolint:errcheck // only drops the reference to data
		r = st.zs
	case CodecSnappy:
		out, err := decodeSnappy(st.snap[:0], data, int(limit))
		if cap(out) > cap(st.snap) && cap(out) <= 8<<20 {
			st.snap = out[:0] // keep the buffer, unless a giant
		}
		if err != nil {
			return w.streamError(0, err)
		}
		s := src{b: out}
		return w.walk(&s)
	default:
		return invalid(ErrInvalidRecord, "Unknown compression type id: %d", codec)
	}
	st.lim = limitReader{r: r, left: limit}
	st.buf.Reset(&st.lim)
	defer st.buf.Reset(nil)
	s := src{r: st.buf}
	return w.walk(&s)
}
