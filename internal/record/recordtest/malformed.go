// Package recordtest builds malformed record batches for tests: every
// field of the v2 format mutated (negative, overflowing, truncated), each
// codec with garbage, valid compressed frames holding bad records, header
// flags a client may not set. The record package's unit tests and the
// broker's end-to-end tests share the table, so that each case is checked
// at both levels.
package recordtest

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"math"
	"math/rand/v2"

	"github.com/klauspost/compress/s2"
	"github.com/pierrec/lz4/v4"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/samsahq/samsa/internal/record"
)

// Case is one malformed batch and what the broker answers it.
type Case struct {
	Name  string
	Batch []byte
	// Err is the record package's sentinel Check returns.
	Err error
	// Code is the Kafka error code of the Produce response.
	Code int16
	// RecordErrors is whether the response lists record errors.
	RecordErrors bool
}

// V is a zigzag varint.
func V(v int64) []byte { return binary.AppendVarint(nil, v) }

// Rec is a record's wire form: its fields concatenated, prefixed by their
// length.
func Rec(fields ...[]byte) []byte {
	body := bytes.Join(fields, nil)
	return append(V(int64(len(body))), body...)
}

// Good is a well-formed record with offset delta i: attributes 0,
// timestamp delta 0, key "k", value "value", no headers.
func Good(i int) []byte {
	return Rec([]byte{0}, V(0), V(int64(i)), V(1), []byte("k"), V(5), []byte("value"), V(0))
}

// Spec is the header of a batch Raw builds.
type Spec struct {
	Codec           record.Codec // may be an undefined id (5-7)
	Attributes      int16        // more attribute bits
	LastOffsetDelta int32
	Count           int32
	BaseTimestamp   int64
	ProducerID      int64
	ProducerEpoch   int16
	BaseSequence    int32
}

// Plain is the header of an uncompressed batch of n records without a
// producer id, timestamps now.
func Plain(n int32, nowMillis int64) Spec {
	return Spec{LastOffsetDelta: n - 1, Count: n, BaseTimestamp: nowMillis, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}
}

// Raw builds a batch of spec around body, the records already in their
// wire form, compressed with spec.Codec when it is a defined one (an
// undefined codec keeps body as is), CRC computed.
func Raw(spec Spec, body []byte) []byte {
	if spec.Codec >= record.CodecGzip && spec.Codec <= record.CodecZstd {
		c, err := record.Compress(nil, spec.Codec, body)
		if err != nil {
			panic(err)
		}
		body = c
	}
	return RawCompressed(spec, body)
}

// RawCompressed builds a batch of spec around payload taken as the
// records already compressed (or garbage claiming to be).
func RawCompressed(spec Spec, payload []byte) []byte {
	b := make([]byte, record.HeaderSize, record.HeaderSize+len(payload))
	b = append(b, payload...)
	binary.BigEndian.PutUint64(b[0:], 0)
	binary.BigEndian.PutUint32(b[8:], uint32(len(b)-record.LogOverhead))
	binary.BigEndian.PutUint32(b[12:], 0)
	b[16] = 2
	binary.BigEndian.PutUint16(b[21:], uint16(int16(spec.Codec)&record.CodecMask|spec.Attributes))
	binary.BigEndian.PutUint32(b[23:], uint32(spec.LastOffsetDelta))
	binary.BigEndian.PutUint64(b[27:], uint64(spec.BaseTimestamp))
	binary.BigEndian.PutUint64(b[35:], uint64(spec.BaseTimestamp))
	binary.BigEndian.PutUint64(b[43:], uint64(spec.ProducerID))
	binary.BigEndian.PutUint16(b[51:], uint16(spec.ProducerEpoch))
	binary.BigEndian.PutUint32(b[53:], uint32(spec.BaseSequence))
	binary.BigEndian.PutUint32(b[57:], uint32(spec.Count))
	FixCRC(b)
	return b
}

// FixCRC recomputes the CRC of batch b in place.
func FixCRC(b []byte) {
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))
}

// cat joins records.
func cat(recs ...[]byte) []byte { return bytes.Join(recs, nil) }

// Malformed is the table of batches no broker may accept, for a topic
// with default configs (delete policy, CreateTime without bounds). Each
// case is built for every codec where the fault is in the records, so
// that the streaming decompression is checked as the in-memory walk is.
func Malformed(nowMillis int64) []Case {
	invalid := func(name string, spec Spec, body []byte) Case {
		return Case{Name: name, Batch: Raw(spec, body), Err: record.ErrInvalidRecord, Code: kerr.InvalidRecord.Code, RecordErrors: true}
	}
	two := Plain(2, nowMillis)
	one := Plain(1, nowMillis)
	k := []byte("k")
	// Faults in the records, for every codec.
	type recCase struct {
		name string
		spec Spec
		body []byte
		// batchLevel: the fault is the batch's (bytes after the last
		// record), so no record is listed.
		batchLevel bool
	}
	recs := []recCase{
		{"record length -5", one, append(V(-5), Good(0)...), false},
		{"record length 0", one, append(V(0), Good(0)...), false},
		{"record length past the batch", one, append(V(1000), Good(0)[1:]...), false},
		{"record length overflows 32 bits", one, append(V(1<<33), Good(0)[1:]...), false},
		{"record length varint of 11 bytes", one, bytes.Repeat([]byte{0xff}, 11), false},
		{"record length truncated varint", one, []byte{0x80}, false},
		{"key length 2^40", one, Rec([]byte{0}, V(0), V(0), V(1<<40), k, V(1), k, V(0)), false},
		{"key length -2", one, Rec([]byte{0}, V(0), V(0), V(-2), V(1), k, V(0)), false},
		{"key length past the record", one, Rec([]byte{0}, V(0), V(0), V(100), k, V(1), k, V(0)), false},
		{"value length -7", one, Rec([]byte{0}, V(0), V(0), V(1), k, V(-7), V(0)), false},
		{"value length past the record", one, Rec([]byte{0}, V(0), V(0), V(1), k, V(50), k, V(0)), false},
		{"header count 2^31", one, Rec([]byte{0}, V(0), V(0), V(1), k, V(1), k, V(1<<31)), false},
		{"header count -1", one, Rec([]byte{0}, V(0), V(0), V(1), k, V(1), k, V(-1)), false},
		{"header count past the record", one, Rec([]byte{0}, V(0), V(0), V(1), k, V(1), k, V(3), V(1), k, V(1), k), false},
		{"header key null", one, Rec([]byte{0}, V(0), V(0), V(1), k, V(1), k, V(1), V(-1), V(1), k), false},
		{"header key length past the record", one, Rec([]byte{0}, V(0), V(0), V(1), k, V(1), k, V(1), V(9), k, V(1), k), false},
		{"header value length -3", one, Rec([]byte{0}, V(0), V(0), V(1), k, V(1), k, V(1), V(1), k, V(-3)), false},
		{"timestamp delta overflows 64 bits", one, Rec([]byte{0}, bytes.Repeat([]byte{0xff}, 10), []byte{0x7f}, V(0), V(1), k, V(1), k, V(0)), false},
		{"offset delta overflows 32 bits", one, Rec([]byte{0}, V(0), V(1<<35), V(1), k, V(1), k, V(0)), false},
		{"record shorter than its fields", one, Rec([]byte{0}, V(0), V(0), V(1)), false},
		{"byte left in a record", one, Rec([]byte{0}, V(0), V(0), V(1), k, V(1), k, V(0), []byte{9}), false},
		{"record truncated in a varint", one, Rec([]byte{0}, V(0), V(0), V(1), k, V(1), k, []byte{0x80}), false},
		{"garbage after the last record", one, cat(Good(0), []byte{1, 2, 3}), true},
		{"one byte after the last record", one, cat(Good(0), []byte{0}), true},
		{"count 2 with one record", two, Good(0), false},
		{"duplicate offset deltas", two, cat(Good(0), Good(0)), false},
		{"offset deltas out of order", two, cat(Good(1), Good(0)), false},
		{"offset delta skips", two, cat(Good(0), Good(2)), false},
		{"offset delta -1", one, Good(-1), false},
		{"empty records", one, nil, false},
	}
	var out []Case
	for _, codec := range []record.Codec{record.CodecNone, record.CodecGzip, record.CodecSnappy, record.CodecLZ4, record.CodecZstd} {
		for _, rc := range recs {
			spec := rc.spec
			spec.Codec = codec
			out = append(out, invalid(codec.String()+"/"+rc.name, spec, rc.body))
			out[len(out)-1].RecordErrors = !rc.batchLevel
		}
	}
	// Garbage labelled with each codec, and undefined codecs.
	rng := rand.New(rand.NewPCG(1, 2))
	garbage := make([]byte, 200)
	for i := range garbage {
		garbage[i] = byte(rng.UintN(256))
	}
	for _, codec := range []record.Codec{record.CodecGzip, record.CodecSnappy, record.CodecLZ4, record.CodecZstd} {
		spec := two
		spec.Codec = codec
		out = append(out, invalid(codec.String()+"/200 random bytes", spec, nil))
		out[len(out)-1].Batch = RawCompressed(spec, garbage)
		// A valid frame around garbage records.
		out = append(out, invalid(codec.String()+"/valid frame of random records", spec, garbage))
		// A valid frame cut short.
		full := Raw(spec, cat(Good(0), Good(1)))
		cut := RawCompressed(spec, full[record.HeaderSize:len(full)-4])
		out = append(out, Case{Name: codec.String() + "/frame cut short", Batch: cut, Err: record.ErrInvalidRecord, Code: kerr.InvalidRecord.Code})
	}
	for _, id := range []record.Codec{5, 6, 7} {
		spec := one
		spec.Codec = id
		out = append(out, Case{Name: "undefined codec " + string(rune('0'+id)), Batch: Raw(spec, Good(0)), Err: record.ErrInvalidRecord, Code: kerr.InvalidRecord.Code})
	}
	// The header.
	hdr := func(name string, mut func(*Spec), body []byte) {
		spec := one
		mut(&spec)
		out = append(out, Case{Name: "header/" + name, Batch: Raw(spec, body), Err: record.ErrInvalidRecord, Code: kerr.InvalidRecord.Code})
	}
	hdr("last offset delta 7 for 2 records", func(s *Spec) { *s = two; s.LastOffsetDelta = 7 }, cat(Good(0), Good(1)))
	hdr("last offset delta -1", func(s *Spec) { s.LastOffsetDelta = -1 }, Good(0))
	hdr("last offset delta MaxInt32", func(s *Spec) { s.LastOffsetDelta = math.MaxInt32 }, Good(0))
	hdr("count 0", func(s *Spec) { s.Count, s.LastOffsetDelta = 0, -1 }, nil)
	hdr("count -1", func(s *Spec) { s.Count = -1 }, Good(0))
	hdr("count MinInt32", func(s *Spec) { s.Count = math.MinInt32 }, Good(0))
	hdr("transactional with producer id -1", func(s *Spec) { s.Attributes = record.TransactionalBit }, Good(0))
	hdr("producer id without a sequence", func(s *Spec) { s.ProducerID, s.ProducerEpoch, s.BaseSequence = 7, 0, -1 }, Good(0))
	hdr("control batch from a client", func(s *Spec) {
		s.Attributes = record.ControlBit | record.TransactionalBit
		s.ProducerID, s.ProducerEpoch = 7, 0
	}, Good(0))
	// Compressed forms our decoders read and Kafka's Java client or
	// librdkafka do not (or read only in part): every reader must read
	// what is accepted.
	for _, oc := range OtherCodecForms(cat(Good(0), Good(1))) {
		spec := two
		spec.Codec = oc.Codec
		out = append(out, Case{Name: oc.Name, Batch: RawCompressed(spec, oc.Payload), Err: record.ErrInvalidRecord, Code: kerr.InvalidRecord.Code, RecordErrors: true})
	}
	// Framing and CRC: CORRUPT_MESSAGE, which the client may retry (bytes
	// damaged on the way).
	badCRC := Raw(one, Good(0))
	badCRC[len(badCRC)-1] ^= 0xff
	out = append(out, Case{Name: "frame/crc mismatch", Batch: badCRC, Err: record.ErrCorrupt, Code: kerr.CorruptMessage.Code})
	return out
}

// CodecForm is records compressed in a form of a codec that not every
// Kafka client reads.
type CodecForm struct {
	Name    string
	Codec   record.Codec
	Payload []byte
}

// OtherCodecForms compresses recs, the wire form of two or more records,
// in the forms klauspost's and pierrec's decoders read and Kafka's Java
// client or librdkafka (kcat) do not: an S2 block labelled snappy (S2's
// repeat copies), an LZ4 legacy frame, a skippable frame before an LZ4
// frame, two LZ4 frames, two gzip members (librdkafka reads the first
// only, and skips the records of the second).
func OtherCodecForms(recs []byte) []CodecForm {
	first := Good(0)
	if !bytes.HasPrefix(recs, first) {
		panic("recordtest: OtherCodecForms wants records starting with Good(0)")
	}
	rest := recs[len(first):]
	comp := func(c record.Codec, b []byte) []byte {
		out, err := record.Compress(nil, c, b)
		if err != nil {
			panic(err)
		}
		return out
	}
	var legacy bytes.Buffer
	w := lz4.NewWriter(&legacy)
	if err := w.Apply(lz4.LegacyOption(true)); err != nil {
		panic(err)
	}
	if _, err := w.Write(recs); err != nil {
		panic(err)
	}
	if err := w.Close(); err != nil {
		panic(err)
	}
	// A value S2 encodes with repeat copies.
	val := bytes.Repeat([]byte("abcdefgh"), 4096)
	s2recs := cat(Rec([]byte{0}, V(0), V(0), V(-1), V(int64(len(val))), val, V(0)), rest)
	skippable := binary.LittleEndian.AppendUint32(nil, 0x184D2A50)
	skippable = binary.LittleEndian.AppendUint32(skippable, 3)
	skippable = append(skippable, 1, 2, 3)
	return []CodecForm{
		{"snappy/S2 block with repeat copies", record.CodecSnappy, s2.Encode(nil, s2recs)},
		{"lz4/legacy frame", record.CodecLZ4, legacy.Bytes()},
		{"lz4/skippable frame first", record.CodecLZ4, append(skippable, comp(record.CodecLZ4, recs)...)},
		{"lz4/two frames", record.CodecLZ4, append(comp(record.CodecLZ4, first), comp(record.CodecLZ4, rest)...)},
		{"gzip/two members", record.CodecGzip, append(comp(record.CodecGzip, first), comp(record.CodecGzip, rest)...)},
	}
}
